/**
 * The stand-in Python serving stack: small hand-made wheels named torch, sglang, flashinfer-python
 * and ninja (sources in standin-python/), at the versions the serving environment pins, served as a
 * PEP 503 simple index on 127.0.0.1. They are STAND-INS: torch does no math, sglang execs the
 * project's simulator, flashinfer runs only its JIT lookup and compile (see README.md).
 */
import { createHash } from "node:crypto";
import { promises as fs } from "node:fs";
import * as path from "node:path";
import { PinnedPackagesSchema } from "../../components/serving-env/schema";
import { run } from "./proc";
import { serveDirectory } from "./static-server";

const STANDIN_DIR = path.join(__dirname, "standin-python");

export interface StandinVersions {
  torch: string;
  sglang: string;
  flashinferPython: string;
  ninja: string;
}

export interface PythonIndex {
  /** pip --index-url (the PEP 503 root, ends with /simple/). */
  indexUrl: string;
  port: number;
  versions: StandinVersions;
  /** Requirement lines for exactly these versions, e.g. torch==2.14.1+cu130. */
  requirements: string[];
  requests: string[];
  /** The index folder (simple/ and files/), to copy onto a host for a file:// index. */
  dir: string;
  close(): Promise<void>;
}

/** The serving environment's default pins: the stand-ins are built at exactly these versions. */
export function pinnedVersions(): StandinVersions {
  const pins = PinnedPackagesSchema.parse({});
  return { torch: pins.torch, sglang: pins.sglang, flashinferPython: pins.flashinferPython, ninja: pins.ninja };
}

/** torch's CUDA build from its local label, as PyTorch names its wheels: +cu130 -> "13.0". */
export function torchCudaOf(torchVersion: string): string {
  const m = /\+cu(\d+)(\d)$/.exec(torchVersion);
  if (!m) throw new Error(`torch version ${torchVersion} has no +cuNNN label`);
  return `${m[1]}.${m[2]}`;
}

interface WheelSpec {
  project: string;
  version: string;
  src: string;
  requires: string[];
  scripts: string[];
  subst: Record<string, string>;
}

function wheelSpecs(v: StandinVersions): WheelSpec[] {
  return [
    {
      project: "torch",
      version: v.torch,
      src: "torch",
      requires: [],
      scripts: [],
      subst: { TORCH_VERSION: v.torch, TORCH_CUDA: torchCudaOf(v.torch) },
    },
    {
      project: "ninja",
      version: v.ninja,
      src: "ninja",
      requires: [],
      scripts: ["ninja=ninja:main"],
      subst: { NINJA_VERSION: v.ninja },
    },
    {
      project: "flashinfer-python",
      version: v.flashinferPython,
      src: "flashinfer-python",
      requires: ["torch", "ninja"],
      scripts: ["flashinfer=flashinfer.__main__:main"],
      subst: { FLASHINFER_VERSION: v.flashinferPython },
    },
    {
      project: "sglang",
      version: v.sglang,
      src: "sglang",
      // as the real wheel does, sglang pins flashinfer and needs torch
      requires: ["torch", `flashinfer-python==${v.flashinferPython}`],
      scripts: [],
      subst: { SGLANG_VERSION: v.sglang },
    },
  ];
}

/** PEP 503: /simple/ lists projects, /simple/<normalized>/ links each file with its sha256. */
async function writeSimpleIndex(root: string, wheels: Array<{ project: string; file: string }>): Promise<void> {
  const normalized = (p: string) => p.toLowerCase().replace(/[-_.]+/g, "-");
  const page = (title: string, links: string[]) =>
    `<!DOCTYPE html>\n<html><head><meta name="pypi:repository-version" content="1.0"><title>${title}</title></head><body>\n${links.join("\n")}\n</body></html>\n`;
  await fs.mkdir(path.join(root, "simple"), { recursive: true });
  const projects = [...new Set(wheels.map((w) => normalized(w.project)))].sort();
  await fs.writeFile(
    path.join(root, "simple/index.html"),
    page(
      "Simple index",
      projects.map((p) => `<a href="${p}/">${p}</a>`),
    ),
  );
  for (const project of projects) {
    const links: string[] = [];
    for (const w of wheels.filter((x) => normalized(x.project) === project)) {
      const sha = createHash("sha256")
        .update(await fs.readFile(path.join(root, "files", w.file)))
        .digest("hex");
      links.push(`<a href="../../files/${encodeURIComponent(w.file)}#sha256=${sha}">${w.file}</a>`);
    }
    await fs.mkdir(path.join(root, "simple", project), { recursive: true });
    await fs.writeFile(path.join(root, "simple", project, "index.html"), page(`Links for ${project}`, links));
  }
}

/** Builds the stand-in wheels (about a second) and serves them as a simple index on loopback. */
export async function servePythonIndex(
  opts: { versions?: Partial<StandinVersions>; workRoot?: string } = {},
): Promise<PythonIndex> {
  const versions = { ...pinnedVersions(), ...opts.versions };
  const dir = await fs.mkdtemp(path.join(opts.workRoot ?? "/tmp", "gpuhost-pyindex-"));
  try {
    const files = path.join(dir, "files");
    const wheels: Array<{ project: string; file: string }> = [];
    for (const spec of wheelSpecs(versions)) {
      const args = [
        path.join(STANDIN_DIR, "make_wheel.py"),
        path.join(STANDIN_DIR, spec.src),
        spec.project,
        spec.version,
        files,
      ];
      for (const r of spec.requires) args.push("--requires", r);
      for (const s of spec.scripts) args.push("--script", s);
      for (const [k, val] of Object.entries(spec.subst)) args.push("--subst", `${k}=${val}`);
      const out = await run("python3", args);
      wheels.push({ project: spec.project, file: path.basename(out.stdout.trim()) });
    }
    await writeSimpleIndex(dir, wheels);
    const server = await serveDirectory(dir);
    return {
      indexUrl: `${server.url}simple/`,
      port: server.port,
      versions,
      requirements: [
        `torch==${versions.torch}`,
        `sglang==${versions.sglang}`,
        `flashinfer-python==${versions.flashinferPython}`,
        `ninja==${versions.ninja}`,
      ],
      requests: server.requests,
      dir,
      close: async () => {
        await server.close();
        await fs.rm(dir, { recursive: true, force: true });
      },
    };
  } catch (err) {
    await fs.rm(dir, { recursive: true, force: true });
    throw err;
  }
}
