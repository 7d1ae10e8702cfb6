/**
 * The model's own health as drift, checked in seconds at every refresh (not a benchmark): one
 * greedy generation of a fixed reference prompt against the answer recorded when the service was
 * verified, one short single-stream decode probe against the same probe's speed at verification,
 * and, for speculative services, the acceptance length the server reports against its baseline
 * and floor. A service that answers the port and generates can still have changed under the same
 * unit: kernels (a FlashInfer/driver update), weights (a re-downloaded snapshot) or the parser.
 *
 * Every request is bounded by `timeoutSeconds`; what cannot be measured is "not checked", never healthy.
 */
import { baseUrl, describeError, fetchText, makeAgent, type Endpoint } from "../transport/http";
import { withTimeout } from "../transport/timers";
import { makeSender } from "../run/load";
import { summarizeSingle } from "../judge/stats";
import { BENCH_PROMPTS } from "../base/prompts";
import { measureAcceptance, metricsAcceptance } from "../readiness/acceptance";
import { probeRequestBody } from "../readiness/probe";
import type { HealthPolicy, VerifyPolicy } from "../base/schema";
import type { ChatCompletion } from "../transport/wire";
import { checkAnswerScore, type AnswerHealthFinding } from "./answer-health";

/** What the last verified generation recorded: the figures each check compares with. */
export interface HealthBaseline {
  referencePrompt: string;
  referenceMaxTokens: number;
  answer: string;
  finishReason: string | null;
  /** Best single-stream decode probe tok/s (host time); null when too fast to time (MIN_DECODE_WINDOW_SECONDS). */
  decodeTokensPerSecond: number | null;
  /** Speculative services: mean tokens per verify step, and the floor below which speculation is broken. */
  acceptanceLength: number | null;
  acceptanceFloor: number | null;
  /** The answer certificate's score at verification; null (or absent, in older states): answers not checked. */
  answerScore?: number | null;
}

/** One health figure that differs from its baseline. */
export type HealthFinding =
  | {
      field: "health.answer" | "health.decodeTokensPerSecond" | "health.acceptanceLength";
      expected: string;
      found: string;
    }
  | AnswerHealthFinding;

/** What one check measured; `notChecked` says why a figure could not be measured (then the check is no verdict). */
export interface HealthCheck {
  answerMatches: boolean | null;
  answerDifference: number | null;
  answer: string | null;
  decodeTokensPerSecond: number | null;
  decodeTokensPerSecondBaseline: number | null;
  acceptanceLength: number | null;
  acceptanceLengthBaseline: number | null;
  acceptanceFloor: number | null;
  /** The answer check's score now, and at verification; null: not checked. */
  answerScore: number | null;
  answerScoreBaseline: number | null;
  findings: HealthFinding[];
  notChecked: string | null;
}

interface Speculative {
  acceptanceFloor: number;
}

/**
 * Why a bounded difference and not equality: greedy decoding is deterministic per engine build, but
 * SGLang's kernels are not batch-invariant, so the same build can flip a late near-tie token when
 * other requests share the batch, and the answer's tail after that flip changes. Words (not
 * characters) because a flip changes whole tokens; edit distance over the longer answer so that a
 * cut answer (a new stop token) counts as much as a changed one. 0 is identical, 1 all different.
 */
export function answerDifference(a: string, b: string): number {
  const x = a.trim().split(/\s+/).filter(Boolean);
  const y = b.trim().split(/\s+/).filter(Boolean);
  const n = Math.max(x.length, y.length);
  if (n === 0) return 0;
  let prev = Array.from({ length: y.length + 1 }, (_, j) => j);
  for (let i = 1; i <= x.length; i++) {
    const cur = [i];
    for (let j = 1; j <= y.length; j++)
      cur[j] = Math.min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (x[i - 1] === y[j - 1] ? 0 : 1));
    prev = cur;
  }
  return prev[y.length] / n;
}

/** A bounded request: a timeout that fires, joined with the caller's signal. */
function bounded<T>(
  signal: AbortSignal | undefined,
  seconds: number,
  what: string,
  fn: (s: AbortSignal) => Promise<T>,
) {
  return withTimeout([signal], seconds * 1000, () => `${what}: no answer within ${seconds} s`, fn);
}

/** The greedy answer to the reference prompt (one non-streamed chat completion); throws with the reason. */
export async function referenceAnswer(
  endpoint: Endpoint & { model: string },
  policy: VerifyPolicy,
  health: HealthPolicy,
  signal?: AbortSignal,
): Promise<{ answer: string; finishReason: string | null }> {
  const base = baseUrl(endpoint.url);
  const agent = makeAgent(1);
  try {
    // The probe's own body (greedy, thinking off where the template allows): only the prompt and length differ.
    const body = {
      ...probeRequestBody(endpoint.model, { ...policy, probePrompt: health.referencePrompt }, false),
      max_tokens: health.referenceMaxTokens,
      stream: false,
      stream_options: undefined,
    };
    const reply = await bounded(signal, health.timeoutSeconds, "the reference generation", (s) =>
      fetchText(agent, `${base}/v1/chat/completions`, { method: "POST", body, apiKey: endpoint.apiKey, signal: s }),
    );
    if (reply.status !== 200) throw new Error(`the reference generation answered HTTP ${reply.status}`);
    let json: ChatCompletion | null;
    try {
      json = JSON.parse(reply.text) as ChatCompletion | null;
    } catch {
      throw new Error("the reference generation's answer is not JSON");
    }
    const choice = json?.choices?.[0];
    if (!choice) throw new Error("the reference generation's answer has no choices[0]");
    return { answer: choice.message?.content ?? "", finishReason: choice.finish_reason ?? null };
  } finally {
    void agent.destroy().catch(() => undefined);
  }
}

/** How many decode probes a slow one is confirmed by before the speed counts as drift. */
export const DECODE_PROBE_ATTEMPTS = 3;

/**
 * A decode timed over less wall-clock time than this is noise, not a speed: timers, scheduling and a
 * loaded CPU move each chunk by milliseconds. Measured (sim-compare, a simulated host at time scale
 * 40): a 256-token single request decoded in about 12 ms of wall time read as 21,228 tok/s, and the
 * next refresh's 64-token probe fell under 0.7 of it with nothing changed, so every `up` re-gated.
 */
export const MIN_DECODE_WINDOW_SECONDS = 0.25;
/** The most tokens a probe is stretched to (decodeProbeTokens' own bound) to reach that window. */
const MAX_DECODE_PROBE_TOKENS = 1024;
/** Stretches of one probe at most: each from the window the last one took. */
export const DECODE_PROBE_STRETCHES = 3;

/**
 * One short single-stream generation (ignore_eos): its decode tokens per second in host time. A
 * probe whose decode took under MIN_DECODE_WINDOW_SECONDS of wall time runs again, stretched to
 * reach it (DECODE_PROBE_STRETCHES times at most); null when even MAX_DECODE_PROBE_TOKENS decode faster than that (a decode too fast to time
 * here is no slowdown). Throws with the reason when the probe fails.
 */
export async function decodeProbe(
  endpoint: Endpoint & { model: string },
  health: HealthPolicy,
  timeScale: number,
  signal?: AbortSignal,
): Promise<number | null> {
  const base = baseUrl(endpoint.url);
  const agent = makeAgent(1);
  try {
    const send = makeSender({
      endpoint,
      base,
      model: endpoint.model,
      agent,
      clock: { origin: performance.now(), timeScale },
      requestTimeoutSeconds: health.timeoutSeconds,
      signal: signal ?? new AbortController().signal,
    });
    const once = async (maxTokens: number) => {
      const sample = await send({ prompt: BENCH_PROMPTS[0], maxTokens, extraBody: { ignore_eos: true } });
      if (sample.error !== null) throw new Error(`the decode probe failed: ${sample.error}`);
      if (sample.completionTokens < 2 || sample.ttftSeconds === null)
        throw new Error("the decode probe produced too few tokens to time");
      // The sample's times are host time (wall time x time scale): the window is measured in wall time.
      // Every token in one read leaves no window at all (and no rate): too fast to time, like a short one.
      const window = Math.max(0, sample.e2eSeconds - sample.ttftSeconds) / timeScale;
      return { rate: summarizeSingle(maxTokens, [sample]).decodeTokensPerSecond ?? Infinity, window };
    };
    let tokens = health.decodeProbeTokens;
    let got = await once(tokens);
    // Stretched from the last window, DECODE_PROBE_STRETCHES times at most: a first probe that a stall of this
    // process made look slow was stretched too little, and the stretched one, undisturbed, fell
    // under the window again (a fresh-clone run beside a CPU competitor read the simulator's decode
    // as too fast to time).
    for (
      let i = 0;
      i < DECODE_PROBE_STRETCHES && got.window < MIN_DECODE_WINDOW_SECONDS && tokens < MAX_DECODE_PROBE_TOKENS;
      i++
    ) {
      const stretch = (1.5 * MIN_DECODE_WINDOW_SECONDS) / Math.max(got.window, 1e-3);
      tokens = Math.min(MAX_DECODE_PROBE_TOKENS, Math.ceil(tokens * stretch));
      got = await once(tokens);
    }
    return got.window < MIN_DECODE_WINDOW_SECONDS ? null : got.rate;
  } finally {
    void agent.destroy().catch(() => undefined);
  }
}

/**
 * The best of DECODE_PROBE_ATTEMPTS probes (contention only ever slows a probe), stopping early
 * once one reaches FLOOR; null when the decode is too fast to time (decodeProbe).
 */
export async function bestDecodeProbe(
  endpoint: Endpoint & { model: string },
  health: HealthPolicy,
  timeScale: number,
  floor: number,
  signal?: AbortSignal,
): Promise<number | null> {
  let best = -1;
  for (let i = 0; i < DECODE_PROBE_ATTEMPTS && best < floor; i++) {
    const rate = await decodeProbe(endpoint, health, timeScale, signal);
    if (rate === null) return null;
    best = Math.max(best, rate);
  }
  return best;
}

/**
 * The acceptance length of the health's own probe: the gate's greedy /generate request on a fixed
 * chat prompt, per request (completion_tokens / spec_verify_ct), else server-wide right after it,
 * else what the server reports (server info, /metrics). Acceptance depends on the content and the
 * batch, and the server-wide gauge is of whatever decoded last (the decode probe's prompt, a
 * benchmark's sweep), so the baseline and each refresh are read by this one probe: like with like.
 */
export async function probeAcceptance(endpoint: Endpoint, health: HealthPolicy, signal?: AbortSignal) {
  const m = await measureAcceptance(endpoint, { timeoutSeconds: health.timeoutSeconds, signal });
  return m.perRequest ?? m.serverWide ?? (await metricsReported(endpoint, health, signal));
}

/**
 * The acceptance length in the server's /metrics: what is left to read once measureAcceptance has
 * tried the request's own counts and the server info. Throws when it reports none.
 */
async function metricsReported(endpoint: Endpoint, health: HealthPolicy, signal?: AbortSignal) {
  const agent = makeAgent(1);
  try {
    const value = await bounded(signal, health.timeoutSeconds, "the acceptance read", (s) =>
      metricsAcceptance(agent, baseUrl(endpoint.url), endpoint.apiKey, s),
    );
    if (value === null) throw new Error("the server reports no speculative acceptance length");
    return value;
  } finally {
    void agent.destroy().catch(() => undefined);
  }
}

/** What to do about a health finding: it is repaired by verifying the service again, not on the host. */
export const HEALTH_REPAIR =
  "pulumi up: the next up verifies the service again (the readiness gate, the benchmark) and records a new baseline; find first what changed on the host (gpuhost drift names the toolkit's and the units' drift)";

/** A check's findings as drift entries (the drift report's shape: field, expected, found, repair). */
export function healthDrift(check: HealthCheck): (HealthFinding & { repair: string })[] {
  return check.findings.map((f) => ({ ...f, repair: HEALTH_REPAIR }));
}

/**
 * What each later check compares the model's health with, recorded when the service is verified:
 * the greedy answer to the reference prompt now, the best of the check's own decode probes now (null
 * when too fast to time) and the check's own acceptance probe now. Null when health is off. The same
 * probes as checkHealth's, not the benchmark's single requests: another length and another count of
 * chunks is another figure, and a check must compare like with like.
 */
export async function recordHealth(
  endpoint: Endpoint & { model: string },
  policy: VerifyPolicy,
  opts: { timeScale: number; speculative?: Speculative; signal?: AbortSignal; answerScore?: number | null },
): Promise<HealthBaseline | null> {
  const health = policy.health;
  if (!health.enabled) return null;
  const reference = await referenceAnswer(endpoint, policy, health, opts.signal);
  const decode = await bestDecodeProbe(endpoint, health, opts.timeScale, Infinity, opts.signal);
  return {
    referencePrompt: health.referencePrompt,
    referenceMaxTokens: health.referenceMaxTokens,
    answer: reference.answer,
    finishReason: reference.finishReason,
    decodeTokensPerSecond: decode,
    acceptanceLength: opts.speculative ? await probeAcceptance(endpoint, health, opts.signal) : null,
    acceptanceFloor: opts.speculative?.acceptanceFloor ?? null,
    answerScore: opts.answerScore ?? null,
  };
}

/** What checkHealth is told: the policies, the time scale, the speculative floor, the stop. */
interface CheckOptions {
  policy: VerifyPolicy;
  health: HealthPolicy;
  timeScale: number;
  speculative?: Speculative;
  signal?: AbortSignal;
}

/** One check under way: what each figure is measured against, and where its finding or its miss goes. */
interface HealthRun {
  endpoint: Endpoint & { model: string };
  baseline: HealthBaseline;
  opts: CheckOptions;
  out: HealthCheck;
  /** Why a figure could not be measured, one entry each: the check's "not checked". */
  missed: string[];
}

/**
 * The check of a refresh: each figure against the baseline. A figure that cannot be measured makes
 * the check "not checked" (its reason), while the others are still compared and reported.
 */
export async function checkHealth(
  endpoint: Endpoint & { model: string },
  baseline: HealthBaseline,
  opts: CheckOptions,
): Promise<HealthCheck> {
  const floor = opts.speculative?.acceptanceFloor ?? baseline.acceptanceFloor;
  const out: HealthCheck = {
    answerMatches: null,
    answerDifference: null,
    answer: null,
    decodeTokensPerSecond: null,
    decodeTokensPerSecondBaseline: baseline.decodeTokensPerSecond,
    acceptanceLength: null,
    acceptanceLengthBaseline: baseline.acceptanceLength,
    acceptanceFloor: opts.speculative ? floor : null,
    answerScore: null,
    answerScoreBaseline: baseline.answerScore ?? null,
    findings: [],
    notChecked: null,
  };
  const missed: string[] = [];
  const run: HealthRun = { endpoint, baseline, opts, out, missed };
  await referenceHealth(run);
  await decodeHealth(run);
  if (opts.speculative) await acceptanceHealth(run, floor);
  await answerHealth(endpoint, opts.policy, out, missed, opts.signal);
  if (missed.length > 0) out.notChecked = missed.join("; ");
  return out;
}

/** The greedy answer to the reference prompt against the recorded one. */
async function referenceHealth({ endpoint, baseline, opts, out, missed }: HealthRun): Promise<void> {
  const { health } = opts;
  // The reference is the one recorded: a changed prompt in the config is compared from the next verification on.
  const reference = {
    ...health,
    referencePrompt: baseline.referencePrompt,
    referenceMaxTokens: baseline.referenceMaxTokens,
  };
  try {
    const now = await referenceAnswer(endpoint, opts.policy, reference, opts.signal);
    out.answer = now.answer;
    out.answerDifference = answerDifference(baseline.answer, now.answer);
    out.answerMatches = out.answerDifference <= health.answerMaxDifference;
    if (!out.answerMatches)
      out.findings.push({
        field: "health.answer",
        expected: `${JSON.stringify(baseline.answer)} (finish_reason ${baseline.finishReason ?? "none"})`,
        found: `${JSON.stringify(now.answer)} (finish_reason ${now.finishReason ?? "none"}): ${(out.answerDifference * 100).toFixed(0)} % of its words differ, more than answerMaxDifference ${health.answerMaxDifference}; the greedy answer changed under the same unit: the kernels (FlashInfer, driver, CUDA), the weights or the reasoning/tool parser changed`,
      });
  } catch (e) {
    missed.push(`reference answer: ${describeError(e)}`);
  }
}

/**
 * The single-stream decode speed against the verified one, by the same probe as the baseline's
 * (bestDecodeProbe), so like is compared with like. A baseline too fast to time leaves the speed
 * unchecked by design (no figure, no finding, not "not checked").
 */
async function decodeHealth({ endpoint, baseline, opts, out, missed }: HealthRun): Promise<void> {
  const { health } = opts;
  const base = baseline.decodeTokensPerSecond;
  if (base === null) return;
  try {
    const floorRate = base * health.tokensPerSecondFloorFraction;
    // A probe under the floor is run again (DECODE_PROBE_ATTEMPTS in all) and the best one kept: a
    // moment of contention (another client, a busy CPU on the host) slows one short probe while
    // nothing changed; a regression in the kernels or the build slows every one.
    const best = await bestDecodeProbe(endpoint, health, opts.timeScale, floorRate, opts.signal);
    out.decodeTokensPerSecond = best;
    if (best !== null && best < floorRate)
      out.findings.push({
        field: "health.decodeTokensPerSecond",
        expected: `at least ${floorRate.toFixed(1)} tok/s (${health.tokensPerSecondFloorFraction} of the verified ${base.toFixed(1)} tok/s, one stream)`,
        found: `${best.toFixed(1)} tok/s`,
      });
  } catch (e) {
    missed.push(`decode probe: ${describeError(e)}`);
  }
}

/** A speculative service's acceptance against its floor and a fraction of the verified one. */
async function acceptanceHealth(
  { endpoint, baseline, opts, out, missed }: HealthRun,
  floor: number | null,
): Promise<void> {
  const { health } = opts;
  try {
    const found = await probeAcceptance(endpoint, health, opts.signal);
    out.acceptanceLength = found;
    const base = baseline.acceptanceLength;
    const least = Math.max(floor ?? 1, base === null ? 0 : base * health.acceptanceBaselineFraction);
    if (found < least)
      out.findings.push({
        field: "health.acceptanceLength",
        expected: `at least ${least.toFixed(2)} tokens per verify step (floor ${floor ?? "none"}${base === null ? "" : `, ${health.acceptanceBaselineFraction} of the verified ${base.toFixed(2)}`})`,
        found: `${found.toFixed(2)} tokens per verify step: speculation this poor is slower than none; the draft model, the kernels or the weights changed`,
      });
  } catch (e) {
    missed.push(`acceptance: ${describeError(e)}`);
  }
}

/** The answer score against the verified one (answer-health.ts), when the verification checked answers. */
async function answerHealth(
  endpoint: Endpoint & { model: string },
  policy: VerifyPolicy,
  out: HealthCheck,
  missed: string[],
  signal?: AbortSignal,
): Promise<void> {
  if (out.answerScoreBaseline === null || policy.answers.file === "none") return;
  try {
    const { score, finding } = await checkAnswerScore(endpoint, policy, out.answerScoreBaseline, signal);
    out.answerScore = score;
    if (finding) out.findings.push(finding);
  } catch (e) {
    missed.push(describeError(e));
  }
}
