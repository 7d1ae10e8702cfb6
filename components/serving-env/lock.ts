/**
 * What the serving environment is, as data: the pinned requirement set, the environment lock (a
 * hash of the pinned set and the toolkit fingerprint) and the toolkit-keyed JIT cache folder.
 * Pure functions, so the component, the tests and the drift probe agree on them.
 */
import { createHash } from "node:crypto";
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

/** sha256 over what the venv holds (pinned set, indexes, interpreter, path): `sha256:<hex>`. */
export function pinsLock(env: EnvironmentConfig): string {
  const canonical = JSON.stringify({
    requirements: requirements(env),
    indexes: indexArgs(env),
    python: env.python,
    venv: env.venvPath,
  });
  return `sha256:${createHash("sha256").update(canonical).digest("hex")}`;
}

/**
 * The environment lock: the venv's pins and the toolkit fingerprint, `sha256:<hex>`. The venv is
 * recorded on the host under pinsLock alone, so its install does not wait for the toolkit's.
 */
export function environmentLock(env: EnvironmentConfig, toolkitFingerprint: string): string {
  return `sha256:${createHash("sha256")
    .update(`${pinsLock(env)}\0${toolkitFingerprint}`)
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
