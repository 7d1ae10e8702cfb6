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
    why: "TensorRT-LLM's MLA kernels are not built for SM 12.x; MLA models (Kimi K2.x, DeepSeek) run the triton backend there",
    source: "flashinfer #5445, sglang #24633",
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
