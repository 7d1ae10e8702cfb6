/**
 * The benchmark, run after readiness: warmup, single requests at each max_tokens, then a
 * closed-loop concurrency sweep (N workers, each sending its next request when the last ends).
 * Raw samples are kept apart from the summary, and the summary is computed from them only.
 */
import type { Agent } from "undici";
import { baseUrl, fetchText, makeAgent, type Endpoint } from "../transport/http";
import { findKnee } from "./saturation";
import { BenchPlanSchema, type BenchPlan, type BenchPlanInput } from "../schema";
import {
  summarizeLevel,
  summarizeSingle,
  type LevelSamples,
  type LevelSummary,
  type SingleRequestSummary,
} from "./stats";
import { streamChat, type RequestSample } from "./stream";
import { armTimeout, withTimeout } from "../transport/timers";
import type { ModelList, ServerInfo } from "../transport/wire";

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
}

export interface BenchSamples {
  warmup: RequestSample;
  singleRequest: { maxTokens: number; requests: RequestSample[] }[];
  sweep: LevelSamples[];
}

export interface BenchSummary {
  model: string;
  startedAt: string;
  /** False when the deadline or the caller stopped the run before every level ran. */
  complete: boolean;
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
  plan: BenchPlan;
}

export interface BenchResult extends BenchSummary {
  samples: BenchSamples;
}

export function summarizeBench(
  samples: BenchSamples,
  meta: { model: string; startedAt: string; complete: boolean; acceptanceLength: number | null; plan: BenchPlan },
): BenchSummary {
  const sweep = samples.sweep.map((l) => summarizeLevel(l, meta.plan.errorBudget));
  const knee = findKnee(sweep, {
    errorBudget: meta.plan.errorBudget,
    minGain: meta.plan.kneeMinGain,
    maxTtftP95Seconds: meta.plan.kneeMaxTtftP95Seconds,
  });
  return {
    model: meta.model,
    startedAt: meta.startedAt,
    complete: meta.complete,
    warmupError: samples.warmup.error,
    singleRequest: samples.singleRequest.map((s) => summarizeSingle(s.maxTokens, s.requests)),
    sweep,
    saturationConcurrency: knee.saturationConcurrency,
    saturated: knee.saturated,
    sustainedOutputTokensPerSecond: knee.sustainedOutputTokensPerSecond,
    failedLevels: knee.failedLevels,
    saturationVerdict: knee.verdict,
    acceptanceLength: meta.acceptanceLength,
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
  const maxConcurrency = Math.max(...plan.concurrency, 1);
  const agent = makeAgent(maxConcurrency + 4);
  // The run's one deadline, joined with the caller's signal (Ctrl-C); cleared in finally.
  const deadline = armTimeout(
    [hooks.signal],
    plan.deadlineSeconds * 1000,
    () => `benchmark deadline of ${plan.deadlineSeconds} s passed`,
  );
  const signal = deadline.signal;
  const origin = performance.now();
  const startedAt = new Date().toISOString();
  const progress = hooks.onProgress ?? (() => undefined);
  try {
    const model =
      endpoint.model && endpoint.model.length > 0
        ? endpoint.model
        : await firstModel(agent, base, endpoint.apiKey, signal);
    const requestTimeoutMs = plan.requestTimeoutSeconds * 1000;
    const send = (prompt: string, maxTokens: number, ignoreEos: boolean, onOutputChunk?: () => void) =>
      withTimeout(
        [signal],
        requestTimeoutMs,
        () => `no complete answer within ${plan.requestTimeoutSeconds} s`,
        (s) =>
          streamChat({
            url: `${base}/v1/chat/completions`,
            body: {
              model,
              messages: [{ role: "user", content: prompt }],
              max_tokens: maxTokens,
              stream: true,
              stream_options: { include_usage: true },
              ...(ignoreEos ? { ignore_eos: true } : {}),
            },
            apiKey: endpoint.apiKey,
            signal: s,
            dispatcher: agent,
            origin,
            onOutputChunk,
          }),
      );

    progress({ kind: "stage", stage: "warmup", detail: `${WARMUP_PROMPT}, max_tokens ${plan.warmupMaxTokens}` });
    const warmup = await send(WARMUP_PROMPT, plan.warmupMaxTokens, false);
    const samples: BenchSamples = { warmup, singleRequest: [], sweep: [] };

    for (const maxTokens of plan.singleRequestMaxTokens) {
      if (signal.aborted) break;
      progress({
        kind: "stage",
        stage: "single",
        detail: `${plan.singleRequestPrompts} requests one at a time, max_tokens ${maxTokens}`,
      });
      const requests: RequestSample[] = [];
      for (let i = 0; i < plan.singleRequestPrompts && !signal.aborted; i++) {
        requests.push(await send(BENCH_PROMPTS[i % BENCH_PROMPTS.length], maxTokens, plan.ignoreEos));
        progress(requestProgress("single", `max_tokens ${maxTokens}`, requests, plan.singleRequestPrompts, origin));
      }
      samples.singleRequest.push({ maxTokens, requests });
    }
    const acceptanceLength = await readAcceptanceLength(agent, base, endpoint.apiKey, signal);

    for (const concurrency of plan.concurrency) {
      if (signal.aborted) break;
      const total = concurrency * plan.requestsPerConcurrency;
      progress({
        kind: "stage",
        stage: "sweep",
        detail: `concurrency ${concurrency}: ${total} requests, max_tokens ${plan.sweepMaxTokens}`,
      });
      const level = await runLevel(
        concurrency,
        total,
        (i) => send(BENCH_PROMPTS[i % BENCH_PROMPTS.length], plan.sweepMaxTokens, plan.ignoreEos),
        origin,
        (done) => progress(requestProgress("sweep", `concurrency ${concurrency}`, done, total, origin)),
        signal,
      );
      // A level the deadline or an interrupt cut short measured the cut, not the server: dropped.
      if (signal.aborted) break;
      level.acceptanceLength = await readAcceptanceLength(agent, base, endpoint.apiKey, signal);
      samples.sweep.push(level);
      progress({ kind: "level", summary: summarizeLevel(level, plan.errorBudget) });
    }
    const complete = !signal.aborted && samples.sweep.length === plan.concurrency.length;
    return { ...summarizeBench(samples, { model, startedAt, complete, acceptanceLength, plan }), samples };
  } finally {
    deadline.clear();
    void agent.destroy().catch(() => undefined);
  }
}

/** A closed loop: `concurrency` workers share `total` requests; each starts its next one at once. */
async function runLevel(
  concurrency: number,
  total: number,
  send: (index: number) => Promise<RequestSample>,
  origin: number,
  onDone: (done: RequestSample[]) => void,
  signal: AbortSignal,
): Promise<LevelSamples> {
  const requests: RequestSample[] = [];
  let next = 0;
  const startedAtSeconds = (performance.now() - origin) / 1000;
  const worker = async () => {
    // A stopped run sends nothing more: requests never sent are not errors of the server.
    while (next < total && !signal.aborted) {
      const index = next++;
      requests.push(await send(index));
      onDone(requests);
    }
  };
  await Promise.all(Array.from({ length: Math.min(concurrency, total) }, worker));
  const finishedAtSeconds = (performance.now() - origin) / 1000;
  return { concurrency, startedAtSeconds, finishedAtSeconds, acceptanceLength: null, requests };
}

function requestProgress(
  stage: "single" | "sweep",
  label: string,
  done: RequestSample[],
  total: number,
  origin: number,
): BenchProgress {
  return {
    kind: "request",
    stage,
    label,
    done: done.length,
    total,
    errors: done.filter((s) => s.error !== null).length,
    tokens: done.reduce((a, s) => a + s.completionTokens, 0),
    elapsedSeconds: (performance.now() - origin) / 1000,
  };
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

/**
 * SGLang reports speculative acceptance in /get_server_info (internal_states[0].avg_spec_accept_length)
 * and, with --enable-metrics, as the gauge sglang:spec_accept_length. Null for autoregressive services.
 */
export async function readAcceptanceLength(
  agent: Agent,
  base: string,
  apiKey: string | undefined,
  signal: AbortSignal,
): Promise<number | null> {
  if (signal.aborted) return null;
  try {
    const info = await withTimeout(
      [signal],
      5_000,
      () => "no answer within 5 s",
      (s) => fetchText(agent, `${base}/get_server_info`, { apiKey, signal: s }),
    );
    if (info.status === 200) {
      const value = (JSON.parse(info.text) as ServerInfo | null)?.internal_states?.[0]?.avg_spec_accept_length;
      if (typeof value === "number" && Number.isFinite(value)) return value;
    }
  } catch {
    // Older servers lack /get_server_info; fall through to /metrics.
  }
  try {
    const metrics = await withTimeout(
      [signal],
      5_000,
      () => "no answer within 5 s",
      (s) => fetchText(agent, `${base}/metrics`, { apiKey, signal: s }),
    );
    if (metrics.status === 200) return parseSpecAcceptLength(metrics.text);
  } catch {
    // Metrics are optional (--enable-metrics); absence means "not speculative or not reported".
  }
  return null;
}

/** The value of sglang:spec_accept_length in Prometheus text (the first series, labels ignored). */
export function parseSpecAcceptLength(text: string): number | null {
  for (const line of text.split("\n")) {
    if (!line.startsWith("sglang:spec_accept_length")) continue;
    const rest = line.slice("sglang:spec_accept_length".length);
    if (rest.length > 0 && rest[0] !== "{" && rest[0] !== " ") continue;
    // `name{labels} value [timestamp]`: the value is the first field after the labels.
    const afterLabels = rest.startsWith("{") ? rest.slice(rest.indexOf("}") + 1) : rest;
    const value = Number(afterLabels.trim().split(/\s+/)[0]);
    if (Number.isFinite(value)) return value;
  }
  return null;
}
