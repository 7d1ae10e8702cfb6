// What CudaToolkit runs on a host, as plain data: each script file and its arguments, derived
// from the options and THE toolkit description. The component turns this into Commands; the
// tests run the very same plan through execOnHost on a simulated host. No Pulumi import.
import * as fs from "node:fs";
import * as path from "node:path";
import { projectFile } from "../../project-files";
import { packagesOf, requiredFiles, toolkit } from "../cuda-catalog/catalog";
import { type CudaToolkitOptions, defaultRepositoryUrl } from "./options";
import { PCIE_QUERY_FIELDS } from "./topology";

export interface ScriptStep {
  /** Script path relative to the project root. */
  script: string;
  args: string[];
}

export interface ToolkitPlan {
  release: string;
  /** The toolkit root, e.g. /usr/local/cuda-13.0: CUDA_HOME for everything downstream. */
  root: string;
  meta: string;
  packages: string[];
  sourcesList: string;
  repository: ScriptStep;
  install: ScriptStep;
  verify: ScriptStep;
  uninstall: ScriptStep;
}

const SCRIPTS = "components/cuda-toolkit/scripts";

export function proofSource(file = "curand_cublas.cu"): string {
  return fs.readFileSync(path.join(componentDir(), "proof", file), "utf8");
}

/** This folder in the source tree, whether running from source or from dist/. */
export function componentDir(): string {
  return path.dirname(path.dirname(projectFile("components/cuda-toolkit/scripts/verify.sh")));
}

/**
 * `venvPath`: the serving venv, whose JIT consumers (humming-kernels, CuTe-DSL, triton) and CUDA
 * libraries verify reports and proves beside the toolkit's own (verify.sh step 4b, 6b).
 */
export function toolkitPlan(options: CudaToolkitOptions, venvPath?: string): ToolkitPlan {
  const tk = toolkit(options.release);
  const repo = options.repository;
  const url = repo.url ?? defaultRepositoryUrl(repo.distribution, repo.architecture);
  const base = url.endsWith("/") ? url : `${url}/`;
  const keyringUrl = repo.keyringUrl ?? `${base}cuda-keyring_1.1-1_all.deb`;
  const packages = packagesOf(tk.meta);
  const required = requiredFiles(options.release).map((f) => `${f.path}:${f.package}`);
  const sourcesList = `/etc/apt/sources.list.d/cuda-${repo.distribution}-${repo.architecture}.list`;
  return {
    release: tk.release,
    root: tk.root,
    meta: tk.meta,
    packages,
    sourcesList,
    repository: {
      script: `${SCRIPTS}/repository.sh`,
      args: [repo.trust, base, repo.distribution, repo.architecture, keyringUrl, repo.keyringSha256 ?? ""],
    },
    install: {
      script: `${SCRIPTS}/install.sh`,
      args: [tk.meta, tk.root, String(tk.alternativesPriority), ...required],
    },
    verify: {
      script: `${SCRIPTS}/verify.sh`,
      args: [
        "--release",
        tk.release,
        "--root",
        tk.root,
        "--min-driver-branch",
        String(options.minDriverBranch),
        "--proof",
        options.proofByExecution ? "1" : "0",
        "--proof-b64",
        Buffer.from(proofSource(), "utf8").toString("base64"),
        "--pcie-query",
        PCIE_QUERY_FIELDS.join(","),
        "--p2p-b64",
        Buffer.from(proofSource("p2p_bandwidth.cu"), "utf8").toString("base64"),
        ...packages.flatMap((p) => ["--package", p]),
        ...required.flatMap((r) => ["--require", r]),
        ...(venvPath === undefined ? [] : ["--venv", venvPath]),
      ],
    },
    uninstall: { script: `${SCRIPTS}/uninstall.sh`, args: [tk.root, sourcesList, ...packages] },
  };
}
