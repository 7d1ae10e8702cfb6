/**
 * The benchmark, run after readiness: warmup, single requests at each max_tokens, then a sweep by
 * the one load generator (load.ts): concurrencies (closed loop) or request rates (open loop), each
 * level `repeats` times. Raw samples are kept apart from the summary, and the summary is computed
 * from them only. Every figure is in the host's own time (load.ts; `hooks.timeScale`).
 */
import type { Agent } from "undici";
import { BenchPlanSchema, type BenchPlan, type BenchPlanInput } from "../base/schema";
import { describeError, fetchText, type Endpoint } from "../transport/http";
import { abortReason, armTimeout, TimeoutError, withTimeout } from "../transport/timers";
import type { ModelList } from "../transport/wire";
import { readAcceptanceLength } from "../readiness/acceptance";
import { summarizeLevel, withoutSamples, type LevelSamples, type LevelSummary } from "../judge/levels";
import { hostNow, measureSweep, openSession, sessionSender, type LoadRequest, type Send, type Session } from "./load";
import { judgeLevels } from "../judge/saturation";
import type { CounterRead } from "../base/samples";
import { BENCH_PROMPTS } from "../base/prompts";
import { summarizeSingle, type SingleRequestSummary } from "../judge/stats";
import type { RequestSample } from "../base/samples";
import { levelsOf, requestsOf } from "../base/workload";

export const WARMUP_PROMPT = "Say just 'OK'";

export type BenchProgress =
  | { kind: "stage"; stage: "models" | "warmup" | "single" | "sweep"; detail: string; sinceStart: RunTotals }
  | {
      kind: "request";
      stage: "single" | "sweep";
      label: string;
      done: number;
      total: number;
      errors: number;
      tokens: number;
      elapsedSeconds: number;
      /** Every request of the run so far (warmup, single, sweep): kept as requests end, O(1) each. */
      sinceStart: RunTotals;
    }
  | { kind: "level"; summary: LevelSummary };

/** Requests ended, failed and tokens counted since the run began. */
export interface RunTotals {
  requests: number;
  errors: number;
  tokens: number;
}

/**
 * The warmup is a few tokens (plan.warmupMaxTokens, 16): a server that has not answered it within
 * this many host seconds hangs. Its bound is the plan's requestTimeoutSeconds where that is shorter,
 * and the plan's deadline (wall clock) where that comes first.
 */
export const WARMUP_TIMEOUT_SECONDS = 300;

export interface BenchHooks {
  onProgress?: (event: BenchProgress) => void;
  /** Stops the run early (the remaining requests become errors, the result incomplete). */
  signal?: AbortSignal;
  /** Simulated seconds per wall second of the server measured (absent: 1, real hardware). */
  timeScale?: number;
  /**
   * The server's counters where they are not at the endpoint's own /metrics: a fleet behind a
   * router is reconciled with the sum of its workers' (fleetCounters). Absent: the endpoint's.
   */
  readCounters?: (model: string, signal: AbortSignal) => Promise<CounterRead>;
  /** Speculative services: each level's acceptance is certified against this floor. */
  acceptanceFloor?: number;
}

export interface BenchSamples {
  /** Null when the run stopped before it (the server never listed the model). */
  warmup: RequestSample | null;
  singleRequest: { maxTokens: number; requests: RequestSample[] }[];
  sweep: LevelSamples[];
  /** The sweep's first level measured again after its last (load.ts runSweep); absent: not bracketed. */
  bracket?: LevelSamples;
}

export interface BenchSummary {
  /** The model asked for, as GET /v1/models listed it. */
  model: string;
  /** The models the responses named (their `model` field), in order of first appearance. */
  servedModels: string[];
  /** A response named another model than the one asked for (a server that ignores `model`); null when none did. */
  modelMismatch: string | null;
  startedAt: string;
  /** False when the deadline, the caller or the server's death stopped the run before every level ran. */
  complete: boolean;
  /** Why the run stopped early (the server went away, the deadline, an interrupt); null when it ran to the end. */
  stopReason: string | null;
  /** The run's deadline stopped it (stopReason says where). */
  deadlinePassed: boolean;
  /** The server went away mid-run (the run stopped there; no sustained figure); null when it survived. */
  serverGone: string | null;
  warmupError: string | null;
  singleRequest: SingleRequestSummary[];
  sweep: LevelSummary[];
  /** The knee's concurrency (gate/judge/saturation.ts); null when not saturated or no level counts. */
  saturationConcurrency: number | null;
  /** False when throughput still rose at the last level that kept the error budget, or the knee is undetermined. */
  saturated: boolean;
  /** The throughput intervals could not tell a step from the knee threshold: no knee claimed, run more repeats. */
  kneeUndetermined: boolean;
  /** The knee's throughput; not saturated, the last counted level's (a lower bound); 0 when none counts. */
  sustainedOutputTokensPerSecond: number;
  /** Levels whose error rate broke the plan's error budget: excluded from every figure above. */
  failedLevels: number[];
  /** Open loop: rates the client could not offer on schedule (levels.ts clientLimited): excluded, never capacity. */
  clientLimitedLevels: number[];
  /** Levels whose certificate failed (certificate.ts), with certification.require: excluded, never capacity. */
  uncertifiedLevels: number[];
  /** Open loop: the server kept up with every rate, each offered on schedule: no saturation within them, a healthy result. */
  keptUpWithEveryRate: boolean;
  /** One sentence: where the knee is, or "not saturated up to C=N", and which levels were excluded. */
  saturationVerdict: string;
  /** Speculative services: acceptance length measured at low concurrency (after single requests). */
  acceptanceLength: number | null;
  /** closed: the sweep's levels are concurrencies; open: offered request rates. */
  mode: "closed" | "open";
  /** The level the sustained figure comes from (concurrency, or rate offered); null when none counts. */
  sustainedLevel: number | null;
  /** Simulated seconds per wall second (1: real hardware); every figure is in the host's own time. */
  timeScale: number;
  plan: BenchPlan;
}

export interface BenchResult extends BenchSummary {
  samples: BenchSamples;
}

export function summarizeBench(
  samples: BenchSamples,
  meta: {
    model: string;
    startedAt: string;
    complete: boolean;
    acceptanceLength: number | null;
    plan: BenchPlan;
    timeScale?: number;
    stopReason?: string | null;
    /** The server went away mid-run: no figure is published from a run it did not survive. */
    serverGone?: string | null;
    deadlinePassed?: boolean;
  },
): BenchSummary {
  const judgement = {
    slo: meta.plan.slo,
    rateShortfall: meta.plan.rateShortfall,
    certification: meta.plan.certification,
  };
  const sweep = samples.sweep.map((l) => summarizeLevel(l, meta.plan.errorBudget, judgement));
  const knee = judgeLevels(sweep, {
    errorBudget: meta.plan.errorBudget,
    minGain: meta.plan.kneeMinGain,
    maxTtftP95Seconds: meta.plan.kneeMaxTtftP95Seconds,
    requireCertified: meta.plan.certification.require,
  });
  const gone = meta.serverGone ?? null;
  const servedModels = servedModelsOf(samples);
  return {
    model: meta.model,
    servedModels,
    modelMismatch: modelMismatch(meta.model, servedModels),
    startedAt: meta.startedAt,
    complete: meta.complete,
    stopReason: meta.stopReason ?? gone,
    deadlinePassed: meta.deadlinePassed ?? false,
    serverGone: gone,
    warmupError: samples.warmup?.error ?? null,
    singleRequest: samples.singleRequest.map((s) => summarizeSingle(s.maxTokens, s.requests)),
    sweep,
    saturationConcurrency: gone === null ? knee.saturationConcurrency : null,
    saturated: gone === null && knee.saturated,
    kneeUndetermined: gone === null && knee.undetermined === true,
    sustainedOutputTokensPerSecond: gone === null ? knee.sustainedOutputTokensPerSecond : 0,
    failedLevels: knee.failedLevels,
    clientLimitedLevels: knee.clientLimitedLevels ?? [],
    uncertifiedLevels: knee.uncertifiedLevels ?? [],
    keptUpWithEveryRate: gone === null && knee.keptUpWithEveryRate === true,
    saturationVerdict:
      gone === null ? knee.verdict : `${gone}; no figure is published from a run the server did not survive`,
    acceptanceLength: meta.acceptanceLength,
    mode: levelsOf(meta.plan).mode,
    sustainedLevel: gone === null ? knee.sustainedLevel : null,
    timeScale: meta.timeScale ?? 1,
    plan: meta.plan,
  };
}

/** Why the figures are another model's: the responses named one other than the model asked for; null when none did. */
function modelMismatch(model: string, servedModels: string[]): string | null {
  const others = servedModels.filter((m) => m !== model);
  return others.length === 0
    ? null
    : `the server answered as ${others.map((m) => JSON.stringify(m)).join(", ")}, not the model asked for (${JSON.stringify(model)}): it ignores the request's model, so these figures are the served model's`;
}

/** The distinct `model` names the responses carried (O(n) over the samples, once per summary). */
function servedModelsOf(samples: BenchSamples): string[] {
  const seen = new Set<string>();
  const look = (s: RequestSample) => {
    if (typeof s.servedModel === "string") seen.add(s.servedModel);
  };
  if (samples.warmup) look(samples.warmup);
  for (const single of samples.singleRequest) single.requests.forEach(look);
  for (const level of samples.sweep) level.requests.forEach(look);
  samples.bracket?.requests.forEach(look);
  return [...seen];
}

/** Why a failed warmup stops the run: every later request would meet the same. */
function warmupStop(error: string): string {
  if (error.startsWith("the stream carried no usage"))
    return "the server's streams carry no usage (stream_options.include_usage is ignored): the benchmark counts tokens from usage, so no request can be measured; stopped after the warmup";
  return `the warmup failed (${error}): stopped before the single requests and the sweep`;
}

/**
 * One run's fixed parts, set up once: the plan, the pool sized to the sweep, the one deadline joined
 * with the caller's signal, the host clock, the progress sink and the totals it reports.
 */
interface Run extends Session {
  plan: BenchPlan;
  mode: "open" | "closed";
  levels: number[];
  signal: AbortSignal;
  /** The caller's hooks as given: its own signal (Ctrl-C, told apart from the deadline), the counters' reader, the floor. */
  hooks: BenchHooks;
  startedAt: string;
  progress: (event: BenchProgress) => void;
  totals: RunTotals;
  /** The result of a run that stops here, with why. */
  stopped: (model: string, samples: BenchSamples, stopReason: string, serverGone?: string | null) => BenchResult;
  /** The full result of a run that reached the end of the sweep (or stopped inside it). */
  finished: (model: string, samples: BenchSamples, acceptanceLength: number | null) => BenchResult;
}

/** Sets up a run; the caller clears `deadline` and destroys `agent` when it ends. */
function openRun(endpoint: Endpoint, planInput: BenchPlanInput, hooks: BenchHooks) {
  const plan = BenchPlanSchema.parse(planInput);
  const { mode, levels } = levelsOf(plan);
  // The run's one deadline (wall clock), joined with the caller's signal (Ctrl-C); cleared by bench().
  const deadline = armTimeout(
    [hooks.signal],
    plan.deadlineSeconds * 1000,
    () => `benchmark deadline of ${plan.deadlineSeconds} s passed`,
  );
  const signal = deadline.signal;
  const session = openSession(endpoint, mode, levels, hooks.timeScale ?? 1, signal);
  const { clock } = session;
  const startedAt = new Date().toISOString();
  // The deadline's own signal aborts with a TimeoutError; the caller's (Ctrl-C) with its own reason.
  const deadlinePassed = () => signal.aborted && signal.reason instanceof TimeoutError;
  const result = (
    model: string,
    samples: BenchSamples,
    meta: { complete: boolean; acceptanceLength: number | null; stopReason: string | null; serverGone: string | null },
  ): BenchResult => ({
    ...summarizeBench(samples, {
      model,
      startedAt,
      plan,
      timeScale: clock.timeScale,
      deadlinePassed: deadlinePassed(),
      ...meta,
    }),
    samples,
  });
  const run: Run = {
    ...session,
    plan,
    mode,
    levels,
    signal,
    hooks,
    startedAt,
    progress: hooks.onProgress ?? (() => undefined),
    // Every request of the run, kept as requests end (O(1) each); progress events carry this object.
    totals: { requests: 0, errors: 0, tokens: 0 },
    stopped: (model, samples, stopReason, serverGone = null) =>
      result(model, samples, { complete: false, acceptanceLength: null, stopReason, serverGone }),
    finished: (model, samples, acceptanceLength) => {
      const { watch } = session;
      const stopReason = watch.gone ?? (signal.aborted ? abortReason(signal).message : null);
      const complete = stopReason === null && samples.sweep.length === levels.length;
      return result(model, samples, { complete, acceptanceLength, stopReason, serverGone: watch.gone });
    },
  };
  return { run, deadline };
}

/** The model GET /v1/models lists (always asked, as the gate does), or the run's stop. */
async function modelStage(run: Run, asked: string | null, apiKey: string | undefined): Promise<string | BenchResult> {
  run.progress({
    kind: "stage",
    stage: "models",
    detail: `GET /v1/models lists ${asked === null ? "a model" : JSON.stringify(asked)}`,
    sinceStart: run.totals,
  });
  try {
    // A model the server does not list would be benchmarked as another.
    return await listedModel(run.agent, run.base, apiKey, run.signal, asked);
  } catch (err) {
    const reason = run.signal.aborted ? abortReason(run.signal).message : (err as Error).message;
    return run.stopped(asked ?? "(none)", { warmup: null, singleRequest: [], sweep: [] }, reason);
  }
}

/**
 * What the stages after the model share: the senders (counting into the totals), the sweep's sender
 * (the sweep counts each request as it is recorded, from this thread or a client thread) and the
 * server watch.
 */
interface Stage {
  run: Run;
  model: string;
  send: Send;
  sendWarmup: Send;
  count: (s: RequestSample) => RequestSample;
  watch: Session["watch"];
}

function stageOf(run: Run, endpoint: Endpoint, model: string): Stage {
  const { signal, plan, totals } = run;
  const count = (s: RequestSample) => {
    totals.requests++;
    if (s.error !== null) totals.errors++;
    totals.tokens += s.completionTokens;
    return s;
  };
  const sendRaw = sessionSender(run, endpoint, model, signal, plan.requestTimeoutSeconds);
  const warmupTimeout = Math.min(plan.requestTimeoutSeconds, WARMUP_TIMEOUT_SECONDS);
  const warmupRaw = sessionSender(run, endpoint, model, signal, warmupTimeout);
  return {
    run,
    model,
    send: (r, onChunk) => sendRaw(r, onChunk).then(count),
    sendWarmup: (r, onChunk) => warmupRaw(r, onChunk).then(count),
    count,
    watch: run.watch,
  };
}

/** A stage's stop (the whole result) rather than the samples it gathered. */
const isResult = (x: BenchSamples | BenchResult): x is BenchResult => "samples" in x;

const plain = (prompt: string, maxTokens: number, ignoreEos: boolean): LoadRequest => ({
  prompt,
  maxTokens,
  extraBody: ignoreEos ? { ignore_eos: true } : {},
});

/** The warmup; a failed one (no usage, a hang, an error) is what every later request would meet: the run stops. */
async function warmupStage(st: Stage): Promise<BenchSamples | BenchResult> {
  const { run, watch } = st;
  run.progress({
    kind: "stage",
    stage: "warmup",
    detail: `${WARMUP_PROMPT}, max_tokens ${run.plan.warmupMaxTokens}`,
    sinceStart: run.totals,
  });
  watch.during = "the warmup";
  const warmup = await st.sendWarmup(plain(WARMUP_PROMPT, run.plan.warmupMaxTokens, false));
  watch.note(warmup);
  await watch.settle();
  const samples: BenchSamples = { warmup, singleRequest: [], sweep: [] };
  if (warmup.error === null) return samples;
  // The deadline ending it is a hang too, and its reason names the warmup and what it saw; only the
  // caller's own interrupt is reported as that.
  const interrupted = run.hooks.signal?.aborted === true;
  const reason = watch.gone ?? (interrupted ? abortReason(run.signal).message : warmupStop(warmup.error));
  return run.stopped(st.model, samples, reason, watch.gone);
}

/** The single requests, one at a time at each max_tokens, into SAMPLES; why they stopped the run, or null. */
async function singlesStage(st: Stage, samples: BenchSamples): Promise<string | null> {
  const { run, watch } = st;
  const { plan } = run;
  for (const maxTokens of plan.singleRequestMaxTokens) {
    if (watch.signal.aborted) break;
    watch.during = `the single requests at max_tokens ${maxTokens}`;
    run.progress({
      kind: "stage",
      stage: "single",
      detail: `${plan.singleRequestPrompts} requests one at a time, max_tokens ${maxTokens}`,
      sinceStart: run.totals,
    });
    const requests: RequestSample[] = [];
    samples.singleRequest.push({ maxTokens, requests });
    const tally = { errors: 0, tokens: 0 };
    for (let i = 0; i < plan.singleRequestPrompts && !watch.signal.aborted; i++) {
      const s = await st.send(plain(BENCH_PROMPTS[i % BENCH_PROMPTS.length], maxTokens, plan.ignoreEos));
      watch.note(s);
      await watch.settle();
      requests.push(s);
      if (s.error !== null) tally.errors++;
      tally.tokens += s.completionTokens;
      const done = { done: requests.length, total: plan.singleRequestPrompts, ...tally };
      const at = { elapsedSeconds: hostNow(run.clock), sinceStart: run.totals };
      run.progress({ kind: "request", stage: "single", label: `max_tokens ${maxTokens}`, ...done, ...at });
      // One request alone that never completed: the server hangs, and the sweep would only wait longer.
      if (s.error?.startsWith("no complete answer within") && !run.signal.aborted)
        return `a single request at max_tokens ${maxTokens} hung (${s.error}): stopped before the sweep`;
    }
  }
  return null;
}

/** The sweep (closed-loop concurrencies or open-loop rates), by the one measureSweep, into SAMPLES. */
async function sweepStage(st: Stage, endpoint: Endpoint, samples: BenchSamples): Promise<void> {
  const { run } = st;
  const { plan, mode, signal } = run;
  const label = (level: number) => (mode === "closed" ? `concurrency ${level}` : `${level} req/s offered`);
  const { readCounters } = run.hooks;
  const measured = await measureSweep(endpoint, st.model, {
    mode,
    levels: run.levels,
    requests: requestsOf(plan),
    requestsPerLevel: plan.requestsPerConcurrency,
    repeats: plan.repeats,
    requestTimeoutSeconds: plan.requestTimeoutSeconds,
    timeScale: run.clock.timeScale,
    judgement: plan,
    acceptanceFloor: run.hooks.acceptanceFloor ?? null,
    clientThreads: plan.clientThreads,
    signal,
    session: run,
    ...(readCounters ? { readCounters: () => readCounters(st.model, signal) } : {}),
    // The sweep runs only after a warmup that succeeded (warmupStage stops the run otherwise).
    warm: samples.warmup?.error === null,
    singleStreamTokensPerSecond: singleStreamSpeed(samples),
    onSample: st.count,
    onStart: (level, total) =>
      run.progress({
        kind: "stage",
        stage: "sweep",
        sinceStart: run.totals,
        detail: `${label(level)}: ${total} requests${plan.repeats > 1 ? ` x ${plan.repeats} runs` : ""}, max_tokens ${plan.sweepMaxTokens}`,
      }),
    onRequest: (level, tally, total) =>
      run.progress({
        kind: "request",
        stage: "sweep",
        label: label(level),
        ...tally,
        total,
        elapsedSeconds: hostNow(run.clock),
        sinceStart: run.totals,
      }),
    // the plan's error budget, slo, rateShortfall and certification are the level's judgement
    onLevel: (level) => run.progress({ kind: "level", summary: withoutSamples(level) }),
  });
  samples.sweep = measured.samples;
  if (measured.bracket !== null) samples.bracket = measured.bracket;
}

/**
 * The benchmark: the model check, the warmup, the single requests, then the sweep, each a stage
 * above; a stage that stops the run returns the result with its reason. One deadline bounds it all.
 */
export async function bench(
  endpoint: Endpoint,
  planInput: BenchPlanInput = {},
  hooks: BenchHooks = {},
): Promise<BenchResult> {
  const { run, deadline } = openRun(endpoint, planInput, hooks);
  try {
    const asked = endpoint.model && endpoint.model.length > 0 ? endpoint.model : null;
    const model = await modelStage(run, asked, endpoint.apiKey);
    if (typeof model !== "string") return model;
    const st = stageOf(run, endpoint, model);
    const samples = await warmupStage(st);
    if (isResult(samples)) return samples;
    const hung = await singlesStage(st, samples);
    if (hung !== null) return run.stopped(model, samples, hung);
    const acceptanceLength = await readAcceptanceLength(run.agent, run.base, endpoint.apiKey, st.watch.signal);
    await sweepStage(st, endpoint, samples);
    return run.finished(model, samples, acceptanceLength);
  } finally {
    deadline.clear();
    void run.agent.destroy().catch(() => undefined);
  }
}

/** The fastest single request's decode speed (tokens per host second, first token to last), or null: "auto"'s first guess. */
function singleStreamSpeed(samples: BenchSamples): number | null {
  const speeds = samples.singleRequest
    .flatMap((r) => r.requests)
    .flatMap((s) => {
      const decoding = s.ttftSeconds === null ? 0 : s.e2eSeconds - s.ttftSeconds;
      return s.error === null && decoding > 0 && s.completionTokens > 1 ? [(s.completionTokens - 1) / decoding] : [];
    });
  return speeds.length > 0 ? Math.max(...speeds) : null;
}

/** The model to benchmark: the one asked for, if GET /v1/models lists it; otherwise the first listed. */
async function listedModel(
  agent: Agent,
  base: string,
  apiKey: string | undefined,
  signal: AbortSignal,
  asked: string | null,
): Promise<string> {
  const url = `${base}/v1/models`;
  let reply;
  try {
    reply = await withTimeout(
      [signal],
      30_000,
      () => `GET ${url}: no answer within 30 s`,
      (s) => fetchText(agent, url, { apiKey, signal: s }),
    );
  } catch (err) {
    if (signal.aborted) throw err;
    throw new Error(`the server never answered: GET ${url}: ${describeError(err)}; nothing was measured`, {
      cause: err,
    });
  }
  if (reply.status !== 200) throw new Error(`GET ${url} answered HTTP ${reply.status}; nothing was measured`);
  let ids: string[];
  try {
    ids = ((JSON.parse(reply.text) as ModelList | null)?.data ?? []).map((m) => String(m?.id));
  } catch {
    throw new Error(`GET ${url} answered HTTP 200 with a body that is not JSON: ${reply.text.slice(0, 120)}`);
  }
  if (ids.length === 0) throw new Error(`GET ${url} lists no model`);
  if (asked === null) return ids[0];
  if (!ids.includes(asked))
    throw new Error(
      `GET ${url}: the server serves ${JSON.stringify(ids)}, not the model asked for ${JSON.stringify(asked)}; nothing was measured`,
    );
  return asked;
}
