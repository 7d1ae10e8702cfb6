/**
 * Goodput under a latency SLO, and confidence intervals over repeated runs. Pure arithmetic on raw
 * request samples, so every figure can be recomputed from what the benchmark kept.
 *
 * Definitions (stated because every tool differs, guidellm #1145):
 * - TTFT: send to the first chunk carrying content or reasoning.
 * - ITL for the SLO: a request's time per output token after the first, (e2e - TTFT) / (tokens - 1)
 *   (SGLang's TPOT). Chunk gaps are not used: speculative decoding sends several tokens per chunk,
 *   and a per-chunk figure would punish it for batching its output.
 * - A request meets the SLO when it succeeded, its TTFT <= ttftSeconds and its ITL <= itlSeconds.
 *   Goodput is the output tokens of requests that met it, per second of the level (vLLM's goodput
 *   counts such requests the same way). The level meets the SLO when the ttftPercentile of TTFT
 *   and the itlPercentile of ITL over its successful requests are within the bounds.
 */
import { percentile } from "./stats";
import type { RequestSample } from "../base/samples";
import type { Slo } from "../base/schema";

/** (e2e - TTFT) / (tokens - 1) of a successful request with at least two tokens; else null. */
export function perTokenLatency(s: RequestSample): number | null {
  if (s.error !== null || s.ttftSeconds === null || s.completionTokens < 2) return null;
  return Math.max(0, s.e2eSeconds - s.ttftSeconds) / (s.completionTokens - 1);
}

/** Every successful request's perTokenLatency, sorted (for percentile). */
export function perTokenLatencies(samples: RequestSample[]): Float64Array {
  return Float64Array.from(samples.flatMap((s) => perTokenLatency(s) ?? [])).sort();
}

export function meetsSlo(s: RequestSample, slo: Slo): boolean {
  if (s.error !== null || s.ttftSeconds === null || s.ttftSeconds > slo.ttftSeconds) return false;
  const itl = perTokenLatency(s);
  return itl === null || itl <= slo.itlSeconds;
}

export interface Goodput {
  /** Output tokens of requests meeting the SLO, per second of the level. */
  goodputTokensPerSecond: number;
  goodRequests: number;
  /** TTFT and ITL at the SLO's percentiles over successful requests. */
  ttftAtPercentileSeconds: number | null;
  itlAtPercentileSeconds: number | null;
  levelMeetsSlo: boolean;
}

export function goodput(samples: RequestSample[], durationSeconds: number, slo: Slo): Goodput {
  const good = samples.filter((s) => meetsSlo(s, slo));
  const tokens = good.reduce((a, s) => a + s.completionTokens, 0);
  const ok = samples.filter((s) => s.error === null);
  const ttfts = Float64Array.from(ok.flatMap((s) => (s.ttftSeconds === null ? [] : [s.ttftSeconds]))).sort();
  const itls = perTokenLatencies(ok);
  const ttftP = percentile(ttfts, slo.ttftPercentile);
  const itlP = percentile(itls, slo.itlPercentile);
  return {
    goodputTokensPerSecond: durationSeconds > 0 ? tokens / durationSeconds : 0,
    goodRequests: good.length,
    ttftAtPercentileSeconds: ttftP,
    itlAtPercentileSeconds: itlP,
    levelMeetsSlo:
      ok.length > 0 &&
      ok.length === samples.length &&
      ttftP !== null &&
      ttftP <= slo.ttftSeconds &&
      (itlP === null || itlP <= slo.itlSeconds),
  };
}

/** Two-sided 95 % Student t quantiles by degrees of freedom (1..30); beyond, the normal 1.96. */
const T95 = [
  12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.16, 2.145, 2.131, 2.12, 2.11,
  2.101, 2.093, 2.086, 2.08, 2.074, 2.069, 2.064, 2.06, 2.056, 2.052, 2.048, 2.045, 2.042,
];

export interface MeanInterval {
  mean: number;
  /** Half-width of the 95 % confidence interval of the mean; null with fewer than two values. */
  halfWidth: number | null;
  low: number | null;
  high: number | null;
  n: number;
}

/** Mean and 95 % confidence interval (Student t, sample standard deviation). */
export function meanInterval(values: number[]): MeanInterval {
  const n = values.length;
  if (n === 0) return { mean: 0, halfWidth: null, low: null, high: null, n };
  const mean = values.reduce((a, b) => a + b, 0) / n;
  if (n < 2) return { mean, halfWidth: null, low: null, high: null, n };
  const variance = values.reduce((a, v) => a + (v - mean) ** 2, 0) / (n - 1);
  const t = n - 1 <= T95.length ? T95[n - 2] : 1.96;
  const halfWidth = (t * Math.sqrt(variance)) / Math.sqrt(n);
  return { mean, halfWidth, low: mean - halfWidth, high: mean + halfWidth, n };
}
