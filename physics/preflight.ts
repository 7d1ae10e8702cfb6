/**
 * Known traps of a GPU generation as typed rules, each with its source and the versions it applies
 * to: the stack config refuses a setting the GPUs cannot run (at `pulumi preview`, one sentence
 * naming the rule) instead of a service that dies on its first request. Only what is known for
 * the pinned SGLang (0.5.23) is here; extend the table, not the check.
 */

export interface AttentionBackendRule {
  id: string;
  /** Compute capabilities the rule applies to, e.g. /^12\./ for SM 12.x (RTX PRO 6000, RTX 50). */
  computeCapability: RegExp;
  /** `services.attentionBackend` values the GPUs cannot run. */
  backends: readonly string[];
  versions: string;
  why: string;
  source: string;
}

export const ATTENTION_BACKEND_RULES: readonly AttentionBackendRule[] = [
  {
    id: "sm120-no-trtllm-mla",
    computeCapability: /^12\./,
    backends: ["trtllm_mla"],
    versions: "SGLang 0.5.23 with FlashInfer 0.7.2",
    why: "on SM 12.x SGLang's trtllm_mla decodes through FlashInfer's XQA MLA kernel, which takes exactly 128 query heads per GPU and one query token per request: Kimi K2.x (64 heads) and DeepSeek (128) at any TP that fits the card have fewer per GPU, and an EAGLE-3 or DFlash verify step sends several tokens; MLA models run the triton backend there",
    source:
      "flashinfer 0.7.2 xqa.py xqa_mla ('XQA MLA only supports 128 query heads') and mla/_core.py (backend auto -> xqa on SM 12.x, q_len_per_request 1); sglang 0.5.23 trtllm_mla_backend.py; flashinfer #2745",
  },
  {
    id: "sm90-only-backends",
    computeCapability: /^(?!9\.)/,
    backends: ["fa3", "hpc_ops"],
    versions: "SGLang 0.5.23",
    why: "FlashAttention 3 and HPC-Ops are Hopper (SM 9.0) kernels",
    source: "SGLang 0.5.23 server_args.py (hpc_ops: 'Hopper (SM90) only'); FlashAttention 3's README (Hopper)",
  },
];

/** One sentence per rule the backend breaks on GPUs of this compute capability. */
export function attentionBackendIssues(backend: string, computeCapability: string): string[] {
  return ATTENTION_BACKEND_RULES.filter(
    (r) => r.computeCapability.test(computeCapability) && r.backends.includes(backend),
  ).map(
    (r) =>
      `${backend} cannot run on compute capability ${computeCapability} (rule ${r.id}, ${r.versions}: ${r.why}; ${r.source})`,
  );
}

/** The oldest CUDA toolkit a GPU generation can be served with, as a typed rule with its source. */
export interface ToolkitRule {
  id: string;
  computeCapability: RegExp;
  /** The oldest CUDA release that works ("12.9"). */
  minimumCuda: string;
  versions: string;
  why: string;
  source: string;
}

export const TOOLKIT_RULES: readonly ToolkitRule[] = [
  {
    id: "sm12x-needs-cuda-12.8",
    computeCapability: /^12\./,
    minimumCuda: "12.8",
    versions: "every CUDA release before 12.8",
    why: "CUDA 12.8 is the first toolkit that compiles for SM 12.x (Blackwell RTX and RTX PRO)",
    source: "NVIDIA CUDA 12.8 release notes",
  },
  {
    id: "sm12x-flashinfer-needs-cuda-12.9",
    computeCapability: /^12\./,
    minimumCuda: "12.9",
    versions: "FlashInfer 0.5 and later (SGLang 0.5.23 pins 0.7.2)",
    why: "FlashInfer's JIT builds SM 12.x with the family targets CUDA 12.9 introduced and refuses an older toolkit ('SM 12.x requires CUDA >= 12.9')",
    source: "flashinfer/jit/compilation_context.py",
  },
];

/** a < b for dotted releases ("12.8" < "12.9" < "13.0"). */
export function releaseBefore(a: string, b: string): boolean {
  const [x, y] = [a, b].map((v) => v.split(".").map(Number));
  for (let i = 0; i < Math.max(x.length, y.length); i++)
    if ((x[i] ?? 0) !== (y[i] ?? 0)) return (x[i] ?? 0) < (y[i] ?? 0);
  return false;
}

/** One sentence per rule the CUDA release breaks on GPUs of this compute capability. */
export function toolkitIssues(cudaRelease: string, computeCapability: string): string[] {
  return TOOLKIT_RULES.filter(
    (r) => r.computeCapability.test(computeCapability) && releaseBefore(cudaRelease, r.minimumCuda),
  ).map(
    (r) =>
      `compute capability ${computeCapability} needs CUDA >= ${r.minimumCuda}, not ${cudaRelease} (rule ${r.id}, ${r.versions}: ${r.why}; ${r.source})`,
  );
}
