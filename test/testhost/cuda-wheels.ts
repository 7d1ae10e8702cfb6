/**
 * NVIDIA's CUDA wheels (pinned in components/cuda-catalog/cuda.yaml by version and sha256), fetched
 * once per machine with pip into a cache outside the repository and verified on every use, then
 * unpacked for the test host's apt repository. pip itself checks the pinned hash
 * (--require-hashes); the file is hashed again before it enters the cache and whenever it is read,
 * so a damaged cache is named, never packaged.
 */
import { createHash } from "node:crypto";
import { createReadStream, existsSync, promises as fs } from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import type { Wheel } from "../../components/cuda-catalog/catalog";
import { run, withLock } from "./proc";

/** Where verified wheels live: GPUHOST_CUDA_WHEEL_CACHE, else ~/.cache/gpuhost/cuda-wheels. */
export function wheelCacheDir(): string {
  return process.env.GPUHOST_CUDA_WHEEL_CACHE ?? path.join(os.homedir(), ".cache", "gpuhost", "cuda-wheels");
}

/** The cached file of a wheel: its name carries the version and the pinned hash. */
export function cachedWheelPath(wheel: Wheel, dir = wheelCacheDir()): string {
  return path.join(dir, `${wheel.name}-${wheel.version}-${wheel.sha256.slice(0, 16)}.whl`);
}

export async function sha256File(file: string): Promise<string> {
  const h = createHash("sha256");
  for await (const chunk of createReadStream(file)) h.update(chunk as Buffer);
  return h.digest("hex");
}

async function verified(wheel: Wheel, file: string): Promise<string> {
  const actual = await sha256File(file);
  if (actual !== wheel.sha256) {
    throw new Error(
      `${file}: sha256 ${actual}, but components/cuda-catalog/cuda.yaml pins ${wheel.name} ${wheel.version} at ${wheel.sha256}`,
    );
  }
  return file;
}

export interface FetchReport {
  /** Verified wheel file by wheel name. */
  files: Map<string, string>;
  /** Names of the wheels this call downloaded (the rest came from the cache). */
  downloaded: string[];
}

/** Returns each wheel's verified cached file, downloading the missing ones with pip first. */
export async function fetchWheels(wanted: Wheel[], dir = wheelCacheDir()): Promise<FetchReport> {
  await fs.mkdir(dir, { recursive: true });
  const files = new Map<string, string>();
  const downloaded: string[] = [];
  for (const wheel of wanted) {
    const target = cachedWheelPath(wheel, dir);
    if (!existsSync(target)) {
      await withLock(`${target}.lock`, 20 * 60_000, async () => {
        if (existsSync(target)) return;
        const work = await fs.mkdtemp(path.join(dir, "download-"));
        try {
          const requirements = path.join(work, "requirements.txt");
          await fs.writeFile(requirements, `${wheel.name}==${wheel.version} --hash=sha256:${wheel.sha256}\n`);
          await run(
            "python3",
            [
              "-m",
              "pip",
              "download",
              "--no-deps",
              "--only-binary=:all:",
              "--require-hashes",
              "--disable-pip-version-check",
              "--quiet",
              "-r",
              requirements,
              "-d",
              work,
            ],
            { timeoutMs: 15 * 60_000 },
          );
          const got = (await fs.readdir(work)).filter((f) => f.endsWith(".whl"));
          if (got.length !== 1) throw new Error(`pip download ${wheel.name}==${wheel.version}: got ${got.join(", ")}`);
          await verified(wheel, path.join(work, got[0]));
          await fs.rename(path.join(work, got[0]), target); // atomic: the cache never holds half a wheel
          downloaded.push(wheel.name);
        } finally {
          await fs.rm(work, { recursive: true, force: true });
        }
      });
    }
    files.set(wheel.name, await verified(wheel, target));
  }
  return { files, downloaded };
}

// zipfile keeps no permission bits on extraction, and the wheels' own (0744, 0664) are not what
// NVIDIA's .debs ship: executables (nvcc, ptxas, cicc) become 0755, everything else 0644.
const UNZIP_PY = `import os, sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as z:
    for info in z.infolist():
        out = z.extract(info, sys.argv[2])
        if not info.is_dir():
            os.chmod(out, 0o755 if (info.external_attr >> 16) & 0o111 else 0o644)
`;

/** Unpacks a wheel into `dir` (created), keeping its files' modes. */
export async function unpackWheel(file: string, dir: string): Promise<void> {
  await fs.mkdir(dir, { recursive: true });
  await run("python3", ["-c", UNZIP_PY, file, dir], { timeoutMs: 10 * 60_000 });
}
