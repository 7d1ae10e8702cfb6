// The stand-in packages of the CUDA catalogue (components/cuda-catalog/cuda.yaml): the files the
// simulated host's apt repository holds in place of NVIDIA's (which need a GPU machine and NVIDIA's
// servers), each marked as a stand-in. The simulated platform's preparation writes them into the
// host's folder; the stand-in nvcc (standin/nvcc) imitates what gpuhost's checks ask of the real one.
import * as fs from "node:fs";
import * as path from "node:path";
import {
  allPackages,
  filesOf,
  getPackage,
  type ResolvedFile,
  toolkit,
  wheelsOf,
} from "../components/cuda-catalog/catalog";
import { projectFile } from "../project-files";

/** A stand-in file: regular content with a mode, or a symlink. */
export type StandinContent = { kind: "file"; mode: number; content: string } | { kind: "link"; target: string };

/** The marker every stand-in regular file carries, so nobody mistakes one for NVIDIA's. */
export const STANDIN_MARKER = "gpuhost stand-in";

export function standinNvcc(release: string): string {
  const tk = toolkit(release);
  let text = fs.readFileSync(projectFile("sim-host/standin/nvcc"), "utf8");
  for (const key of ["nvccRelease", "nvccVersion", "nvccBuild", "nvccBuiltOn"] as const) {
    const re = new RegExp(`^(readonly [A-Z_]+=)"[^"]*"(\\s+# gpuhost:${key})$`, "m");
    if (!re.test(text)) throw new Error(`standin/nvcc lacks the gpuhost:${key} line`);
    text = text.replace(re, (_m, head: string, tail: string) => `${head}"${tk[key]}"${tail}`);
  }
  return text;
}

export function standinContent(resolved: ResolvedFile): StandinContent {
  const { file, package: pkgName } = resolved;
  const pkg = getPackage(pkgName);
  if (file.link !== undefined) return { kind: "link", target: file.link };
  const base = path.posix.basename(resolved.path);
  const origin = `${pkgName} ${pkg.version}`;
  switch (file.kind) {
    case "header": {
      const guard = `GPUHOST_STANDIN_${base.replace(/[^A-Za-z0-9]/g, "_").toUpperCase()}`;
      const text = `/* ${STANDIN_MARKER}: ${base} from ${origin}. Not NVIDIA's header. */\n#ifndef ${guard}\n#define ${guard} 1\n#endif\n`;
      return { kind: "file", mode: 0o644, content: text };
    }
    case "library":
      return { kind: "file", mode: 0o644, content: `${STANDIN_MARKER} shared library ${base} from ${origin}\n` };
    case "nvcc":
      return { kind: "file", mode: 0o755, content: standinNvcc(pkg.toolkit!) };
    case "tool":
      return {
        kind: "file",
        mode: 0o755,
        content: `#!/usr/bin/env bash\n# ${STANDIN_MARKER} ${base} from ${origin}\necho "${STANDIN_MARKER}: ${base} does nothing"\n`,
      };
    case "version-json": {
      const tk = toolkit(pkg.toolkit!);
      const json = { cuda: { name: "CUDA SDK", version: tk.versionJson }, gpuhost_standin: true };
      return { kind: "file", mode: 0o644, content: `${JSON.stringify(json, null, 2)}\n` };
    }
    case "keyring":
      return { kind: "file", mode: 0o644, content: `${STANDIN_MARKER} keyring from ${origin}\n` };
    default:
      throw new Error(`${resolved.path}: no stand-in for kind ${String(file.kind)}`);
  }
}

/** Debian control stanza for a stand-in package (the test host's .debs, the simulated repo). */
export function controlFile(
  packageName: string,
  architecture = "amd64",
  contents: "standin" | "wheels" = "standin",
): string {
  const pkg = getPackage(packageName);
  const fromWheels = wheelsOf([pkg.name]).map((w) => `${w.name} ${w.version}`);
  const description =
    contents === "wheels" && fromWheels.length > 0
      ? `NVIDIA's ${pkg.name} files, repackaged by gpuhost from the wheel(s) ${fromWheels.join(", ")}`
      : `${STANDIN_MARKER} for NVIDIA's ${pkg.name}`;
  const lines = [
    `Package: ${pkg.name}`,
    `Version: ${pkg.version}`,
    `Architecture: ${pkg.name === "cuda-keyring" ? "all" : architecture}`,
    `Maintainer: ${contents === "wheels" ? "gpuhost (NVIDIA's files repackaged)" : "gpuhost stand-ins"} <gpuhost@localhost>`,
    ...(pkg.depends.length > 0 ? [`Depends: ${pkg.depends.join(", ")}`] : []),
    `Description: ${description}`,
  ];
  return `${lines.join("\n")}\n`;
}

/**
 * Write each package as a dpkg-deb source tree: <dir>/<package>/DEBIAN/control plus its files at
 * their host paths. `dpkg-deb --build <dir>/<package>` makes the test host's .deb; the simulated
 * host's apt-get shim installs straight from these trees. Idempotent: unchanged files are kept.
 */
export function writeStandinTrees(dir: string, packages: string[] = allPackages().map((p) => p.name)): void {
  for (const name of packages) {
    const tree = path.join(dir, name);
    writeIfChanged(path.join(tree, "DEBIAN", "control"), controlFile(name), 0o644);
    for (const resolved of filesOf(name)) {
      const target = path.join(tree, resolved.path);
      const content = standinContent(resolved);
      if (content.kind === "link") {
        fs.mkdirSync(path.dirname(target), { recursive: true });
        const current = fs.lstatSync(target, { throwIfNoEntry: false });
        if (current?.isSymbolicLink() && fs.readlinkSync(target) === content.target) continue;
        if (current) fs.rmSync(target, { force: true });
        fs.symlinkSync(content.target, target);
      } else {
        writeIfChanged(target, content.content, content.mode);
      }
    }
  }
}

function writeIfChanged(file: string, content: string, mode: number): void {
  fs.mkdirSync(path.dirname(file), { recursive: true });
  const current = fs.existsSync(file) ? fs.readFileSync(file, "utf8") : undefined;
  if (current !== content) fs.writeFileSync(file, content, { mode });
  fs.chmodSync(file, mode);
}
