/**
 * Two classes of traffic at once through one router (issue 29.3): people waiting for answers
 * (interactive: a closed loop of users, judged by TTFT and inter-token latency) and a batch job
 * (a closed loop of many slots, judged by its throughput), each asking for its own served model
 * name, so that SMG's model registry sends each class to the hosts serving that name (SMG 1.13
 * routes a request to the workers whose served_model_name is its `model`; one that no worker
 * serves is refused with model_not_found), never a router of ours.
 *
 * The one load generator (load.ts runLevelLoad) runs both loops. The batch starts first and runs
 * until every slot has turned over once (steady), then the interactive loop runs its requests; its
 * run is the window both classes are measured in. When the window ends the batch sends no more and
 * its requests in flight finish. Its figure is the tokens each of its requests produced inside the
 * window (its tokens spread evenly from its first token to its last), over the window: requests of
 * one length started together stay in step, and counting only those that finished inside the
 * window read 37 % low where the window held one wave of completions instead of two. Each class is
 * reconciled with the workers' own counters by model (the served names label them), and the tokens
 * each worker generated for each name say where each class was served.
 */
import { baseUrl, makeAgent } from "../transport/http";
import { BENCH_PROMPTS } from "./bench";
import { closedLoopLoad, reconcile, type CertificateCheck } from "./certificate";
import { makeSender, runLevelLoad, type HostClock } from "./load";
import { readCounters, summedCounters, type CounterRead } from "./server-counters";
import { perTokenLatencies } from "./goodput";
import { latencyStats, percentile } from "./stats";
import type { RequestSample } from "./stream";

export interface TrafficClass {
  /** The served model name the class asks for: the router sends it to the hosts serving that name. */
  model: string;
  /** Requests in flight at once (interactive: users, each with one request; batch: slots). */
  concurrency: number;
  maxTokens: number;
}

export interface MixedTrafficOptions {
  /** The router. */
  url: string;
  apiKey?: string;
  interactive: TrafficClass & { requestsPerUser: number };
  batch: TrafficClass;
  /** Every worker behind the router: their counters by model reconcile each class and say where it was served. */
  workers: string[];
  /** Host seconds per wall second of the hosts measured (1 on real hardware). */
  timeScale: number;
  requestTimeoutSeconds: number;
  /** Generated tokens may differ from the client's count by this fraction (certification.tokenTolerance). */
  tokenTolerance: number;
  /** Interactive: the closed loop's in-flight mean may fall short of its users by this fraction (certification.loadShortfall). */
  loadShortfall: number;
  signal?: AbortSignal;
}

export interface ClassResult {
  model: string;
  concurrency: number;
  requests: number;
  /** Failed requests. */
  errors: number;
  /** Output tokens per host second within the window (each request's tokens inside it). */
  outputTokensPerSecond: number;
  ttftP95Seconds: number | null;
  /** Each request's (e2e - TTFT) / (tokens - 1), p95: the comparison's measure, which the mixed plan reads. */
  itlPerTokenP95Seconds: number | null;
  /** The workers' counters by this class's model against what the client counted. */
  reconciled: CertificateCheck;
  /** Interactive: the users asked for were the users applied (time-weighted requests in flight). */
  load: CertificateCheck | null;
  /** Tokens each worker generated for this class's model during the run (URL: tokens). */
  servedBy: Record<string, number>;
}

export interface MixedTrafficResult {
  /** The interactive run's window, host seconds. */
  windowSeconds: number;
  interactive: ClassResult;
  batch: ClassResult;
}

/** The batch loop's request bound: it runs until the window ends, long before this many. */
const BATCH_TURNS = 1_000;

/**
 * The tokens a successful request produced inside [from, to]: its first token at TTFT, the rest
 * spread evenly to its end.
 */
export function windowTokens(s: RequestSample, from: number, to: number): number {
  if (s.error !== null || s.ttftSeconds === null) return 0;
  const first = s.startedAtSeconds + s.ttftSeconds;
  const last = s.startedAtSeconds + s.e2eSeconds;
  if (last <= first) return first >= from && first <= to ? s.completionTokens : 0;
  const overlap = Math.max(0, Math.min(last, to) - Math.max(first, from));
  return (s.completionTokens * overlap) / (last - first);
}

export async function runMixedTraffic(o: MixedTrafficOptions): Promise<MixedTrafficResult> {
  const base = baseUrl(o.url);
  const clock: HostClock = { origin: performance.now(), timeScale: o.timeScale };
  const signal = o.signal ?? new AbortController().signal;
  const batchDrain = new AbortController();
  const agents = [makeAgent(o.batch.concurrency + 2), makeAgent(o.interactive.concurrency + 2)];
  const send = (i: 0 | 1, model: string) =>
    makeSender({
      endpoint: { url: o.url, apiKey: o.apiKey },
      base,
      model,
      agent: agents[i],
      clock,
      signal,
      requestTimeoutSeconds: o.requestTimeoutSeconds,
    });
  const loop = (c: TrafficClass, count: number) => ({
    mode: "closed" as const,
    level: c.concurrency,
    count,
    repeats: 1,
    seed: 1,
    maxInFlight: c.concurrency,
    requests: {
      kind: "prompts" as const,
      prompts: BENCH_PROMPTS,
      maxTokens: c.maxTokens,
      extraBody: { ignore_eos: true },
    },
    clock,
    signal,
  });
  try {
    const before = await countersByWorker(o, signal);
    let steady: () => void = () => undefined;
    const turnedOver = new Promise<void>((resolve) => (steady = resolve));
    const batchRun = runLevelLoad({
      ...loop(o.batch, o.batch.concurrency * BATCH_TURNS),
      send: send(0, o.batch.model),
      drain: batchDrain.signal,
      onDone: (t) => {
        if (t.done >= o.batch.concurrency) steady();
      },
    });
    await Promise.race([turnedOver, batchRun]);
    const interactiveRun = await runLevelLoad({
      ...loop(o.interactive, o.interactive.concurrency * o.interactive.requestsPerUser),
      send: send(1, o.interactive.model),
    });
    // The window has ended: the batch sends no more, and what it has in flight finishes.
    batchDrain.abort();
    const batchSamples = (await batchRun).requests;
    const after = await countersByWorker(o, signal);
    const window = interactiveRun.runs[0] ?? { startedAtSeconds: 0, finishedAtSeconds: 0 };
    const from = window.startedAtSeconds;
    const to = window.finishedAtSeconds;
    const span = Math.max(1e-9, to - from);
    const inWindow = (s: RequestSample) => windowTokens(s, from, to);
    const interactive = interactiveRun.requests;
    const counters = { before, after, span };
    return {
      windowSeconds: span,
      interactive: classResult(o, o.interactive, interactive, interactive, interactive.map(inWindow), counters, true),
      batch: classResult(
        o,
        o.batch,
        batchSamples,
        batchSamples.filter((s) => inWindow(s) > 0),
        batchSamples.map(inWindow),
        counters,
        false,
      ),
    };
  } finally {
    batchDrain.abort();
    for (const a of agents) void a.destroy().catch(() => undefined);
  }
}

type ByWorker = Record<string, Record<string, CounterRead>>;
type Counters = ByWorker & { fleet: Record<string, CounterRead> };

/** Each worker's counters for each class's model, and the fleet's sum per model. */
async function countersByWorker(o: MixedTrafficOptions, signal: AbortSignal): Promise<Counters> {
  const models = [o.interactive.model, o.batch.model];
  const agent = makeAgent(Math.max(1, o.workers.length));
  try {
    const per: ByWorker = {};
    for (const w of o.workers) {
      per[w] = {};
      for (const m of models) per[w][m] = await readCounters(agent, baseUrl(w), m, o.apiKey, signal);
    }
    // The fleet's sum from the same reads, not a second round of them.
    const fleet: Record<string, CounterRead> = {};
    for (const m of models)
      fleet[m] = summedCounters(
        o.workers,
        o.workers.map((w) => per[w][m]),
      );
    return Object.assign(per, { fleet });
  } finally {
    void agent.destroy().catch(() => undefined);
  }
}

/** A read without the other class's model: its tokens are this run's own, not another client's. */
function mine(read: CounterRead, other: string): CounterRead {
  if (!read.ok) return read;
  const { [other]: _, ...rest } = read.snapshot.generatedByModel;
  return { ok: true, snapshot: { ...read.snapshot, generatedByModel: rest } };
}

function classResult(
  o: MixedTrafficOptions,
  c: TrafficClass,
  all: RequestSample[],
  /** The requests the class's latencies are taken over (the batch's: those with tokens in the window). */
  counted: RequestSample[],
  /** Each of ALL's tokens inside the window. */
  windowed: number[],
  counters: { before: Counters; after: Counters; span: number },
  interactive: boolean,
): ClassResult {
  const { before, after, span } = counters;
  const failed = all.filter((s) => s.error !== null);
  const other = c.model === o.interactive.model ? o.batch.model : o.interactive.model;
  const ok = all.filter((s) => s.error === null);
  const stats = latencyStats(counted);
  const servedBy: Record<string, number> = {};
  for (const w of o.workers) {
    const b = before[w]?.[c.model];
    const a = after[w]?.[c.model];
    servedBy[w] = b?.ok && a?.ok ? a.snapshot.generatedTokens - b.snapshot.generatedTokens : NaN;
  }
  return {
    model: c.model,
    concurrency: c.concurrency,
    requests: counted.length,
    errors: failed.length,
    outputTokensPerSecond: windowed.reduce((a, t) => a + t, 0) / span,
    ttftP95Seconds: stats.ttftP95Seconds,
    itlPerTokenP95Seconds: percentile(perTokenLatencies(counted), 95),
    reconciled: reconcile(
      { before: mine(before.fleet[c.model], other), after: mine(after.fleet[c.model], other), model: c.model },
      {
        requests: all.length,
        errors: all.length - ok.length,
        generatedTokens: ok.reduce((a, s) => a + s.completionTokens, 0),
        maxTokens: c.maxTokens,
      },
      o.tokenTolerance,
    ),
    load: interactive ? closedLoopLoad(all, c.concurrency, o.loadShortfall) : null,
    servedBy,
  };
}
