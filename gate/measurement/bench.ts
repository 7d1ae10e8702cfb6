/**
 * The benchmark, run after readiness: warmup, single requests at each max_tokens, then a sweep by
 * the one load generator (load.ts): concurrencies (closed loop) or request rates (open loop), each
 * level `repeats` times. Raw samples are kept apart from the summary, and the summary is computed
 * from them only. Every figure is in the host's own time (load.ts; `hooks.timeScale`).
 */
import type { Agent } from "undici";
import { BenchPlanSchema, type BenchPlan, type BenchPlanInput } from "../schema";
import { baseUrl, fetchText, makeAgent, type Endpoint } from "../transport/http";
import { abortReason, armTimeout, withTimeout } from "../transport/timers";
import type { ModelList } from "../transport/wire";
import { readAcceptanceLength } from "../readiness/acceptance";
import { summarizeLevel, type LevelSamples, type LevelSummary } from "./levels";
import { hostNow, makeSender, runSweep, ServerWatch, type HostClock, type LoadRequest } from "./load";
import { judgeLevels } from "./saturation";
import { summarizeSingle, type SingleRequestSummary } from "./stats";
import type { RequestSample } from "./stream";
import { shapedRequest, WorkloadShapeSchema } from "./workload";

export const WARMUP_PROMPT = "Say just 'OK'";

/** Prompts that ask for long answers; ignore_eos keeps the length exact anyway. */
export const BENCH_PROMPTS = [
  "Write a detailed technical essay on how large language model inference servers batch requests.",
  "Explain, step by step and at length, how a CPU executes a program from power-on to a running shell.",
  "Write a long story about a lighthouse keeper who discovers a map of forgotten islands.",
  "Describe in depth the history of numerical weather prediction and its main algorithms.",
  "Write an extensive guide to brewing coffee with every common method, with reasons for each step.",
  "Explain the mathematics of attention in transformers thoroughly, with worked examples.",
  "Write a comprehensive tutorial on writing a compiler for a small language.",
  "Describe, in great detail, the life cycle of stars and the elements they produce.",
];

export type BenchProgress =
  | { kind: "stage"; stage: "warmup" | "single" | "sweep"; detail: string }
  | {
      kind: "request";
      stage: "single" | "sweep";
      label: string;
      done: number;
      total: number;
      errors: number;
      tokens: number;
      elapsedSeconds: number;
    }
  | { kind: "level"; summary: LevelSummary };

export interface BenchHooks {
  onProgress?: (event: BenchProgress) => void;
  /** Stops the run early (the remaining requests become errors, the result incomplete). */
  signal?: AbortSignal;
  /** Simulated seconds per wall second of the server measured (absent: 1, real hardware). */
  timeScale?: number;
}

export interface BenchSamples {
  warmup: RequestSample;
  singleRequest: { maxTokens: number; requests: RequestSample[] }[];
  sweep: LevelSamples[];
}

export interface BenchSummary {
  model: string;
  startedAt: string;
  /** False when the deadline, the caller or the server's death stopped the run before every level ran. */
  complete: boolean;
  /** Why the run stopped early (the server went away, the deadline, an interrupt); null when it ran to the end. */
  stopReason: string | null;
  /** The server went away mid-run (the run stopped there; no sustained figure); null when it survived. */
  serverGone: string | null;
  warmupError: string | null;
  singleRequest: SingleRequestSummary[];
  sweep: LevelSummary[];
  /** The knee's concurrency (gate/measurement/saturation.ts); null when not saturated or no level counts. */
  saturationConcurrency: number | null;
  /** False when throughput still rose at the last level that kept the error budget. */
  saturated: boolean;
  /** The knee's throughput; not saturated, the last counted level's (a lower bound); 0 when none counts. */
  sustainedOutputTokensPerSecond: number;
  /** Levels whose error rate broke the plan's error budget: excluded from every figure above. */
  failedLevels: number[];
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
  },
): BenchSummary {
  const judgement = { slo: meta.plan.slo, rateShortfall: meta.plan.rateShortfall };
  const sweep = samples.sweep.map((l) => summarizeLevel(l, meta.plan.errorBudget, judgement));
  const knee = judgeLevels(sweep, {
    errorBudget: meta.plan.errorBudget,
    minGain: meta.plan.kneeMinGain,
    maxTtftP95Seconds: meta.plan.kneeMaxTtftP95Seconds,
  });
  const gone = meta.serverGone ?? null;
  return {
    model: meta.model,
    startedAt: meta.startedAt,
    complete: meta.complete,
    stopReason: meta.stopReason ?? gone,
    serverGone: gone,
    warmupError: samples.warmup.error,
    singleRequest: samples.singleRequest.map((s) => summarizeSingle(s.maxTokens, s.requests)),
    sweep,
    saturationConcurrency: gone === null ? knee.saturationConcurrency : null,
    saturated: gone === null && knee.saturated,
    sustainedOutputTokensPerSecond: gone === null ? knee.sustainedOutputTokensPerSecond : 0,
    failedLevels: knee.failedLevels,
    saturationVerdict:
      gone === null ? knee.verdict : `${gone}; no figure is published from a run the server did not survive`,
    acceptanceLength: meta.acceptanceLength,
    mode: meta.plan.rate ? "open" : "closed",
    sustainedLevel: gone === null ? knee.sustainedLevel : null,
    timeScale: meta.timeScale ?? 1,
    plan: meta.plan,
  };
}

export async function bench(
  endpoint: Endpoint,
  planInput: BenchPlanInput = {},
  hooks: BenchHooks = {},
): Promise<BenchResult> {
  const plan = BenchPlanSchema.parse(planInput);
  const base = baseUrl(endpoint.url);
  const mode = plan.rate ? "open" : "closed";
  const levels = plan.rate ?? plan.concurrency;
  // An open loop has no bound on requests in flight: enough connections that the client never queues.
  const agent = makeAgent(mode === "closed" ? Math.max(...plan.concurrency, 1) + 4 : 256);
  // The run's one deadline (wall clock), joined with the caller's signal (Ctrl-C); cleared in finally.
  const deadline = armTimeout(
    [hooks.signal],
    plan.deadlineSeconds * 1000,
    () => `benchmark deadline of ${plan.deadlineSeconds} s passed`,
  );
  const signal = deadline.signal;
  const clock: HostClock = { origin: performance.now(), timeScale: hooks.timeScale ?? 1 };
  const startedAt = new Date().toISOString();
  const progress = hooks.onProgress ?? (() => undefined);
  try {
    const model =
      endpoint.model && endpoint.model.length > 0
        ? endpoint.model
        : await firstModel(agent, base, endpoint.apiKey, signal);
    const send = makeSender({ endpoint, base, model, agent, clock, signal, ...plan });
    const watch = new ServerWatch(base, signal);
    const plain = (prompt: string, maxTokens: number, ignoreEos: boolean): LoadRequest => ({
      prompt,
      maxTokens,
      extraBody: ignoreEos ? { ignore_eos: true } : {},
    });

    progress({ kind: "stage", stage: "warmup", detail: `${WARMUP_PROMPT}, max_tokens ${plan.warmupMaxTokens}` });
    watch.during = "the warmup";
    const warmup = await send(plain(WARMUP_PROMPT, plan.warmupMaxTokens, false));
    watch.note(warmup);
    await watch.settle();
    const samples: BenchSamples = { warmup, singleRequest: [], sweep: [] };

    for (const maxTokens of plan.singleRequestMaxTokens) {
      if (watch.signal.aborted) break;
      watch.during = `the single requests at max_tokens ${maxTokens}`;
      progress({
        kind: "stage",
        stage: "single",
        detail: `${plan.singleRequestPrompts} requests one at a time, max_tokens ${maxTokens}`,
      });
      const requests: RequestSample[] = [];
      const tally = { errors: 0, tokens: 0 };
      for (let i = 0; i < plan.singleRequestPrompts && !watch.signal.aborted; i++) {
        const s = await send(plain(BENCH_PROMPTS[i % BENCH_PROMPTS.length], maxTokens, plan.ignoreEos));
        watch.note(s);
        await watch.settle();
        requests.push(s);
        if (s.error !== null) tally.errors++;
        tally.tokens += s.completionTokens;
        progress({
          kind: "request",
          stage: "single",
          label: `max_tokens ${maxTokens}`,
          done: requests.length,
          total: plan.singleRequestPrompts,
          ...tally,
          elapsedSeconds: hostNow(clock),
        });
      }
      samples.singleRequest.push({ maxTokens, requests });
    }
    const acceptanceLength = await readAcceptanceLength(agent, base, endpoint.apiKey, watch.signal);

    samples.sweep = await runSweep({
      mode,
      levels,
      requestsPerLevel: plan.requestsPerConcurrency,
      repeats: plan.repeats,
      seed: 1,
      request: sweepRequests(plan),
      send,
      clock,
      signal,
      readAcceptance: () => readAcceptanceLength(agent, base, endpoint.apiKey, signal),
      watch,
      onStart: (level, total) =>
        progress({
          kind: "stage",
          stage: "sweep",
          detail: `${mode === "closed" ? `concurrency ${level}` : `${level} req/s offered`}: ${total} requests${plan.repeats > 1 ? ` x ${plan.repeats} runs` : ""}, max_tokens ${plan.sweepMaxTokens}`,
        }),
      onRequest: (level, tally, total) =>
        progress({
          kind: "request",
          stage: "sweep",
          label: mode === "closed" ? `concurrency ${level}` : `${level} req/s offered`,
          ...tally,
          total,
          elapsedSeconds: hostNow(clock),
        }),
      onLevel: (level) =>
        progress({
          kind: "level",
          summary: summarizeLevel(level, plan.errorBudget, { slo: plan.slo, rateShortfall: plan.rateShortfall }),
        }),
    });
    const stopReason = watch.gone ?? (signal.aborted ? abortReason(signal).message : null);
    const complete = stopReason === null && samples.sweep.length === levels.length;
    return {
      ...summarizeBench(samples, {
        model,
        startedAt,
        complete,
        acceptanceLength,
        plan,
        timeScale: clock.timeScale,
        stopReason,
        serverGone: watch.gone,
      }),
      samples,
    };
  } finally {
    deadline.clear();
    void agent.destroy().catch(() => undefined);
  }
}

/** The sweep's i-th request: the long-answer prompts, or the plan's prompt mix; thinking as the plan says. */
function sweepRequests(plan: BenchPlan): (index: number) => LoadRequest {
  const thinking = plan.thinking === null ? {} : { chat_template_kwargs: { thinking: plan.thinking } };
  if (plan.mix) {
    const shape = WorkloadShapeSchema.parse({
      mix: plan.mix,
      outputTokens: { distribution: "fixed", tokens: plan.sweepMaxTokens },
      thinking: plan.thinking,
      ignoreEos: plan.ignoreEos,
    });
    return (i) => shapedRequest(shape, i);
  }
  return (i) => ({
    prompt: BENCH_PROMPTS[i % BENCH_PROMPTS.length],
    maxTokens: plan.sweepMaxTokens,
    extraBody: { ...(plan.ignoreEos ? { ignore_eos: true } : {}), ...thinking },
  });
}

async function firstModel(
  agent: Agent,
  base: string,
  apiKey: string | undefined,
  signal: AbortSignal,
): Promise<string> {
  const url = `${base}/v1/models`;
  const reply = await withTimeout(
    [signal],
    30_000,
    () => `GET ${url}: no answer within 30 s`,
    (s) => fetchText(agent, url, { apiKey, signal: s }),
  );
  if (reply.status !== 200) throw new Error(`GET ${url} answered HTTP ${reply.status}`);
  let id: unknown;
  try {
    id = (JSON.parse(reply.text) as ModelList | null)?.data?.[0]?.id;
  } catch {
    throw new Error(`GET ${url} answered HTTP 200 with a body that is not JSON: ${reply.text.slice(0, 120)}`);
  }
  if (typeof id !== "string") throw new Error(`GET ${url} lists no model`);
  return id;
}
