import { seededRandom } from "../seeded-draws";
import type { Profile } from "./profile";
import { acceptLength, curveAt, SHORT_CHAT, stepCost, type RequestShape } from "./speculative";

/**
 * The performance model, in simulated seconds. The scheduler emits tokens from exactly these
 * functions, and /sim/truth derives its theoretical figures from them too, so the two cannot disagree.
 */

// A profile's batch curves are read as a draft's are (speculative.ts), by the one interpolation.
export { curveAt };

export interface DecodeRates {
  /** Verify (or plain decode) steps per simulated second of one request. */
  stepsPerSecond: number;
  /** Tokens each step yields on average (1 when autoregressive). */
  tokensPerStep: number;
  /** stepsPerSecond * tokensPerStep. */
  tokensPerSecond: number;
}

/** Rates of one request at this batch; speculative rates depend on its content and prompt length. */
export function decodeRates(profile: Profile, batch: number, shape: RequestShape = SHORT_CHAT): DecodeRates {
  const b = Math.max(1, batch);
  const autoregressive = curveAt(profile.decode.perRequestTokensPerSecond, b);
  const spec = profile.speculative;
  if (!spec) return { stepsPerSecond: autoregressive, tokensPerStep: 1, tokensPerSecond: autoregressive };
  const stepsPerSecond = autoregressive / stepCost(spec.draft, spec, b, shape);
  const tokensPerStep = acceptLength(spec.draft, spec.algorithm, spec, b, shape);
  return { stepsPerSecond, tokensPerStep, tokensPerSecond: stepsPerSecond * tokensPerStep };
}

/** Time from admission to the first token (prefill; the first token is the prefill's output). */
export function prefillSeconds(profile: Profile, promptTokens: number): number {
  return profile.prefill.overheadSeconds + promptTokens / profile.prefill.tokensPerSecond;
}

export interface TheoreticalLevel {
  concurrency: number;
  runningBatch: number;
  perRequestTokensPerSecond: number;
  aggregateTokensPerSecond: number;
  acceptLength: number | null;
}

/** Steady-state decode throughput with `concurrency` clients always in flight. */
export function theoreticalLevel(
  profile: Profile,
  concurrency: number,
  shape: RequestShape = SHORT_CHAT,
): TheoreticalLevel {
  const runningBatch = Math.min(concurrency, profile.decode.maxRunningRequests);
  const rates = decodeRates(profile, runningBatch, shape);
  return {
    concurrency,
    runningBatch,
    perRequestTokensPerSecond: rates.tokensPerSecond,
    aggregateTokensPerSecond: runningBatch * rates.tokensPerSecond,
    acceptLength: profile.speculative ? rates.tokensPerStep : null,
  };
}

export interface ExpectedRun {
  concurrency: number;
  promptTokens: number;
  outputTokens: number;
  /** Admission to last token of one request when the batch is full at min(concurrency, max running). */
  requestLatencySeconds: number;
  timeToFirstTokenSeconds: number;
  /** A closed loop of `concurrency` clients, each sending one request after the other. */
  aggregateOutputTokensPerSecond: number;
}

/**
 * What a closed-loop benchmark should measure: every request takes prefill + (N-1)/rate, and
 * min(concurrency, max running) of them run at once. Queued requests wait without producing.
 */
export function expectedRun(
  profile: Profile,
  concurrency: number,
  promptTokens: number,
  outputTokens: number,
  shape: RequestShape = { content: "chat", promptTokens },
): ExpectedRun {
  const level = theoreticalLevel(profile, concurrency, shape);
  const ttft = prefillSeconds(profile, promptTokens);
  const latency = ttft + Math.max(0, outputTokens - 1) / level.perRequestTokensPerSecond;
  return {
    concurrency,
    promptTokens,
    outputTokens,
    requestLatencySeconds: latency,
    timeToFirstTokenSeconds: ttft,
    aggregateOutputTokensPerSecond: latency > 0 ? (level.runningBatch * outputTokens) / latency : 0,
  };
}

export function mixSeed(...parts: number[]): number {
  let h = 0x811c9dc5;
  for (const p of parts) {
    h ^= p >>> 0;
    h = Math.imul(h, 0x01000193) >>> 0;
    h ^= h >>> 13;
  }
  return h >>> 0;
}

export function drawLoadSeconds(profile: Profile): number {
  const random = seededRandom(mixSeed(profile.seed, 0x10ad));
  return profile.load.minSeconds + random() * (profile.load.maxSeconds - profile.load.minSeconds);
}
