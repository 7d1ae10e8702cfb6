/**
 * Where a measured throughput stands against what the host can do at all. Decode is a loop of
 * steps; each step reads the weights it needs once for the whole batch, so at batch 1 the limit is
 * aggregate memory bandwidth / bytes read per step. At batch B a MoE step reads the experts the B
 * tokens route to (uniform routing assumed: E x (1 - (1 - k/E)^B) distinct experts per layer), so
 * the weight-read roofline rises with B until compute or the KV cache stops it. Pure arithmetic.
 */
import type { GpuSpec } from "./gpus";
import type { ModelFacts } from "./model-config";

/** KV-cache element size: SGLang keeps the cache in the model's dtype unless told otherwise. */
export const KV_BYTES_PER_ELEMENT = 2;

/** Bytes of the weights held in memory (the whole model, every expert). */
export function weightBytes(m: ModelFacts): number {
  return m.parts.reduce((s, p) => s + p.params * p.bytesPerParam, 0);
}

/** Distinct routed experts per MoE layer that a batch of B tokens reads, under uniform routing. */
export function expectedDistinctExperts(routed: number, active: number, batch: number): number {
  return routed * (1 - Math.pow(1 - active / routed, batch));
}

/** Bytes of weights one decode step reads for a batch of B sequences. */
export function bytesPerDecodeStep(m: ModelFacts, batch = 1): number {
  return m.parts.reduce((s, p) => {
    let params = p.activeParams;
    if (p.name === "embedding") params *= batch; // one row per token
    if (p.name === "routedExperts" && m.moe)
      params =
        m.moe.moeLayers *
        m.moe.expertParams *
        expectedDistinctExperts(m.moe.routedExperts, m.moe.activePerToken, batch);
    return s + params * p.bytesPerParam;
  }, 0);
}

/** KV-cache bytes one token of context holds, the whole model (all layers, all KV heads). */
export function kvBytesPerToken(m: ModelFacts): number {
  const a = m.attention;
  // MLA caches the compressed latent and the shared rope key; GQA caches K and V per KV head.
  const elements = a.kind === "MLA" ? a.kvLoraRank + a.ropeHeadDim : 2 * a.kvHeads * a.headDim;
  return m.layers * elements * KV_BYTES_PER_ELEMENT;
}

/**
 * KV bytes per token of context on each GPU at tensor parallelism `tp`. MLA's latent is shared by
 * every head, so without decode context parallelism each GPU holds all of it; GQA splits its KV
 * heads over the GPUs (replicating them when there are fewer heads than GPUs).
 */
export function kvBytesPerTokenPerGpu(m: ModelFacts, tp: number): number {
  const a = m.attention;
  if (a.kind === "MLA") return kvBytesPerToken(m);
  return (kvBytesPerToken(m) * Math.ceil(a.kvHeads / tp)) / a.kvHeads;
}

/** FLOPs one decoded token costs at a context of `context` tokens: 2 per weight it multiplies, plus attention. */
export function flopsPerToken(m: ModelFacts, context = 0): number {
  const matmul = m.parts
    .filter((p) => p.name !== "embedding" && p.name !== "norms")
    .reduce((s, p) => s + 2 * p.activeParams, 0);
  const a = m.attention;
  // Per context token and layer: scores and the weighted sum. MLA decodes with the absorbed
  // weights: scores over latent + rope, values over the latent.
  const perContextToken =
    a.kind === "MLA"
      ? 2 * a.heads * (a.kvLoraRank + a.ropeHeadDim) + 2 * a.heads * a.kvLoraRank
      : 4 * a.heads * a.headDim;
  return matmul + m.layers * perContextToken * context;
}

/**
 * The --mem-fraction-static a plan assumes where the stack or the flags set none. SGLang picks its own
 * from the GPU's memory and the parallelism; 0.9 is near what it picks on large cards.
 */
export const DEFAULT_MEM_FRACTION_STATIC = 0.9;

export interface HostShape {
  gpu: GpuSpec;
  gpus: number;
  /** SGLang's --mem-fraction-static: the share of each GPU's memory for weights and KV cache. */
  memFractionStatic: number;
  /** Tokens of context per sequence (prompt and output) the KV bound and the compute bound assume. */
  contextTokens: number;
}

export interface Roofline {
  gpu: string;
  gpus: number;
  weightGB: number;
  bytesPerStepGB: number;
  kvBytesPerToken: number;
  flopsPerToken: number;
  /** Aggregate bandwidth / bytes per step at batch 1. */
  batch1TokensPerSecond: number;
  /** Tokens of KV cache the host holds: (memory x mem-fraction-static - weights per GPU) / KV per token per GPU; null when the weights do not fit. */
  kvCacheTokens: number | null;
  /** Sequences of contextTokens that fit in it at once. */
  kvBoundConcurrency: number | null;
  /** Tok/s the dense BF16 tensor throughput allows (any batch). */
  computeBoundTokensPerSecond: number;
  atConcurrency: {
    concurrency: number;
    bytesPerStepGB: number;
    /** The weight-read roofline at this batch (KV reads not counted). */
    weightReadTokensPerSecond: number;
    /** min(weight-read roofline, compute bound). */
    roofline: number;
    measuredTokensPerSecond: number | null;
    /** measured / roofline; null without a measurement. */
    fraction: number | null;
    computeFraction: number | null;
    limiter: "memory bandwidth" | "KV cache" | "compute";
    lever: string;
  } | null;
}

/** The roofline of a model on a host, and where a measured tok/s at `concurrency` stands. */
export function roofline(
  m: ModelFacts,
  host: HostShape,
  /** speculative: the figure is already a speculative service's (the lever does not suggest one). */
  measured?: { concurrency: number; tokensPerSecond: number; speculative?: boolean },
): Roofline {
  const bandwidth = host.gpus * host.gpu.memoryBandwidthGBs.value * 1e9;
  const compute = host.gpus * host.gpu.denseTflops.bf16.value * 1e12;
  const weights = weightBytes(m);
  const perGpuFree = host.gpu.memoryGB.value * 1e9 * host.memFractionStatic - weights / host.gpus;
  const kvTokens = perGpuFree > 0 ? Math.floor(perGpuFree / kvBytesPerTokenPerGpu(m, host.gpus)) : null;
  const kvBound = kvTokens === null ? null : Math.floor(kvTokens / host.contextTokens);
  const flops = flopsPerToken(m, host.contextTokens);
  const computeBound = compute / flops;
  const step1 = bytesPerDecodeStep(m, 1);
  let at: Roofline["atConcurrency"] = null;
  if (measured) {
    const c = measured.concurrency;
    const step = bytesPerDecodeStep(m, c);
    const weightRead = (c * bandwidth) / step;
    const limit = Math.min(weightRead, computeBound);
    const limiter =
      computeBound < weightRead ? "compute" : kvBound !== null && c >= 0.9 * kvBound ? "KV cache" : "memory bandwidth";
    const lever =
      limiter === "compute"
        ? "more hosts (the GPUs' tensor throughput is spent)"
        : limiter === "KV cache"
          ? m.attention.kind === "MLA"
            ? "decode context parallelism (each GPU now holds the whole MLA cache), or more hosts"
            : "more hosts, or shorter contexts (the KV cache is full)"
          : `more concurrency (the KV cache holds ${kvBound ?? 0} sequences of ${host.contextTokens.toLocaleString("en-US")} tokens)${measured.speculative ? "" : ", or a speculative service (more tokens per weight read)"}`;
    at = {
      concurrency: c,
      bytesPerStepGB: step / 1e9,
      weightReadTokensPerSecond: weightRead,
      roofline: limit,
      measuredTokensPerSecond: measured.tokensPerSecond,
      fraction: measured.tokensPerSecond / limit,
      computeFraction: measured.tokensPerSecond / computeBound,
      limiter,
      lever,
    };
  }
  return {
    gpu: host.gpu.name,
    gpus: host.gpus,
    weightGB: weights / 1e9,
    bytesPerStepGB: step1 / 1e9,
    kvBytesPerToken: kvBytesPerToken(m),
    flopsPerToken: flops,
    batch1TokensPerSecond: bandwidth / step1,
    kvCacheTokens: kvTokens,
    kvBoundConcurrency: kvBound,
    computeBoundTokensPerSecond: computeBound,
    atConcurrency: at,
  };
}

const n = (v: number): string => Math.round(v).toLocaleString("en-US");
const pct = (v: number): string => `${(v * 100).toFixed(0)} %`;

/** The roofline as the lines a plan prints. */
export function rooflineLines(r: Roofline, contextTokens: number): string[] {
  const lines = [
    `model: ${r.weightGB.toFixed(1)} GB of weights, ${r.bytesPerStepGB.toFixed(2)} GB read per decode step at batch 1, ${n(r.kvBytesPerToken)} KV bytes per token`,
    `bandwidth roofline at batch 1: ${n(r.batch1TokensPerSecond)} tok/s (${r.gpus} x ${r.gpu})`,
    `compute bound: ${n(r.computeBoundTokensPerSecond)} tok/s (dense BF16, ${n(contextTokens)}-token context)`,
    r.kvCacheTokens === null
      ? "KV-cache bound on concurrency: none (the weights do not fit in memory x mem-fraction-static)"
      : `KV-cache bound on concurrency: ${n(r.kvBoundConcurrency ?? 0)} sequences of ${n(contextTokens)} tokens (${n(r.kvCacheTokens)} tokens of cache)`,
  ];
  const a = r.atConcurrency;
  if (a) {
    lines.push(
      `roofline at concurrency ${n(a.concurrency)}: ${n(a.roofline)} tok/s (weights read per step: ${a.bytesPerStepGB.toFixed(1)} GB)`,
    );
    if (a.fraction !== null && a.computeFraction !== null)
      lines.push(
        `measured ${n(a.measuredTokensPerSecond ?? 0)} tok/s = ${pct(a.fraction)} of the roofline at ${n(a.concurrency)} (${pct(a.computeFraction)} of compute)`,
      );
    lines.push(`limiter: ${a.limiter}; lever: ${a.lever}`);
  }
  return lines;
}
