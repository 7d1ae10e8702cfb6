/**
 * The test host's local apt repository: .deb packages built with dpkg-deb from THE toolkit
 * description (components/cuda-catalog/cuda.yaml through its loader), laid out like NVIDIA's flat CUDA
 * repository (`deb [signed-by=...] URL /`), signed with a throwaway GPG key and served over HTTP
 * on 127.0.0.1. A cuda-keyring package installs the keyring and the sources entry, as NVIDIA's does.
 *
 * A package whose description has `fromWheel:` entries holds NVIDIA's own files (nvcc, headers,
 * libraries) from the pinned wheels (cuda-wheels.ts), at the paths NVIDIA's .debs use, with the
 * links the wheels lack; the others (meta packages, the 12.8 toolkit, cuobjdump, compute-sanitizer,
 * version.json, nvml.h) hold the description's stand-ins.
 *
 * The toolkit .debs and the key are cached (keyed by the description, whose wheel pins include
 * their sha256, the stand-in nvcc and the scripts below); the keyring package, the index and the
 * signatures are made per serve because the sources entry names the port the repository is served on.
 */
import { createHash, randomBytes } from "node:crypto";
import { existsSync, promises as fs } from "node:fs";
import * as path from "node:path";
import * as toolkitDescription from "../../components/cuda-catalog/catalog";
import * as standins from "../../sim-host/standin";
import { fetchWheels, unpackWheel } from "./cuda-wheels";
import { run, withLock } from "./proc";
import { serveDirectory, StaticServer } from "./static-server";

/** Where NVIDIA's cuda-keyring for debian12/x86_64 puts its sources entry. */
export const CUDA_SOURCES_LIST = "/etc/apt/sources.list.d/cuda-debian12-x86_64.list";
const KEY_UID = "gpuhost test repository (throwaway, tests only) <gpuhost-test-repo@localhost>";
/** Bumped when the build below changes, so the cache key follows it (scripts and control files are hashed). */
const BUILDER_VERSION = 2;

export interface ToolkitDebs {
  /** Folder of <package>_<version>_<arch>.deb files (every package but cuda-keyring). */
  debDir: string;
  gnupgHome: string;
  /** The repository's public key, binary (what a signed-by keyring file holds). */
  publicKeyring: Buffer;
  built: boolean;
}

export interface AptRepo {
  /** Base URL of the flat repository: `deb [signed-by=<keyringPath>] <url> /`. */
  url: string;
  port: number;
  /** URL of the cuda-keyring .deb (download and `dpkg -i`, as NVIDIA's instructions say). */
  keyringDebUrl: string;
  /** sha256 of that .deb: what a stack pins as toolkit.repository.keyringSha256. */
  keyringSha256: string;
  /** The keyring file the cuda-keyring package installs (from the toolkit description). */
  keyringPath: string;
  sourcesListPath: string;
  /** The sources line cuda-keyring installs. */
  sourcesLine: string;
  requests: string[];
  dir: string;
  close(): Promise<void>;
}

function keyringFilePath(): string {
  const keyring = toolkitDescription.filesOf("cuda-keyring").find((f) => f.file.kind === "keyring");
  if (!keyring) throw new Error("toolkit description: cuda-keyring ships no keyring file");
  return keyring.path;
}

/**
 * The package of each toolkit that registers /usr/local/cuda with update-alternatives. NVIDIA does
 * this in the toolkit's config-common package (it owns version.json), so every toolkit package,
 * nvcc alone included, brings the registration along.
 */
function alternativesOwners(): Map<string, toolkitDescription.Toolkit> {
  const owners = new Map<string, toolkitDescription.Toolkit>();
  for (const pkg of toolkitDescription.allPackages()) {
    if (pkg.toolkit !== undefined && pkg.files.some((f) => f.kind === "version-json")) {
      owners.set(pkg.name, toolkitDescription.toolkit(pkg.toolkit));
    }
  }
  return owners;
}

function maintainerScripts(tk: toolkitDescription.Toolkit): { postinst: string; prerm: string } {
  const major = tk.release.split(".")[0];
  const prio = tk.alternativesPriority;
  return {
    postinst: [
      "#!/bin/sh",
      `# gpuhost stand-in: registers ${tk.root} as the /usr/local/cuda alternative, as NVIDIA's packages do`,
      "set -e",
      'if [ "$1" = "configure" ]; then',
      `  update-alternatives --install /usr/local/cuda cuda ${tk.root} ${prio}`,
      `  update-alternatives --install /usr/local/cuda-${major} cuda-${major} ${tk.root} ${prio}`,
      "fi",
      "",
    ].join("\n"),
    prerm: [
      "#!/bin/sh",
      "set -e",
      'if [ "$1" = "remove" ] || [ "$1" = "deconfigure" ]; then',
      `  update-alternatives --remove cuda ${tk.root}`,
      `  update-alternatives --remove cuda-${major} ${tk.root}`,
      "fi",
      "",
    ].join("\n"),
  };
}

function cacheKey(): string {
  const h = createHash("sha256");
  h.update(toolkitDescription.descriptionHash());
  for (const release of toolkitDescription.toolkitReleases()) h.update(standins.standinNvcc(release));
  for (const tk of alternativesOwners().values()) h.update(JSON.stringify(maintainerScripts(tk)));
  for (const pkg of toolkitDescription.allPackages()) {
    h.update(standins.controlFile(pkg.name, "amd64", pkg.fromWheel.length > 0 ? "wheels" : "standin"));
  }
  h.update(String(BUILDER_VERSION));
  return h.digest("hex").slice(0, 12);
}

async function gpg(home: string, args: string[], input?: string): Promise<string> {
  const r = await run(
    "gpg",
    ["--batch", "--quiet", "--homedir", home, "--pinentry-mode", "loopback", "--passphrase", "", ...args],
    {
      input,
      timeoutMs: 60_000,
    },
  );
  return r.stdout;
}

async function buildDeb(tree: string, outDir: string): Promise<void> {
  // zstd at a low level: NVIDIA's libraries run to 540 MB, and xz would cost minutes on a 2-core
  // runner for every cache rebuild; dpkg reads zstd since Debian 12
  await run("dpkg-deb", ["--root-owner-group", "-Zzstd", "-z3", "--build", tree, outDir], { timeoutMs: 10 * 60_000 });
}

/**
 * Writes the dpkg-deb trees of the packages holding NVIDIA's files: each `fromWheel:` entry moved
 * out of the unpacked wheels to its path under the toolkit root, then the description's links made
 * beside them; a regular file the description names must have come from a wheel.
 */
async function writeWheelTrees(trees: string, names: string[], unpacked: string): Promise<void> {
  const wheels = new Map(toolkitDescription.wheels().map((w) => [w.name, w]));
  for (const name of names) {
    const pkg = toolkitDescription.getPackage(name);
    const tree = path.join(trees, name);
    const root = path.join(tree, toolkitDescription.toolkit(pkg.toolkit!).root);
    await fs.mkdir(path.join(tree, "DEBIAN"), { recursive: true });
    await fs.writeFile(path.join(tree, "DEBIAN/control"), standins.controlFile(name, "amd64", "wheels"));
    for (const take of pkg.fromWheel) {
      const source = path.join(unpacked, take.wheel, wheels.get(take.wheel)!.prefix, take.from);
      if (!existsSync(source)) throw new Error(`${name}: the wheel ${take.wheel} has no ${take.from}`);
      await fs.mkdir(path.dirname(path.join(root, take.to)), { recursive: true });
      await fs.rename(source, path.join(root, take.to));
    }
    for (const resolved of toolkitDescription.filesOf(name)) {
      const target = path.join(tree, resolved.path);
      if (resolved.file.link !== undefined) {
        await fs.mkdir(path.dirname(target), { recursive: true });
        await fs.symlink(resolved.file.link, target);
      } else if (!existsSync(target)) {
        throw new Error(`${name}: ${resolved.path} is in the description, but no fromWheel entry provides it`);
      }
    }
  }
}

/** Builds (or finds cached) the toolkit .debs and the throwaway signing key. */
export async function buildToolkitDebs(
  cacheDir = process.env.GPUHOST_TESTHOST_CACHE ?? "/var/cache/gpuhost/testhost",
): Promise<ToolkitDebs> {
  const dir = path.join(cacheDir, `apt-${cacheKey()}`);
  const result = async (built: boolean): Promise<ToolkitDebs> => ({
    debDir: path.join(dir, "debs"),
    gnupgHome: path.join(dir, "gnupg"),
    publicKeyring: await fs.readFile(path.join(dir, "repo-keyring.gpg")),
    built,
  });
  if (existsSync(path.join(dir, "complete"))) return result(false);
  await fs.mkdir(cacheDir, { recursive: true });
  return withLock(`${dir}.lock`, 30 * 60_000, async () => {
    if (existsSync(path.join(dir, "complete"))) return result(false);
    await fs.rm(dir, { recursive: true, force: true });
    const trees = path.join(dir, "trees");
    const debs = path.join(dir, "debs");
    await fs.mkdir(debs, { recursive: true });
    const names = toolkitDescription
      .allPackages()
      .map((p) => p.name)
      .filter((n) => n !== "cuda-keyring");
    const real = names.filter((n) => toolkitDescription.getPackage(n).fromWheel.length > 0);
    standins.writeStandinTrees(
      trees,
      names.filter((n) => !real.includes(n)),
    );
    const unpacked = path.join(dir, "wheels");
    const fetched = await fetchWheels(toolkitDescription.wheelsOf(real));
    for (const [wheel, file] of fetched.files) await unpackWheel(file, path.join(unpacked, wheel));
    await writeWheelTrees(trees, real, unpacked);
    await fs.rm(unpacked, { recursive: true, force: true });
    for (const [name, tk] of alternativesOwners()) {
      const scripts = maintainerScripts(tk);
      await fs.writeFile(path.join(trees, name, "DEBIAN/postinst"), scripts.postinst, { mode: 0o755 });
      await fs.writeFile(path.join(trees, name, "DEBIAN/prerm"), scripts.prerm, { mode: 0o755 });
    }
    for (const name of names) await buildDeb(path.join(trees, name), debs);
    await fs.rm(trees, { recursive: true, force: true });

    // a fresh key per cache: it signs nothing but this test repository
    const home = path.join(dir, "gnupg");
    await fs.mkdir(home, { mode: 0o700 });
    await gpg(home, ["--quick-gen-key", KEY_UID, "ed25519", "sign", "never"]);
    await fs.writeFile(
      path.join(dir, "repo-keyring.gpg"),
      await runBuffer("gpg", ["--batch", "--homedir", home, "--export"]),
    );
    await run("gpgconf", ["--homedir", home, "--kill", "gpg-agent"], { allowFailure: true });
    await fs.writeFile(path.join(dir, "complete"), new Date().toISOString());
    return result(true);
  });
}

/**
 * The Packages stanzas of the cached toolkit .debs, as `dpkg-scanpackages --multiversion .` in
 * their folder writes them (Filename: ./NAME.deb, the layout of the served repository), made once
 * per cache: hashing 691 MB of .debs three ways took about 50 s of every suite's start under load.
 * The cache's .debs never change once complete (a changed description is a new cache folder).
 */
async function packagesOfDebs(debDir: string): Promise<string> {
  const file = path.join(path.dirname(debDir), "debs.Packages");
  if (existsSync(file)) return (await fs.readFile(file, "utf8")).trimEnd();
  const scanned = (await run("dpkg-scanpackages", ["--multiversion", "."], { cwd: debDir })).stdout.trimEnd();
  // another suite may be writing it too: each writes its own file and renames it into place
  const partial = `${file}.${process.pid}-${randomBytes(4).toString("hex")}`;
  await fs.writeFile(partial, scanned);
  await fs.rename(partial, file);
  return scanned;
}

async function runBuffer(cmd: string, args: string[]): Promise<Buffer> {
  const { execFile } = await import("node:child_process");
  return new Promise((resolve, reject) =>
    // err: the Error execFile fails with (@types/node's ExecFileException is an Omit<> of one).
    execFile(cmd, args, { encoding: "buffer", maxBuffer: 1 << 24 }, (err: Error | null, stdout: Buffer) =>
      err ? reject(err) : resolve(stdout),
    ),
  );
}

/**
 * Serves the repository on 127.0.0.1: builds the cuda-keyring package for this port, indexes
 * with dpkg-scanpackages, writes Release with apt-ftparchive and signs it (InRelease, Release.gpg).
 */
export async function serveAptRepo(
  opts: {
    cacheDir?: string;
    workRoot?: string;
    /**
     * The repository as the host will reach it when it is copied onto the host (copyOntoHost), e.g.
     * file:///srv/gpuhost-apt/: gpuhost takes package sources over https or file:// only. The
     * loopback HTTP server still runs for tests of the repository itself.
     */
    fileUrl?: string;
  } = {},
): Promise<AptRepo> {
  const debs = await buildToolkitDebs(opts.cacheDir);
  const dir = await fs.mkdtemp(path.join(opts.workRoot ?? "/tmp", "gpuhost-aptrepo-"));
  let server: StaticServer | undefined;
  try {
    server = await serveDirectory(dir);
    for (const f of await fs.readdir(debs.debDir)) {
      // a hard link when the cache shares the filesystem, a copy otherwise
      await fs
        .link(path.join(debs.debDir, f), path.join(dir, f))
        .catch(() => fs.copyFile(path.join(debs.debDir, f), path.join(dir, f)));
    }

    const keyringPath = keyringFilePath();
    const base = opts.fileUrl ?? server.url;
    const sourcesLine = `deb [signed-by=${keyringPath}] ${base} /`;
    const trees = path.join(dir, ".keyring-tree");
    standins.writeStandinTrees(trees, ["cuda-keyring"]);
    // the description's stand-in keyring is a marker file; apt needs the real public key here
    await fs.writeFile(path.join(trees, "cuda-keyring", keyringPath), debs.publicKeyring, { mode: 0o644 });
    const list = path.join(trees, "cuda-keyring", CUDA_SOURCES_LIST);
    await fs.mkdir(path.dirname(list), { recursive: true });
    await fs.writeFile(list, `${sourcesLine}\n`, { mode: 0o644 });
    // built apart and indexed alone: the toolkit's stanzas come from the cache (packagesOfDebs)
    const keyringDir = path.join(trees, "out");
    await fs.mkdir(keyringDir);
    await buildDeb(path.join(trees, "cuda-keyring"), keyringDir);
    const keyringStanza = (await run("dpkg-scanpackages", ["--multiversion", "."], { cwd: keyringDir })).stdout;
    for (const f of await fs.readdir(keyringDir)) await fs.rename(path.join(keyringDir, f), path.join(dir, f));
    await fs.rm(trees, { recursive: true, force: true });

    await fs.writeFile(path.join(dir, "Packages"), `${await packagesOfDebs(debs.debDir)}\n\n${keyringStanza}`);
    await run("gzip", ["-9kn", "Packages"], { cwd: dir });
    const release = await run(
      "apt-ftparchive",
      [
        "-o",
        "APT::FTPArchive::Release::Origin=gpuhost-standin",
        "-o",
        "APT::FTPArchive::Release::Label=gpuhost test CUDA repository",
        "release",
        ".",
      ],
      { cwd: dir },
    );
    await fs.writeFile(path.join(dir, "Release"), release.stdout);
    await gpg(debs.gnupgHome, ["--clearsign", "-o", path.join(dir, "InRelease"), path.join(dir, "Release")]);
    await gpg(debs.gnupgHome, ["-abs", "-o", path.join(dir, "Release.gpg"), path.join(dir, "Release")]);
    // signing started a gpg-agent for this key's home: it must not outlive the test
    await run("gpgconf", ["--homedir", debs.gnupgHome, "--kill", "gpg-agent"], { allowFailure: true });

    const keyringDeb = (await fs.readdir(dir)).find((f) => f.startsWith("cuda-keyring_") && f.endsWith(".deb"));
    const srv = server;
    const keyringSha256 = createHash("sha256")
      .update(await fs.readFile(path.join(dir, keyringDeb ?? "")))
      .digest("hex");
    return {
      url: base,
      port: srv.port,
      keyringDebUrl: `${base}${keyringDeb}`,
      keyringSha256,
      keyringPath,
      sourcesListPath: CUDA_SOURCES_LIST,
      sourcesLine,
      requests: srv.requests,
      dir,
      close: async () => {
        await srv.close();
        await fs.rm(dir, { recursive: true, force: true });
      },
    };
  } catch (err) {
    await server?.close();
    await fs.rm(dir, { recursive: true, force: true });
    throw err;
  }
}

/** Copies a package source folder onto the test host at the path of its file:// URL. */
export async function copyOntoHost(dir: string, rootDir: string, fileUrl: string): Promise<void> {
  const target = path.join(rootDir, new URL(fileUrl).pathname);
  await fs.mkdir(target, { recursive: true });
  await run("cp", ["-a", `${dir}/.`, target]);
}
