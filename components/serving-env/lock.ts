/**
 * What the serving environment is, as data: the pinned requirement set, the environment lock (a
 * hash of the pinned set and the toolkit fingerprint) and the toolkit-keyed JIT cache folder.
 * Pure functions, so the component, the tests and the drift probe agree on them.
 */
import { createHash } from "node:crypto";
import { foreignCudaWheel } from "../cuda-catalog/catalog";
import { VENV_WHEELS_FIELD } from "../drift/repair";
import type { RepairStepInput } from "../drift/schema";
import type { EnvironmentConfig } from "./schema";

/** pip requirement specifiers, in a fixed order. */
export function requirements(env: EnvironmentConfig): string[] {
  const p = env.packages;
  return [
    `torch==${p.torch}`,
    `sglang==${p.sglang}`,
    `flashinfer-python==${p.flashinferPython}`,
    ...(p.flashinferJitCache ? [`flashinfer-jit-cache==${p.flashinferJitCache}`] : []),
    `ninja==${p.ninja}`,
  ];
}

/** pip index options, each option and value its own argument. */
export function indexArgs(env: EnvironmentConfig): string[] {
  return [
    ...(env.pipIndexUrl ? ["--index-url", env.pipIndexUrl] : []),
    ...env.pipExtraIndexUrls.flatMap((u) => ["--extra-index-url", u]),
  ];
}

/** The CUDA release a torch build targets, from its local label: 2.14.1+cu130 -> 13.0. */
export function torchCudaRelease(torchVersion: string): string | undefined {
  const m = /\+cu(\d+)(\d)$/.exec(torchVersion);
  return m ? `${m[1]}.${m[2]}` : undefined;
}

/** Refuses a torch pin built for another CUDA than the toolkit, before anything is downloaded. */
export function checkTorchMatchesToolkit(torchVersion: string, toolkitVersion: string): void {
  const cuda = torchCudaRelease(torchVersion);
  if (cuda === undefined)
    throw new Error(`torch ${torchVersion} is not pinned to a CUDA build (expected a +cuNNN label, e.g. +cu130)`);
  if (cuda !== toolkitVersion)
    throw new Error(`torch ${torchVersion} is built for CUDA ${cuda}, but the toolkit is ${toolkitVersion}`);
}

/** True when pip would download from anywhere but the host itself (pip's default index included). */
export function hasRemoteIndex(env: EnvironmentConfig): boolean {
  const urls = [env.pipIndexUrl, ...env.pipExtraIndexUrls];
  return env.pipIndexUrl === undefined || urls.some((u) => u !== undefined && !u.startsWith("file://"));
}

const normalizeName = (n: string) => n.toLowerCase().replace(/[-_.]+/g, "-");

/**
 * Checks a hash lock (a pip requirements file) before anything is installed: every requirement has
 * a --hash=sha256, and each configured pin appears with exactly its version. Returns the lock text.
 * `where` names the config key in errors.
 */
export function checkHashLock(text: string, env: EnvironmentConfig, where: string): string {
  const entries = text
    .replace(/\\\r?\n/g, " ")
    .split(/\r?\n/)
    .map((l) => l.replace(/(^|\s)#.*$/, "").trim())
    .filter((l) => l.length > 0);
  const pinned = new Map<string, string>();
  for (const line of entries) {
    if (line.startsWith("-")) {
      // Options such as --index-url would send pip elsewhere than the configured indexes.
      throw new Error(`${where}: only requirement lines are allowed, not '${line.split(/\s/)[0]}'`);
    }
    const m = /^([A-Za-z0-9][A-Za-z0-9._-]*)(?:\[[^\]]*\])?\s*==\s*([^\s;]+)/.exec(line);
    if (!m) throw new Error(`${where}: '${line.slice(0, 60)}' is not pinned with ==`);
    if (!/--hash=sha256:[0-9a-f]{64}/.test(line))
      throw new Error(
        `${where}: ${m[1]}==${m[2]} has no --hash=sha256:... (pip-compile --generate-hashes writes them)`,
      );
    pinned.set(normalizeName(m[1]), m[2]);
  }
  for (const r of requirements(env)) {
    const [name, version] = r.split("==");
    const got = pinned.get(normalizeName(name));
    if (got === version || (name === "torch" && got !== undefined && unlabelledTorchMatches(version, got, pinned)))
      continue;
    throw new Error(
      `${where}: must pin ${name}==${version} (from environment.packages), it ${got ? `pins ${got}` : "does not"}` +
        (name === "torch" && got === version.replace(/\+.*$/, "")
          ? `, and its nvidia-cuda-runtime pin (${pinned.get("nvidia-cuda-runtime") ?? "none"}) is not CUDA ${torchCudaRelease(version) ?? "?"}`
          : ""),
    );
  }
  return text;
}

/**
 * A lock may pin torch without its local label (an index that serves the CUDA 13.0 build as plain
 * `2.14.1`, as PyPI does): it matches the pin `2.14.1+cu130` when the public versions agree and the
 * lock's own nvidia-cuda-runtime, the CUDA runtime that torch build depends on, is of the pinned
 * CUDA release. The installed torch's torch.version.cuda is checked again on the host after install.
 */
function unlabelledTorchMatches(pin: string, got: string, pinned: ReadonlyMap<string, string>): boolean {
  const cuda = torchCudaRelease(pin);
  const runtime = pinned.get("nvidia-cuda-runtime") ?? pinned.get(`nvidia-cuda-runtime-cu${cuda?.split(".")[0]}`);
  return (
    cuda !== undefined &&
    !got.includes("+") &&
    got === pin.replace(/\+.*$/, "") &&
    runtime !== undefined &&
    runtime.split(".").slice(0, 2).join(".") === cuda
  );
}

/** sha256 over what the venv holds (pinned set, indexes, hash lock, interpreter, path): `sha256:<hex>`. */
export function pinsLock(env: EnvironmentConfig, hashLock?: string): string {
  const canonical = JSON.stringify({
    requirements: requirements(env),
    indexes: indexArgs(env),
    python: env.python,
    venv: env.venvPath,
    ...(hashLock === undefined ? {} : { hashLock: createHash("sha256").update(hashLock).digest("hex") }),
  });
  return `sha256:${createHash("sha256").update(canonical).digest("hex")}`;
}

/**
 * The environment lock: the venv's pins and the toolkit fingerprint, `sha256:<hex>`. The venv is
 * recorded on the host under pinsLock alone, so its install does not wait for the toolkit's.
 */
export function environmentLock(env: EnvironmentConfig, toolkitFingerprint: string, hashLock?: string): string {
  return `sha256:${createHash("sha256")
    .update(`${pinsLock(env, hashLock)}\0${toolkitFingerprint}`)
    .digest("hex")}`;
}

/** The JIT cache key of a toolkit: its release and a short hash of its fingerprint. */
export function toolkitKey(toolkitVersion: string, toolkitFingerprint: string): string {
  const short = createHash("sha256").update(toolkitFingerprint).digest("hex").slice(0, 16);
  return `cuda${toolkitVersion}-${short}`;
}

/** FLASHINFER_WORKSPACE_BASE for a toolkit: a new toolkit can only ever see a new, empty cache. */
export function jitWorkspace(env: EnvironmentConfig, toolkitVersion: string, toolkitFingerprint: string): string {
  return `${env.jitCacheBase}/${toolkitKey(toolkitVersion, toolkitFingerprint)}`;
}

/** Each pin of a hash lock: normalized name -> version and sha256s (comments and continuations read as pip does). */
export function lockedPins(text: string): Map<string, { version: string; sha256: string[] }> {
  const out = new Map<string, { version: string; sha256: string[] }>();
  for (const line of text.replace(/\\\r?\n/g, " ").split(/\r?\n/)) {
    const m = /^([A-Za-z0-9][A-Za-z0-9._-]*)(?:\[[^\]]*\])?\s*==\s*([^\s;]+)/.exec(
      line.replace(/(^|\s)#.*$/, "").trim(),
    );
    if (m)
      out.set(normalizeName(m[1]), {
        version: m[2],
        sha256: [...line.matchAll(/--hash=sha256:([0-9a-f]{64})/g)].map((h) => h[1]),
      });
  }
  return out;
}

/**
 * Refuses, before anything is downloaded, a hash lock that would put a wheel of another CUDA release
 * beside the toolkit (the rule of the shipped lock's test and of drift: foreignCudaWheel). `where`
 * names the config key.
 */
export function checkLockCudaWheels(text: string, toolkitRelease: string, where: string): void {
  const foreign = [...lockedPins(text)].flatMap(([name, p]) => foreignCudaWheel(name, p.version, toolkitRelease) ?? []);
  if (foreign.length > 0)
    throw new Error(
      `${where}: ${foreign.join("; ")} (one CUDA release per environment: regenerate it with requirements/generate-lock.sh, which holds NVIDIA's wheels to the toolkit's line)`,
    );
}

/**
 * ToolkitState's repair of a foreign CUDA wheel in the venv: scripts/venv-wheels.sh with the lock's
 * nvidia-* and cuda-* pins and their sha256s, so the wheels go back exactly as the lock has them.
 * Without a hash lock there is nothing to put back by hash: the drift is reported, not repaired.
 */
export function venvWheelsRepair(env: EnvironmentConfig, hashLock: string | undefined): RepairStepInput[] {
  if (hashLock === undefined) return [];
  const pins = [...lockedPins(hashLock)]
    .filter(([name]) => name.startsWith("nvidia-") || name.startsWith("cuda-"))
    .sort(([a], [b]) => a.localeCompare(b))
    .flatMap(([name, p]) => [`${name}==${p.version}`, p.sha256.join(",")]);
  return [
    {
      fields: [VENV_WHEELS_FIELD],
      script: "components/serving-env/scripts/venv-wheels.sh",
      args: [env.venvPath, ...indexArgs(env), "--", ...pins],
    },
  ];
}
