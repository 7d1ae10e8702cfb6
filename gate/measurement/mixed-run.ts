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
 * run is the window both classes are measured in. The batch is stopped when the window ends; its
 * figure is the tokens of the requests that finished inside the window over the window (requests
 * cut at its end and those begun before its start balance out in a steady loop), and a request cut
 * by that stop is no error of the server. Each class is reconciled with the workers' own counters
 * by model (the served names label them), and the tokens each worker generated for each name say
 * where each class was served.
 */
import { baseUrl, makeAgent } from "../transport/http";
import { BENCH_PROMPTS } from "./bench";
import { closedLoopLoad, reconcile, type CertificateCheck } from "./certificate";
import { makeSender, runLevelLoad, type HostClock } from "./load";
import { fleetCounters, readCounters, type CounterRead } from "./server-counters";
import { perTokenLatency } from "./goodput";
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
  /** Failed requests (a batch request cut by the window's end is not one). */
  errors: number;
  /** Output tokens per host second within the window. */
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

/** Why the batch's last requests were cut: the window ended, not the server. */
const WINDOW_ENDED = "the mixed run's window ended";
/** The batch loop's request bound: it runs until the window ends, long before this many. */
const BATCH_TURNS = 1_000;

export async function runMixedTraffic(o: MixedTrafficOptions): Promise<MixedTrafficResult> {
  const base = baseUrl(o.url);
  const clock: HostClock = { origin: performance.now(), timeScale: o.timeScale };
  const outer = o.signal ?? new AbortController().signal;
  const batchStop = new AbortController();
  const batchSignal = AbortSignal.any([outer, batchStop.signal]);
  const agents = [makeAgent(o.batch.concurrency + 2), makeAgent(o.interactive.concurrency + 2)];
  const send = (i: 0 | 1, model: string, signal: AbortSignal) =>
    makeSender({
      endpoint: { url: o.url, apiKey: o.apiKey },
      base,
      model,
      agent: agents[i],
      clock,
      signal,
      requestTimeoutSeconds: o.requestTimeoutSeconds,
    });
  const request = (maxTokens: number) => ({
    kind: "prompts" as const,
    prompts: BENCH_PROMPTS,
    maxTokens,
    extraBody: { ignore_eos: true },
  });
  try {
    const before = await countersByWorker(o, outer);
    let steady: () => void = () => undefined;
    const turnedOver = new Promise<void>((resolve) => (steady = resolve));
    const batchRun = runLevelLoad({
      mode: "closed",
      level: o.batch.concurrency,
      count: o.batch.concurrency * BATCH_TURNS,
      repeats: 1,
      seed: 1,
      maxInFlight: o.batch.concurrency,
      requests: request(o.batch.maxTokens),
      send: send(0, o.batch.model, batchSignal),
      clock,
      signal: batchSignal,
      onDone: (t) => {
        if (t.done >= o.batch.concurrency) steady();
      },
    });
    await Promise.race([turnedOver, batchRun]);
    const interactiveRun = await runLevelLoad({
      mode: "closed",
      level: o.interactive.concurrency,
      count: o.interactive.concurrency * o.interactive.requestsPerUser,
      repeats: 1,
      seed: 1,
      maxInFlight: o.interactive.concurrency,
      requests: request(o.interactive.maxTokens),
      send: send(1, o.interactive.model, outer),
      clock,
      signal: outer,
    });
    batchStop.abort(new Error(WINDOW_ENDED));
    const batchSamples = (await batchRun).requests;
    // A cut stream runs on at the server until it notices; its tokens then stop growing.
    await new Promise((resolve) => setTimeout(resolve, 500));
    const after = await countersByWorker(o, outer);
    const window = interactiveRun.runs[0] ?? { startedAtSeconds: 0, finishedAtSeconds: 0 };
    const from = window.startedAtSeconds;
    const to = window.finishedAtSeconds;
    const span = Math.max(1e-9, to - from);
    const inWindow = (s: RequestSample) =>
      s.startedAtSeconds + s.e2eSeconds >= from && s.startedAtSeconds + s.e2eSeconds <= to;
    const cut = (s: RequestSample) => s.error !== null && s.error.includes(WINDOW_ENDED);
    const interactive = interactiveRun.requests;
    return {
      windowSeconds: span,
      interactive: classResult(o, o.interactive, interactive, interactive, span, before, after, true),
      batch: classResult(
        o,
        o.batch,
        batchSamples,
        batchSamples.filter((s) => !cut(s) && inWindow(s)),
        span,
        before,
        after,
        false,
      ),
    };
  } finally {
    batchStop.abort(new Error(WINDOW_ENDED));
    for (const a of agents) void a.destroy().catch(() => undefined);
  }
}

type ByWorker = Record<string, Record<string, CounterRead>>;

/** Each worker's counters for each class's model, and the fleet's sum per model. */
async function countersByWorker(
  o: MixedTrafficOptions,
  signal: AbortSignal,
): Promise<ByWorker & { fleet: Record<string, CounterRead> }> {
  const models = [o.interactive.model, o.batch.model];
  const agent = makeAgent(Math.max(1, o.workers.length));
  try {
    const per: ByWorker = {};
    for (const w of o.workers) {
      per[w] = {};
      for (const m of models) per[w][m] = await readCounters(agent, baseUrl(w), m, o.apiKey, signal);
    }
    const fleet: Record<string, CounterRead> = {};
    for (const m of models) fleet[m] = await fleetCounters(o.workers, m, o.apiKey, signal);
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
  counted: RequestSample[],
  span: number,
  before: Awaited<ReturnType<typeof countersByWorker>>,
  after: Awaited<ReturnType<typeof countersByWorker>>,
  interactive: boolean,
): ClassResult {
  const failed = all.filter((s) => s.error !== null && !s.error.includes(WINDOW_ENDED));
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
    outputTokensPerSecond: counted.reduce((a, s) => a + (s.error === null ? s.completionTokens : 0), 0) / span,
    ttftP95Seconds: stats.ttftP95Seconds,
    itlPerTokenP95Seconds: percentile(Float64Array.from(counted.flatMap((s) => perTokenLatency(s) ?? [])).sort(), 95),
    reconciled: reconcile(
      { before: mine(before.fleet[c.model], other), after: mine(after.fleet[c.model], other), model: c.model },
      {
        requests: all.length,
        // A cut request generated tokens the client never counted: allowed as a failed one's are.
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
