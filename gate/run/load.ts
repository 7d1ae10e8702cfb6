/**
 * The one load generator, used by bench() (and so VerifiedGeneration) and by the service
 * comparison alike: streamed requests, a closed loop (N workers, each sending its next request when
 * its last one ends) or an open loop (Poisson arrivals at a request rate, whatever the server's
 * state), a level run `repeats` times.
 *
 * Time: a simulated host runs X times faster than the wall clock (simulator/README.md). Every
 * sample is converted to the host's own time as it is taken (durations x X) and open-loop arrivals
 * are host seconds (waits / X on the wall clock), so every figure downstream, rates included, is the
 * hardware's. On real hardware X is 1 and host time is the wall clock.
 */
import type { Agent } from "undici";
import { MAX_CONCURRENCY } from "../base/schema";
import {
  baseUrl,
  connectionBound,
  describeError,
  errorKind,
  makeAgent,
  tcpConnect,
  type Endpoint,
} from "../transport/http";
import { sleep, withTimeout } from "../transport/timers";
import { readAcceptanceLength } from "../readiness/acceptance";
import {
  levelName,
  sweepLevelOf,
  type LevelJudgement,
  type LevelSamples,
  type RunWindow,
  type SweepLevel,
} from "../judge/levels";
import {
  clientCheck,
  clientDelays,
  watchClient,
  type Bracket,
  type BracketRun,
  type ClientEvidence,
  type ServerLoadRead,
} from "../judge/certificate";
import { CertificationSchema, type Certification } from "../base/schema";
import { ClientThreads, clientThreadsFor, type ClientThreadSpec, type ClientThreadsSetting } from "./client-threads";
import { readCounters } from "./server-counters";
import { type CounterRead } from "../base/samples";
import { streamChat } from "./stream";
import { type RequestSample } from "../base/samples";
import { poissonArrivals, requestAt, type RequestSource } from "../base/workload";

/** What one request asks for. */
export interface LoadRequest {
  prompt: string;
  maxTokens: number;
  /** Fields added to the chat completion body (ignore_eos, chat_template_kwargs). */
  extraBody: Record<string, unknown>;
}

/** The run's clock: host seconds since its origin. */
export interface HostClock {
  /** performance.now() of the run's start (wall clock). */
  origin: number;
  /** Simulated seconds per wall second of the server measured (1 on real hardware). */
  timeScale: number;
}

export const hostNow = (clock: HostClock): number => ((performance.now() - clock.origin) / 1000) * clock.timeScale;

/** Multiplies every duration of a sample by the time scale: wall clock to host time. */
export function toHostTime(s: RequestSample, timeScale: number): RequestSample {
  if (timeScale === 1) return s;
  return {
    ...s,
    startedAtSeconds: s.startedAtSeconds * timeScale,
    ttftSeconds: s.ttftSeconds === null ? null : s.ttftSeconds * timeScale,
    ttfaSeconds: s.ttfaSeconds === null ? null : s.ttfaSeconds * timeScale,
    itlSeconds: s.itlSeconds.map((v) => v * timeScale),
    e2eSeconds: s.e2eSeconds * timeScale,
    ...(s.serverTiming && {
      serverTiming: {
        firstTokenSeconds: s.serverTiming.firstTokenSeconds * timeScale,
        lastTokenSeconds: s.serverTiming.lastTokenSeconds * timeScale,
        clientLastTokenSeconds: s.serverTiming.clientLastTokenSeconds * timeScale,
      },
    }),
  };
}

export type Send = (request: LoadRequest, onOutputChunk?: () => void) => Promise<RequestSample>;

/**
 * Streams one chat completion per call, bounded by `requestTimeoutSeconds` of host time and by
 * `signal`; the sample comes back in host time. A failure is the sample's error, never a throw.
 */
export function makeSender(opts: {
  endpoint: Endpoint;
  base: string;
  model: string;
  agent: Agent;
  clock: HostClock;
  requestTimeoutSeconds: number;
  signal: AbortSignal;
}): Send {
  const { endpoint, base, model, agent, clock, signal } = opts;
  const timeoutMs = (opts.requestTimeoutSeconds * 1000) / clock.timeScale;
  return (request, onOutputChunk) =>
    withTimeout(
      [signal],
      timeoutMs,
      () => `no complete answer within ${opts.requestTimeoutSeconds} s`,
      (s) =>
        streamChat({
          url: `${base}/v1/chat/completions`,
          body: {
            model,
            messages: [{ role: "user", content: request.prompt }],
            max_tokens: request.maxTokens,
            stream: true,
            stream_options: { include_usage: true },
            ...request.extraBody,
          },
          apiKey: endpoint.apiKey,
          signal: s,
          dispatcher: agent,
          origin: clock.origin,
          onOutputChunk,
        }),
    ).then((sample) => toHostTime(sample, clock.timeScale));
}

/**
 * Notices a server that went away mid-run. A request that failed without an HTTP status (refused,
 * reset, cut mid-stream) may be the process dying: the port is tried once (one check at a time);
 * refused means the server is gone, and the run stops there instead of "measuring" the remaining
 * levels against a closed port in milliseconds.
 */
export class ServerWatch {
  /** Why the run cannot go on (the server went away), or null. */
  gone: string | null = null;
  /** What was running, for the reason ("the warmup", "C=2", "2 req/s offered"). */
  during = "the benchmark";
  private readonly stop = new AbortController();
  private checking: Promise<void> | null = null;
  /** Whether any request succeeded: a server that never answered did not "go away". */
  private answered = false;

  constructor(
    private readonly base: string,
    parent: AbortSignal,
  ) {
    if (parent.aborted) this.stop.abort(parent.reason);
    else parent.addEventListener("abort", () => this.stop.abort(parent.reason), { once: true });
  }

  /** Aborted by the caller's signal, or once the server is gone. */
  get signal(): AbortSignal {
    return this.stop.signal;
  }

  /** Looks at a finished request; a network failure starts a check of the port. */
  note(sample: RequestSample): void {
    if (sample.error === null) this.answered = true;
    if (sample.error === null || this.gone !== null || this.checking !== null) return;
    if (sample.error.startsWith("HTTP ") || sample.error.startsWith("no complete answer within")) return;
    this.checking = this.check(sample.error).finally(() => (this.checking = null));
  }

  /** Waits for a check under way (the caller then reads `gone`). */
  async settle(): Promise<void> {
    await this.checking;
  }

  private async check(requestError: string): Promise<void> {
    try {
      await tcpConnect(this.base, 2_000, this.stop.signal);
    } catch (err) {
      if (errorKind(err) !== "connection refused") return;
      const what = this.answered
        ? `the server went away during ${this.during}`
        : `the server never answered (${this.during})`;
      this.gone = `${what}: a request failed (${requestError}) and ${this.base} now refuses connections (${describeError(err)})`;
      this.stop.abort(new Error(this.gone));
    }
  }
}

/** Running totals of a level, kept as requests end (O(1) per request, whatever the level's size). */
export interface LoadTally {
  done: number;
  errors: number;
  tokens: number;
}

export interface LevelLoad {
  mode: "closed" | "open";
  /** Concurrency (closed loop) or offered request rate per host second (open loop). */
  level: number;
  /** Requests per run. */
  count: number;
  repeats: number;
  /** Open loop: seed of run r's arrivals is seed + r (repeats differ by timing only). */
  seed: number;
  /** Open loop: requests in flight at most (the pool's connections, sweepConnections); a request due beyond it leaves late. */
  maxInFlight: number;
  /** Stops the level once the server is gone (its signal is then aborted). */
  watch?: ServerWatch;
  /** The i-th request of a run: the same i gets the same request in every run and on every service. */
  requests: RequestSource;
  send: Send;
  clock: HostClock;
  signal: AbortSignal;
  /** Closed loop on this thread: once aborted, no slot sends another request; those in flight finish. */
  drain?: AbortSignal;
  /** Client threads the level is spread over (client-threads.ts); absent: this thread sends it all. */
  threads?: { pool: ClientThreads; count: number };
  /** Each request as it ends. */
  onSample?: (s: RequestSample) => void;
  onDone?: (tally: LoadTally) => void;
}

export interface LevelLoadResult {
  /** Every run's samples, run after run. */
  requests: RequestSample[];
  /** Each run's window and its slice of `requests`. */
  runs: RunWindow[];
  /** The largest max_tokens a request of the level asked for. */
  maxTokens: number;
  /** Per run, what each client thread saw of itself; empty when the level ran on this thread alone. */
  threads: ClientEvidence[][];
}

/**
 * Runs a level `repeats` times, on this thread or spread over client threads. A stopped run sends
 * nothing more: requests never sent are not errors of the server, and are not in the result.
 */
export async function runLevelLoad(load: LevelLoad): Promise<LevelLoadResult> {
  const requests: RequestSample[] = [];
  const runs: RunWindow[] = [];
  const threads: ClientEvidence[][] = [];
  const tally: LoadTally = { done: 0, errors: 0, tokens: 0 };
  let maxTokens = 0;
  const record = (s: RequestSample) => {
    load.watch?.note(s);
    load.onSample?.(s);
    requests.push(s);
    tally.done++;
    if (s.error !== null) tally.errors++;
    tally.tokens += s.completionTokens;
    load.onDone?.(tally);
  };
  const request = (i: number): LoadRequest => {
    const r = requestAt(load.requests, i);
    maxTokens = Math.max(maxTokens, r.maxTokens);
    return r;
  };
  for (let rep = 0; rep < load.repeats && !load.signal.aborted; rep++) {
    const firstRequest = requests.length;
    const arrivals = load.mode === "open" ? poissonArrivals(load.level, load.count, load.seed + rep) : [];
    let startedAtSeconds = hostNow(load.clock);
    if (load.threads && load.threads.count > 1) {
      const spread = await load.threads.pool.run(
        { mode: load.mode, level: load.level, count: load.count, arrivals, maxInFlight: load.maxInFlight },
        load.threads.count,
        load.signal,
        record,
      );
      startedAtSeconds = spread.startedAtSeconds;
      maxTokens = Math.max(maxTokens, spread.maxTokens);
      threads.push(spread.client);
    } else if (load.mode === "closed") {
      let next = 0;
      // A drained loop takes no further request number: count is then the end.
      await closedLoop({ ...load, request, next: () => (load.drain?.aborted ? load.count : next++) }, record);
    } else {
      await openLoop({ ...load, request, arrivals, start: performance.now() }, record);
    }
    runs.push({
      startedAtSeconds,
      finishedAtSeconds: hostNow(load.clock),
      firstRequest,
      requestCount: requests.length - firstRequest,
    });
  }
  return { requests, runs, maxTokens, threads };
}

/** What one thread's share of a run needs: its requests, its sender, its clock and its stop. */
interface LoopParts {
  request: (index: number) => LoadRequest;
  send: Send;
  clock: HostClock;
  signal: AbortSignal;
}

/**
 * A closed loop of `level` slots, each sending its next request when its last one ends, while
 * `next()` (the run's request counter; shared by the threads of a spread run) is below `count`.
 */
export async function closedLoop(
  loop: LoopParts & { level: number; count: number; next: () => number },
  record: (s: RequestSample) => void,
): Promise<void> {
  const slot = async () => {
    while (!loop.signal.aborted) {
      const i = loop.next();
      if (i >= loop.count) return;
      record(await loop.send(loop.request(i)));
    }
  };
  await Promise.all(Array.from({ length: Math.min(loop.level, loop.count) }, slot));
}

/** Longest the open loop sends without yielding to the event loop (the deadline, Ctrl-C, answers). */
const YIELD_EVERY_MS = 5;

/**
 * Each request leaves at its arrival time (host seconds from `start`, this thread's
 * performance.now() of the run's origin; / X on the wall clock). The schedule is walked in order
 * with one timer at a time, never armed ahead: a timer and an abort listener per request (100,000
 * at 10,000 req/s) starved the event loop, and the deadline and Ctrl-C fired minutes late. Behind schedule it sends what is due in bursts, yielding every
 * few milliseconds (not once per request: a turn of a busy loop per request capped the rate at a
 * few hundred), so that timers, signals and answers still run. At most `maxInFlight` requests are in flight, as many as the pool has
 * connections: a request due while all are busy waits here, not in the HTTP client's queue (where
 * its wait read as the server's time to first token); either way it leaves late, and its sample
 * carries when it was due (levels.ts judges the client's lag apart from the server's).
 * `indices`: the requests' numbers in the run (a client thread sends every n-th); absent: 0, 1, ...
 */
export async function openLoop(
  loop: LoopParts & { arrivals: readonly number[]; indices?: readonly number[]; start: number; maxInFlight: number },
  record: (s: RequestSample) => void,
): Promise<void> {
  const { clock, signal, arrivals, start } = loop;
  const runOrigin = ((start - clock.origin) / 1000) * clock.timeScale;
  const pending = new Set<Promise<void>>();
  let freed: (() => void) | null = null;
  let turn = performance.now();
  for (let i = 0; i < arrivals.length && !signal.aborted; i++) {
    const wait = (arrivals[i] * 1000) / clock.timeScale - (performance.now() - start);
    try {
      if (wait > 0 || performance.now() - turn > YIELD_EVERY_MS) {
        if (wait > 0) await sleep(wait, signal);
        else await new Promise((resolve) => setImmediate(resolve));
        turn = performance.now();
      }
    } catch {
      break; // stopped before this request was due: never sent
    }
    // Every request in flight is bounded by the signal too, so a slot frees soon after an abort.
    while (pending.size >= loop.maxInFlight) await new Promise<void>((resolve) => (freed = resolve));
    if (signal.aborted) break;
    const scheduledAtSeconds = runOrigin + arrivals[i];
    const sent: Promise<void> = loop
      .send(loop.request(loop.indices?.[i] ?? i))
      .then((s) => record({ ...s, scheduledAtSeconds }))
      .finally(() => {
        pending.delete(sent);
        freed?.();
        freed = null;
      });
    pending.add(sent);
  }
  await Promise.all(pending);
}

export interface SweepLoad {
  mode: "closed" | "open";
  /** Concurrencies (closed loop) or request rates per host second (open loop). */
  levels: readonly number[];
  /** Closed loop: requests per run = concurrency x this. Open loop: rate x this x 10 (ten seconds of arrivals). */
  requestsPerLevel: number;
  repeats: number;
  seed: number;
  /** The i-th request of a run, as data (a client thread rebuilds it). */
  requests: RequestSource;
  send: Send;
  clock: HostClock;
  signal: AbortSignal;
  /** Each request of the sweep as it ends, from this thread or a client thread. */
  onSample?: (s: RequestSample) => void;
  /**
   * Client threads (client-threads.ts): how many, and what a thread needs to send as `send` does;
   * absent: this thread sends everything.
   */
  spread?: {
    threads: ClientThreadsSetting;
    endpoint: Endpoint;
    requestTimeoutSeconds: number;
    /** One request alone, output tokens per host second (the single requests): "auto"'s first guess. */
    singleStreamTokensPerSecond: number | null;
    /** The certificate's bounds, by which "auto" tells that one thread was the limit; absent: the defaults. */
    certification?: Certification;
  };
  /** Read after each level (speculative acceptance); null when the server reports none. */
  readAcceptance: () => Promise<number | null>;
  /** The server's counters (its /metrics), read before and after each level for its certificate. */
  readCounters: () => Promise<CounterRead>;
  /** A warmup request succeeded before the sweep (the certificate's steady check). */
  warm: boolean;
  /** The model the requests ask for: the counters' model_name. */
  model: string;
  /** Speculative services: the acceptance floor each level's acceptance is held against; absent: none. */
  acceptanceFloor?: number | null;
  /** The server's watch: the sweep stops once the server is gone (the level it died in is kept). */
  watch: ServerWatch;
  /** Open loop: requests in flight at most (sweepConnections). */
  maxInFlight: number;
  onStart?: (level: number, requestsPerRun: number) => void;
  onRequest?: (level: number, tally: LoadTally, requestsPerRun: number) => void;
  onLevel?: (level: LevelSamples) => void;
  /** The first level measured again after the last (runSweep's bracket), its samples for the report. */
  onBracket?: (again: LevelSamples) => void;
}

/**
 * The connection pool of a sweep, and so an open loop's requests in flight at most: a closed loop's
 * largest concurrency (and a few for the reads between levels); an open loop holds as many streams
 * as the server keeps open at the rate offered, so as many as one process serves (MAX_CONCURRENCY).
 * Both at most what the file descriptors allow (connectionBound). Connections are opened as needed.
 */
export function sweepConnections(mode: "closed" | "open", levels: readonly number[]): number {
  return connectionBound(mode === "closed" ? Math.max(...levels, 1) + 4 : MAX_CONCURRENCY);
}

/** Requests in one run of a level. */
export function requestsPerRun(mode: "closed" | "open", level: number, requestsPerLevel: number): number {
  return mode === "closed" ? level * requestsPerLevel : Math.max(1, Math.round(level * requestsPerLevel * 10));
}

/**
 * The sweep, level after level. A level the deadline or an interrupt cut short measured the cut,
 * not the server: it is dropped, and no level after it runs. Client threads started for a level
 * stay for the next, and end with the sweep. A sweep of several levels brackets itself: its first
 * level runs once more after the last (once, whatever the repeats), and every level's evidence
 * carries both figures, so the one certify() tells a server that changed mid-run from a knee.
 */
export async function runSweep(load: SweepLoad): Promise<LevelSamples[]> {
  const out: LevelSamples[] = [];
  // The pool, and the most tokens a request asks for ("auto"'s open-loop bound): once per sweep.
  const spread: Spread | null = load.spread
    ? { pool: new ClientThreads(threadSpec(load, load.spread)), maxTokens: projectedMaxTokens(load.requests) }
    : null;
  try {
    for (const level of load.levels) {
      if (load.signal.aborted || load.watch.gone !== null) break;
      const samples = await sweepLevel(load, level, spread, out[out.length - 1] ?? null);
      if (samples === null) break;
      out.push(samples);
      load.onLevel?.(samples);
    }
    // A concurrency sweep, where the knee lives: a rate the server keeps up with measures the load offered
    // (its throughput moves with no server), and one it falls behind at is judged by its own shortfall.
    const whole = out.length > 1 && out.length === load.levels.length;
    if (load.mode === "closed" && whole && load.watch.gone === null && !load.signal.aborted) {
      const again = await sweepLevel({ ...load, repeats: 1 }, load.levels[0], spread, out[0]);
      if (again !== null) load.onBracket?.(again);
      const bracket = again === null ? null : bracketOf(out[0], again);
      for (const l of out) if (bracket !== null && l.evidence) l.evidence.bracket = bracket;
    }
  } finally {
    await spread?.pool.close();
  }
  return out;
}

/**
 * The sweep's first level against its measurement again at the end (certificate.ts Bracket), by
 * throughput over its window (with repeats, the first run's: the bracket runs once).
 */
export function bracketOf(first: LevelSamples, again: LevelSamples): Bracket {
  const figure = (l: LevelSamples): BracketRun => {
    const w = l.runs?.[0] ?? {
      startedAtSeconds: l.startedAtSeconds,
      finishedAtSeconds: l.finishedAtSeconds,
      firstRequest: 0,
      requestCount: l.requests.length,
    };
    const samples = l.requests.slice(w.firstRequest, w.firstRequest + w.requestCount);
    const seconds = Math.max(0, w.finishedAtSeconds - w.startedAtSeconds);
    const tokens = samples.reduce((a, s) => a + (s.error === null ? s.completionTokens : 0), 0);
    return { tokensPerSecond: seconds > 0 ? tokens / seconds : 0, seconds };
  };
  return { name: levelName({ mode: first.mode, level: levelOf(first) }), first: figure(first), again: figure(again) };
}

/** A sweep's client threads and what "auto" needs of its requests. */
interface Spread {
  pool: ClientThreads;
  maxTokens: number;
}

function threadSpec(load: SweepLoad, spread: NonNullable<SweepLoad["spread"]>): ClientThreadSpec {
  return {
    base: baseUrl(spread.endpoint.url),
    apiKey: spread.endpoint.apiKey,
    model: load.model,
    requestTimeoutSeconds: spread.requestTimeoutSeconds,
    requests: load.requests,
    timeScale: load.clock.timeScale,
    originEpochMs: performance.timeOrigin + load.clock.origin,
    connections: load.maxInFlight,
  };
}

/** Output tokens per host second of a measured level (its window). */
function levelTokensPerSecond(l: LevelSamples): number {
  const span = l.finishedAtSeconds - l.startedAtSeconds;
  const tokens = l.requests.reduce((a, s) => a + (s.error === null ? s.completionTokens : 0), 0);
  return span > 0 ? tokens / span : 0;
}

/** The client threads a level runs on (1: this thread), started before its window. */
async function levelThreads(
  load: SweepLoad,
  level: number,
  spread: Spread | null,
  previous: LevelSamples | null,
): Promise<number> {
  if (spread === null || load.spread === undefined) return 1;
  const { pool } = spread;
  const n = clientThreadsFor(load.spread.threads, {
    mode: load.mode,
    level,
    timeScale: load.clock.timeScale,
    maxTokens: spread.maxTokens,
    previous: previous === null ? null : { level: levelOf(previous), tokensPerSecond: levelTokensPerSecond(previous) },
    singleStreamTokensPerSecond: load.spread.singleStreamTokensPerSecond,
    oneThreadWasLimit: previous !== null && oneThreadWasLimit(previous, load.spread.certification),
  });
  if (n <= 1) return 1;
  try {
    await pool.ensure(n, load.watch.signal);
    return n;
  } catch {
    // A thread that could not start (or a stop meanwhile): the level runs on those that did, and
    // its client check says whether they were enough.
    return Math.max(1, Math.min(n, pool.size));
  }
}

/**
 * The level ran spread, or on this thread alone with the client as its limit by its own evidence
 * (its event loop, its CPU, its lag behind a server that states its timing): "auto"'s reason to spread.
 */
function oneThreadWasLimit(l: LevelSamples, policy = CertificationSchema.parse({})): boolean {
  const e = l.evidence;
  if (e === undefined) return false;
  if (e.clientThreads !== undefined) return true;
  const delays = clientDelays([{ samples: l.requests }], l.mode ?? "closed", levelOf(l));
  return !clientCheck(e.client, policy, [], { delays, timeScale: e.timeScale }).ok;
}

/** The most tokens a request of SOURCE asks for, from its first requests (a shape draws lengths). */
function projectedMaxTokens(source: RequestSource): number {
  let most = 0;
  for (let i = 0; i < 64; i++) most = Math.max(most, requestAt(source, i).maxTokens);
  return most;
}

const levelOf = (l: LevelSamples): number => l.concurrency ?? l.requestRate ?? 0;

/** One level with its evidence, or null when the run was stopped during it (the cut measured nothing). */
async function sweepLevel(
  load: SweepLoad,
  level: number,
  spread: Spread | null,
  previous: LevelSamples | null,
): Promise<LevelSamples | null> {
  const watch = load.watch;
  const count = requestsPerRun(load.mode, level, load.requestsPerLevel);
  watch.during = levelName({ mode: load.mode, level });
  const threads = await levelThreads(load, level, spread, previous);
  const before = await quietCounters(load.readCounters, load.signal);
  load.onStart?.(level, count);
  const startedAtSeconds = hostNow(load.clock);
  const client = watchClient();
  const server = load.mode === "closed" ? watchServerLoad(load.readCounters, load.clock, watch.signal) : null;
  const result = await runLevelLoad({
    ...load,
    signal: watch.signal,
    level,
    count,
    ...(spread && threads > 1 ? { threads: { pool: spread.pool, count: threads } } : {}),
    onDone: (tally) => load.onRequest?.(level, tally, count * load.repeats),
  });
  const clientSeen = client.stop();
  const serverLoad = server?.stop();
  const finishedAtSeconds = hostNow(load.clock);
  await watch.settle();
  if (load.signal.aborted) return null;
  const after: CounterRead =
    watch.gone === null
      ? await settledCounters(load.readCounters, before, result.requests, load.signal)
      : { ok: false, reason: "the server went away during the level" };
  // The level the server died in stays: its failures are what the report must show.
  return {
    mode: load.mode,
    ...(load.mode === "closed" ? { concurrency: level } : { requestRate: level }),
    startedAtSeconds,
    finishedAtSeconds,
    acceptanceLength: watch.gone === null ? await load.readAcceptance() : null,
    requests: result.requests,
    runs: result.runs,
    evidence: {
      before,
      after,
      client: clientSeen,
      ...(result.threads.length > 0 ? { clientThreads: result.threads } : {}),
      warm: load.warm,
      model: load.model,
      maxTokens: result.maxTokens,
      timeScale: load.clock.timeScale,
      acceptanceFloor: load.acceptanceFloor ?? null,
      ...(serverLoad ? { serverLoad } : {}),
    },
  };
}

/** Reads of the server's gauges during a closed-loop level: this far apart (wall clock), at most so many. */
const SERVER_LOAD_INTERVAL_MS = 100;
const SERVER_LOAD_READS = 200;
/**
 * A read whose round trip took longer than this (wall clock) is not kept: the gauges were sampled
 * somewhere in it, and an instant known only to within more than this is no instant to hold the
 * client's in-flight count against (a loaded machine, a slow /metrics).
 */
const SERVER_LOAD_MAX_ROUND_TRIP_MS = 50;

/**
 * Reads the requests the server holds (its gauges, through the counters' read) every
 * SERVER_LOAD_INTERVAL_MS while a level runs, one read at a time; stop() returns the reads so far. A
 * server whose /metrics keeps no such gauge is read once. Each read is bounded by the counters'
 * own timeout, and one still out at stop() is left to end by it, its answer unused.
 */
function watchServerLoad(
  read: () => Promise<CounterRead>,
  clock: HostClock,
  signal: AbortSignal,
): { stop: () => ServerLoadRead[] } {
  const reads: ServerLoadRead[] = [];
  const stopped = new AbortController();
  const until = AbortSignal.any([signal, stopped.signal]);
  void (async () => {
    while (reads.length < SERVER_LOAD_READS) {
      await sleep(SERVER_LOAD_INTERVAL_MS, until);
      const sent = performance.now();
      const r = await read();
      if (until.aborted || !r.ok) return;
      if (r.snapshot.heldRequests === null) return;
      const back = performance.now();
      if (back - sent > SERVER_LOAD_MAX_ROUND_TRIP_MS) continue;
      // The gauges were read somewhere in the round trip: its middle is the best guess of when.
      const at = ((sent + back) / 2 - clock.origin) / 1000;
      reads.push({ atSeconds: at * clock.timeScale, held: r.snapshot.heldRequests });
    }
  })().catch(() => undefined);
  return {
    stop: () => {
      stopped.abort();
      return [...reads];
    },
  };
}

/** Reads of the counters after a level, a few apart: some servers count a request a moment after its last byte. */
const COUNTER_SETTLE_READS = 4;
const COUNTER_SETTLE_MS = 250;
const COUNTER_QUIET_MS = 100;

/** Reads before a level while the server still holds a request (COUNTER_QUIET_MS apart): 2 s at most. */
const COUNTER_IDLE_READS = 20;

/**
 * The counters before a level, once they are quiet: read again (COUNTER_QUIET_MS apart) until two
 * reads agree and, where the server keeps the gauges, it holds no request; COUNTER_SETTLE_READS
 * reads at most while they move, COUNTER_IDLE_READS while it still holds one. A server that counts a
 * request when it ends (llama.cpp on the slot's release) adds a probe's tokens after its answer, and
 * a stream the client closed early (the gate reads until it has its answer) runs on until the server
 * notices: its tokens counted as the level's made a real llama-server read "generated 194, claimed
 * 192" on a loaded machine. A server other clients keep busy never gets quiet: its level then
 * fails reconciliation, naming it.
 */
async function quietCounters(read: () => Promise<CounterRead>, signal: AbortSignal): Promise<CounterRead> {
  let last = await read();
  let moved = 0;
  for (let i = 1; i < COUNTER_IDLE_READS && last.ok; i++) {
    try {
      await sleep(COUNTER_QUIET_MS, signal);
    } catch {
      break;
    }
    const next = await read();
    if (!next.ok) return next;
    const agrees = next.snapshot.generatedTokens === last.snapshot.generatedTokens;
    const idle = (next.snapshot.heldRequests ?? 0) === 0;
    last = next;
    if (agrees && idle) return next;
    if (!agrees && ++moved >= COUNTER_SETTLE_READS - 1) return next;
  }
  return last;
}

/**
 * The counters after a level: read again (COUNTER_SETTLE_READS at most, COUNTER_SETTLE_MS apart)
 * while they are short of what the client counted, so a server that updates them a moment late is
 * not called a liar. Counters ahead of the client are read once: waiting would not lower them.
 */
async function settledCounters(
  read: () => Promise<CounterRead>,
  before: CounterRead,
  samples: RequestSample[],
  signal: AbortSignal,
): Promise<CounterRead> {
  const claimed = samples.reduce((a, s) => a + (s.error === null ? s.completionTokens : 0), 0);
  let after = await read();
  for (let i = 1; i < COUNTER_SETTLE_READS; i++) {
    if (!before.ok || !after.ok) break;
    if (after.snapshot.generatedTokens - before.snapshot.generatedTokens >= claimed) break;
    try {
      await sleep(COUNTER_SETTLE_MS, signal);
    } catch {
      break;
    }
    after = await read();
  }
  return after;
}

export interface MeasureOptions {
  mode: "closed" | "open";
  /** Concurrencies (closed loop) or request rates per host second (open loop): levelsOf(plan). */
  levels: readonly number[];
  /** The i-th request of a run, the same on every service: requestsOf(plan), or a workload shape. */
  requests: RequestSource;
  /** Open loop: run r's arrivals are drawn from seed + r (absent: 1). */
  seed?: number;
  requestsPerLevel: number;
  repeats: number;
  requestTimeoutSeconds: number;
  /** Simulated seconds per wall second of the server measured (1 on real hardware). */
  timeScale: number;
  judgement: LevelJudgement;
  /** Speculative services: the acceptance floor each level is certified against. */
  acceptanceFloor?: number | null;
  /** Client threads (client-threads.ts); absent: "auto". */
  clientThreads?: ClientThreadsSetting;
  signal?: AbortSignal;
  onLevel?: (level: SweepLevel) => void;
  /**
   * A run that measured before its sweep (bench()): its session (pool, host clock, server watch),
   * kept open here; absent: one opened for the sweep and closed with it.
   */
  session?: Session;
  /** The server's counters where they are not at the endpoint's /metrics (a fleet); absent: the endpoint's. */
  readCounters?: () => Promise<CounterRead>;
  /** A warmup request succeeded before the sweep (absent: true; the comparison's gate checks generation first). */
  warm?: boolean;
  /** One request alone, output tokens per host second: "auto"'s first guess; absent: the first level measured. */
  singleStreamTokensPerSecond?: number | null;
  onSample?: SweepLoad["onSample"];
  onStart?: SweepLoad["onStart"];
  onRequest?: SweepLoad["onRequest"];
}

/** A sweep measured: its levels summarised, and raw for a caller that keeps samples (bench()). */
export interface MeasuredSweep {
  /** Levels with their runs' samples. */
  sweep: SweepLevel[];
  /** The levels as measured, and the first measured again after the last (null: not bracketed). */
  samples: LevelSamples[];
  bracket: LevelSamples | null;
  /** The server went away mid-run (the sweep stopped there), or null. */
  serverGone: string | null;
}

/** What one measured run connects with, set up once for bench() and measureSweep alike. */
export interface Session {
  base: string;
  /** The pool's size: the sweep's most requests in flight (sweepConnections). */
  connections: number;
  agent: Agent;
  /** Host time: starts now, at the server's time scale. */
  clock: HostClock;
  /** Whether the server went away; aborted with SIGNAL too. */
  watch: ServerWatch;
}

/** A run's connection set-up; the caller destroys `agent` when the run ends. */
export function openSession(
  endpoint: Endpoint,
  mode: "closed" | "open",
  levels: readonly number[],
  timeScale: number,
  signal: AbortSignal,
): Session {
  const base = baseUrl(endpoint.url);
  const connections = sweepConnections(mode, levels);
  return {
    base,
    connections,
    agent: makeAgent(connections),
    clock: { origin: performance.now(), timeScale },
    watch: new ServerWatch(base, signal),
  };
}

/** A sender on SESSION's pool and host clock for MODEL, each request bounded by requestTimeoutSeconds (host time). */
export function sessionSender(
  session: Session,
  endpoint: Endpoint,
  model: string,
  signal: AbortSignal,
  requestTimeoutSeconds: number,
): Send {
  const { base, agent, clock } = session;
  return makeSender({ endpoint, base, model, agent, clock, signal, requestTimeoutSeconds });
}

/**
 * The one builder of a sweep, for bench() and the comparison alike: the load runSweep runs, from
 * the options and the session, each level summarised once with the judgement as it ends.
 */
export async function measureSweep(endpoint: Endpoint, model: string, opts: MeasureOptions): Promise<MeasuredSweep> {
  const signal = opts.signal ?? new AbortController().signal;
  const session = opts.session ?? openSession(endpoint, opts.mode, opts.levels, opts.timeScale, signal);
  const sweep: SweepLevel[] = [];
  let bracket: LevelSamples | null = null;
  try {
    const samples = await runSweep({
      ...sweepLoad(endpoint, model, session, signal, opts),
      onLevel: (l) => {
        const summary = sweepLevelOf(l, opts.judgement);
        sweep.push(summary);
        opts.onLevel?.(summary);
      },
      onBracket: (again) => (bracket = again),
    });
    return { sweep, samples, bracket, serverGone: session.watch.gone };
  } finally {
    if (opts.session === undefined) void session.agent.destroy().catch(() => undefined);
  }
}

/** The sweep's load on SESSION: its levels and requests, its sender and reads, its client threads. */
function sweepLoad(
  endpoint: Endpoint,
  model: string,
  session: Session,
  signal: AbortSignal,
  opts: MeasureOptions,
): Omit<SweepLoad, "onLevel" | "onBracket"> {
  const { base, agent } = session;
  return {
    mode: opts.mode,
    levels: opts.levels,
    requestsPerLevel: opts.requestsPerLevel,
    repeats: opts.repeats,
    seed: opts.seed ?? 1,
    requests: opts.requests,
    send: sessionSender(session, endpoint, model, signal, opts.requestTimeoutSeconds),
    clock: session.clock,
    signal,
    readAcceptance: () =>
      withTimeout(
        [signal],
        10_000,
        () => "no answer within 10 s",
        (s) => readAcceptanceLength(agent, base, endpoint.apiKey, s),
      ).catch(() => null),
    readCounters: opts.readCounters ?? (() => readCounters(agent, base, model, endpoint.apiKey, signal)),
    warm: opts.warm ?? true,
    model,
    acceptanceFloor: opts.acceptanceFloor ?? null,
    watch: session.watch,
    maxInFlight: session.connections,
    spread: {
      threads: opts.clientThreads ?? "auto",
      endpoint,
      requestTimeoutSeconds: opts.requestTimeoutSeconds,
      singleStreamTokensPerSecond: opts.singleStreamTokensPerSecond ?? null,
      // auto spreads only after one thread was measured to be the limit, by the stack's certification
      certification: opts.judgement.certification,
    },
    onSample: opts.onSample,
    onStart: opts.onStart,
    onRequest: opts.onRequest,
  };
}
