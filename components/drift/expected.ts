// The expected toolkit state, derived from THE toolkit description (components/cuda-catalog/cuda.yaml):
// the packages of the full toolkit with their versions, the required files with the package that
// provides each (the repair hint), CUDA_HOME and the /usr/local/cuda target. The units and the
// JIT cache key come from the components that render and create them.
import * as path from "node:path";
import { getPackage, packagesOf, requiredFiles, toolkit } from "../cuda-catalog/catalog";
import type { ExpectedState } from "./schema";

export interface ExpectedToolkitOptions {
  /** CUDA release, e.g. "13.0". */
  release: string;
  /** Rendered unit files: path -> sha256 of the content, and the expected systemd answers. */
  units?: ExpectedState["units"];
  /** PATH the units set (checked with `which nvcc`). */
  unitPath?: string;
  /** Folder whose sub-folders are FlashInfer JIT caches keyed by toolkit. */
  jitBase?: string;
  /** The key in use (the one sub-folder of jitBase). */
  jitKey?: string;
  /** The serving venv, whose CUDA wheels must stay of this release. */
  venvPath?: string;
}

export function expectedToolkitState(opts: ExpectedToolkitOptions): ExpectedState {
  const tk = toolkit(opts.release);
  const suffix = opts.release.replace(".", "-");
  const packages: Record<string, string> = {};
  for (const name of packagesOf(tk.meta)) {
    // The probe lists cuda-*-SUFFIX and lib*-SUFFIX; anything else is not the toolkit's.
    if (name.endsWith(`-${suffix}`) && (name.startsWith("cuda-") || name.startsWith("lib"))) {
      packages[name] = getPackage(name).version;
    }
  }
  const files: Record<string, string> = {};
  for (const f of requiredFiles(opts.release)) {
    // nvcc is checked by running it (version through CUDA_HOME and PATH), not by hash.
    if (f.file.kind === "nvcc") continue;
    files[f.path] = f.package;
  }
  return {
    toolkitVersion: tk.nvccRelease,
    cudaHome: tk.root,
    ...(opts.unitPath !== undefined ? { unitPath: opts.unitPath } : {}),
    cudaLink: tk.root,
    packageSuffix: suffix,
    packages,
    files,
    units: opts.units ?? {},
    ...(opts.jitBase !== undefined ? { jitBase: path.posix.normalize(opts.jitBase) } : {}),
    ...(opts.jitKey !== undefined ? { jitKey: opts.jitKey } : {}),
    ...(opts.venvPath !== undefined ? { venvPath: path.posix.normalize(opts.venvPath) } : {}),
  };
}
