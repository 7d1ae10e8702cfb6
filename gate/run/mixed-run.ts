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
 * window read 37 % low where the window held one wave of completions instead of two.
 *
 * Each class comes back as one level of the one summary (levels.ts summarizeSweepLevel) with its
 * certificate from the one certify(): its tokens reconciled with its own group's workers' counters
 * by its served name (a worker of the other group lost during the run leaves this class's evidence
 * whole), its slots applied, the client watched over the run, the counters steady. What the run
 * cannot gather is named in the certificate, not passed in silence. The tokens each worker
 * generated for each name say where each class was served. Judging is the caller's, with the one
 * verdict (verdict.ts mixedVerdictOf).
 */
import type { Agent } from "undici";
import { baseUrl, makeAgent } from "../transport/http";
import { watchClient, type ClientEvidence, type LevelEvidence } from "../judge/certificate";
import { perTokenLatencies } from "../judge/goodput";
import {
  runSummary,
  summarizeSweepLevel,
  withoutSamples,
  type LevelJudgement,
  type LevelSummary,
  type RunWindow,
} from "../judge/levels";
import { makeSender, runLevelLoad, type HostClock } from "./load";
import { readCounters, summedCounters } from "./server-counters";
import { type CounterRead } from "../base/samples";
import { latencyStats, percentile } from "../judge/stats";
import type { RequestSample } from "../base/samples";
import { requestsOf } from "../base/workload";

export interface TrafficClass {
  /** The served model name the class asks for: the router sends it to the hosts serving that name. */
  model: string;
  /** Requests in flight at once (interactive: users, each with one request; batch: slots). */
  concurrency: number;
  maxTokens: number;
  /** Its group's hosts run a speculative service: their acceptance is not read in this run, and the certificate says so. */
  speculative?: boolean;
}

export interface MixedTrafficOptions {
  /** The router. */
  url: string;
  apiKey?: string;
  interactive: TrafficClass & { requestsPerUser: number };
  batch: TrafficClass;
  /**
   * Each group's workers behind the router: a class is reconciled with its own group's counters by
   * its name; every worker's counters say where each class was served.
   */
  workers: { interactive: string[]; batch: string[] };
  /** Host seconds per wall second of the hosts measured (1 on real hardware). */
  timeScale: number;
  requestTimeoutSeconds: number;
  /** The stack's error budget, SLO and certification (benchmark.*), as one host's levels are summarised. */
  judgement: LevelJudgement;
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
  /**
   * The class as one level of the one summary: its error rate against the budget, its examples and
   * its certificate (certify()); its outputTokensPerSecond is the window's figure above.
   */
  level: LevelSummary;
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

/** Both classes' closed loops on one client: the router, the host clock and the run's signal. */
function classLoops(o: MixedTrafficOptions, clock: HostClock, signal: AbortSignal, agents: Agent[]) {
  const send = (i: 0 | 1, model: string) =>
    makeSender({
      endpoint: { url: o.url, apiKey: o.apiKey },
      base: baseUrl(o.url),
      model,
      agent: agents[i],
      clock,
      signal,
      requestTimeoutSeconds: o.requestTimeoutSeconds,
    });
  const loop = (c: TrafficClass, count: number, i: 0 | 1) => ({
    mode: "closed" as const,
    level: c.concurrency,
    count,
    repeats: 1,
    seed: 1,
    maxInFlight: c.concurrency,
    // A class's requests as a plan's sweep without a mix: the long-answer prompts, exactly max_tokens.
    requests: requestsOf({ sweepMaxTokens: c.maxTokens, thinking: null, ignoreEos: true }),
    clock,
    signal,
    send: send(i, c.model),
  });
  return {
    batch: loop(o.batch, o.batch.concurrency * BATCH_TURNS, 0),
    interactive: loop(o.interactive, o.interactive.concurrency * o.interactive.requestsPerUser, 1),
  };
}

export async function runMixedTraffic(o: MixedTrafficOptions): Promise<MixedTrafficResult> {
  const clock: HostClock = { origin: performance.now(), timeScale: o.timeScale };
  const signal = o.signal ?? new AbortController().signal;
  const batchDrain = new AbortController();
  const agents = [makeAgent(o.batch.concurrency + 2), makeAgent(o.interactive.concurrency + 2)];
  const loops = classLoops(o, clock, signal, agents);
  try {
    const before = await countersByWorker(o, signal);
    const client = watchClient();
    let steady: () => void = () => undefined;
    const turnedOver = new Promise<void>((resolve) => (steady = resolve));
    const batchRun = runLevelLoad({
      ...loops.batch,
      drain: batchDrain.signal,
      onDone: (t) => {
        if (t.done >= o.batch.concurrency) steady();
      },
    });
    await Promise.race([turnedOver, batchRun]);
    const interactiveRun = await runLevelLoad(loops.interactive);
    // The window has ended: the batch sends no more, and what it has in flight finishes.
    batchDrain.abort();
    const batch = await batchRun;
    const seen = client.stop();
    const after = await countersByWorker(o, signal);
    const window = interactiveRun.runs[0] ?? { startedAtSeconds: 0, finishedAtSeconds: 0 };
    const evidence = { before, after, client: seen, window };
    return {
      windowSeconds: Math.max(1e-9, window.finishedAtSeconds - window.startedAtSeconds),
      interactive: classResult(
        o,
        "interactive",
        { samples: interactiveRun.requests, runs: interactiveRun.runs },
        evidence,
      ),
      batch: classResult(o, "batch", { samples: batch.requests, runs: batch.runs }, evidence),
    };
  } finally {
    batchDrain.abort();
    for (const a of agents) void a.destroy().catch(() => undefined);
  }
}

type ByWorker = Record<string, Record<string, CounterRead>>;

/** Each worker's counters for each class's model. */
async function countersByWorker(o: MixedTrafficOptions, signal: AbortSignal): Promise<ByWorker> {
  const models = [o.interactive.model, o.batch.model];
  const workers = [...o.workers.interactive, ...o.workers.batch];
  const agent = makeAgent(Math.max(1, workers.length));
  try {
    const per: ByWorker = {};
    for (const w of workers) {
      per[w] = {};
      for (const m of models) per[w][m] = await readCounters(agent, baseUrl(w), m, o.apiKey, signal);
    }
    return per;
  } finally {
    void agent.destroy().catch(() => undefined);
  }
}

/** A class's group's counters summed by its model, without the other class's model: its tokens are this run's own. */
function groupCounters(o: MixedTrafficOptions, g: "interactive" | "batch", reads: ByWorker): CounterRead {
  const model = o[g].model;
  const other = g === "interactive" ? o.batch.model : o.interactive.model;
  const workers = o.workers[g];
  const read = summedCounters(
    workers,
    workers.map((w) => reads[w][model]),
  );
  if (!read.ok) return read;
  const { [other]: _, ...rest } = read.snapshot.generatedByModel;
  return { ok: true, snapshot: { ...read.snapshot, generatedByModel: rest } };
}

/**
 * Where the run gathers less than a sweep of one host: no worker's gauge counts the requests in
 * the router's own hands, so the fleet's load is the client's side alone (summedCounters).
 */
const NOT_GATHERED: LevelEvidence["notGathered"] = {
  load: "the server's side of the load (the workers' gauges miss the requests the router holds)",
};
/** A speculative group's acceptance is read per host by its own gate and sweep, not per class here. */
const NOT_GATHERED_SPECULATIVE: LevelEvidence["notGathered"] = {
  ...NOT_GATHERED,
  steady: "the speculative acceptance during this run (each host's own gate and sweep hold it to its floor)",
};

function classResult(
  o: MixedTrafficOptions,
  g: "interactive" | "batch",
  run: { samples: RequestSample[]; runs: RunWindow[] },
  e: {
    before: ByWorker;
    after: ByWorker;
    client: ClientEvidence;
    window: { startedAtSeconds: number; finishedAtSeconds: number };
  },
): ClassResult {
  const c = o[g];
  const { startedAtSeconds: from, finishedAtSeconds: to } = e.window;
  const span = Math.max(1e-9, to - from);
  const windowed = run.samples.map((s) => windowTokens(s, from, to));
  // The batch's latencies are taken over its requests with tokens inside the window.
  const counted = g === "interactive" ? run.samples : run.samples.filter((_, i) => windowed[i] > 0);
  const own = run.runs[0] ?? { startedAtSeconds: from, finishedAtSeconds: to };
  const { slo } = o.judgement;
  const level = summarizeSweepLevel(
    "closed",
    c.concurrency,
    [runSummary(run.samples, Math.max(0, own.finishedAtSeconds - own.startedAtSeconds), slo)],
    slo,
    null,
    o.judgement,
    {
      before: groupCounters(o, g, e.before),
      after: groupCounters(o, g, e.after),
      client: e.client,
      // Each class's name answered through the router (the fleet's readiness) before the run.
      warm: true,
      model: c.model,
      maxTokens: c.maxTokens,
      timeScale: o.timeScale,
      acceptanceFloor: null,
      notGathered: c.speculative === true ? NOT_GATHERED_SPECULATIVE : NOT_GATHERED,
    },
  );
  const outputTokensPerSecond = windowed.reduce((a, t) => a + t, 0) / span;
  const stats = latencyStats(counted);
  return {
    model: c.model,
    concurrency: c.concurrency,
    requests: counted.length,
    errors: level.errors,
    outputTokensPerSecond,
    ttftP95Seconds: stats.ttftP95Seconds,
    itlPerTokenP95Seconds: percentile(perTokenLatencies(counted), 95),
    level: { ...withoutSamples(level), outputTokensPerSecond },
    servedBy: servedBy(o, c.model, e.before, e.after),
  };
}

/** Tokens each worker generated for MODEL between the reads; NaN where its counters could not be read. */
function servedBy(o: MixedTrafficOptions, model: string, before: ByWorker, after: ByWorker): Record<string, number> {
  const out: Record<string, number> = {};
  for (const w of [...o.workers.interactive, ...o.workers.batch]) {
    const b = before[w]?.[model];
    const a = after[w]?.[model];
    out[w] = b?.ok && a?.ok ? a.snapshot.generatedTokens - b.snapshot.generatedTokens : NaN;
  }
  return out;
}
