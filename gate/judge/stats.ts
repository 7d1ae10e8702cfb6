/**
 * Summaries computed from raw samples (the benchmark keeps both, so either can be checked).
 * Pure functions: no clock, no network.
 */
import type { RequestSample } from "../base/samples";

/** Linear interpolation between closest ranks (numpy's default), on an ascending array. */
export function percentile(sorted: ArrayLike<number>, p: number): number | null {
  const n = sorted.length;
  if (n === 0) return null;
  const rank = (p / 100) * (n - 1);
  const lo = Math.floor(rank);
  const hi = Math.min(n - 1, lo + 1);
  return sorted[lo] + (sorted[hi] - sorted[lo]) * (rank - lo);
}

function sortedOf(values: number[]): Float64Array {
  return Float64Array.from(values).sort();
}

export interface LatencyStats {
  ttftP50Seconds: number | null;
  ttftP95Seconds: number | null;
  ttftP99Seconds: number | null;
  /** Time to first answer token (visible content), over the requests that answered. */
  ttfaP50Seconds: number | null;
  ttfaP95Seconds: number | null;
  ttfaP99Seconds: number | null;
  itlP50Seconds: number | null;
  itlP95Seconds: number | null;
  itlP99Seconds: number | null;
  e2eP50Seconds: number | null;
  e2eP95Seconds: number | null;
  e2eP99Seconds: number | null;
}

/** Latency percentiles over the successful samples (a failed request has no meaningful latency). */
export function latencyStats(samples: RequestSample[]): LatencyStats {
  const ok = samples.filter((s) => s.error === null);
  const ttft = sortedOf(ok.flatMap((s) => (s.ttftSeconds === null ? [] : [s.ttftSeconds])));
  const ttfa = sortedOf(ok.flatMap((s) => (s.ttfaSeconds === null ? [] : [s.ttfaSeconds])));
  const e2e = sortedOf(ok.map((s) => s.e2eSeconds));
  let itlCount = 0;
  for (const s of ok) itlCount += s.itlSeconds.length;
  const itl = new Float64Array(itlCount);
  let k = 0;
  for (const s of ok) for (const v of s.itlSeconds) itl[k++] = v;
  itl.sort();
  return {
    ttftP50Seconds: percentile(ttft, 50),
    ttftP95Seconds: percentile(ttft, 95),
    ttftP99Seconds: percentile(ttft, 99),
    ttfaP50Seconds: percentile(ttfa, 50),
    ttfaP95Seconds: percentile(ttfa, 95),
    ttfaP99Seconds: percentile(ttfa, 99),
    itlP50Seconds: percentile(itl, 50),
    itlP95Seconds: percentile(itl, 95),
    itlP99Seconds: percentile(itl, 99),
    e2eP50Seconds: percentile(e2e, 50),
    e2eP95Seconds: percentile(e2e, 95),
    e2eP99Seconds: percentile(e2e, 99),
  };
}

/**
 * Reasoning and answer apart. Tokens come from usage (reasoning_tokens when the server reports
 * it, else null: counting chunks would be wrong under speculative decoding); a request that
 * succeeded but never produced visible content is counted as answerless, so a benchmark of
 * reasoning that used the whole budget says so.
 */
export interface AnswerStats {
  completionTokens: number;
  reasoningTokens: number | null;
  /** completionTokens - reasoningTokens, when reasoning is reported. */
  answerTokens: number | null;
  answerlessRequests: number;
  /**
   * Successful requests cut short: finish_reason "length" before the max_tokens they asked for (the
   * context limit stopped them). Their tokens count as produced; the report says the level did not
   * get the length it asked for.
   */
  truncatedRequests: number;
}

export function answerStats(samples: RequestSample[]): AnswerStats {
  const ok = samples.filter((s) => s.error === null);
  const completionTokens = ok.reduce((a, s) => a + s.completionTokens, 0);
  const reasoningTokens = sumNullable(ok.map((s) => s.reasoningTokens));
  return {
    completionTokens,
    reasoningTokens,
    answerTokens: reasoningTokens === null ? null : completionTokens - reasoningTokens,
    answerlessRequests: ok.filter((s) => s.answerChunks === 0).length,
    truncatedRequests: ok.filter((s) => s.finishReason === "length" && s.completionTokens < s.maxTokens).length,
  };
}

export interface SingleRequestSummary extends LatencyStats, AnswerStats {
  maxTokens: number;
  requests: number;
  errors: number;
  /** Output tokens of the successful requests over their summed end-to-end time. */
  outputTokensPerSecond: number;
  /** Decode speed of one request: (tokens - 1) / (e2e - ttft), the inverse of TPOT. */
  decodeTokensPerSecond: number | null;
}

export function summarizeSingle(maxTokens: number, samples: RequestSample[]): SingleRequestSummary {
  const ok = samples.filter((s) => s.error === null);
  const tokens = ok.reduce((a, s) => a + s.completionTokens, 0);
  const time = ok.reduce((a, s) => a + s.e2eSeconds, 0);
  const decode = ok.filter((s) => s.ttftSeconds !== null && s.completionTokens > 1 && s.e2eSeconds > s.ttftSeconds);
  const decodeTokens = decode.reduce((a, s) => a + s.completionTokens - 1, 0);
  const decodeTime = decode.reduce((a, s) => a + (s.e2eSeconds - (s.ttftSeconds ?? 0)), 0);
  return {
    maxTokens,
    requests: samples.length,
    errors: samples.length - ok.length,
    outputTokensPerSecond: time > 0 ? tokens / time : 0,
    decodeTokensPerSecond: decodeTime > 0 ? decodeTokens / decodeTime : null,
    ...answerStats(samples),
    ...latencyStats(samples),
  };
}

function sumNullable(values: (number | null)[]): number | null {
  const present = values.filter((v): v is number => v !== null);
  return present.length === 0 ? null : present.reduce((a, b) => a + b, 0);
}
