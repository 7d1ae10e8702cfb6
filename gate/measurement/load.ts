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
import { baseUrl, makeAgent, type Endpoint } from "../transport/http";
import { sleep, withTimeout } from "../transport/timers";
import { readAcceptanceLength } from "../readiness/acceptance";
import {
  levelRuns,
  summarizeSweepLevel,
  type LevelJudgement,
  type LevelSamples,
  type RunWindow,
  type SweepLevel,
} from "./levels";
import { streamChat, type RequestSample } from "./stream";
import { poissonArrivals, shapedRequest, type WorkloadShape } from "./workload";

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
  /** The i-th request of a run: the same i gets the same request in every run and on every service. */
  request: (index: number) => LoadRequest;
  send: Send;
  clock: HostClock;
  signal: AbortSignal;
  onDone?: (tally: LoadTally) => void;
}

export interface LevelLoadResult {
  /** Every run's samples, run after run. */
  requests: RequestSample[];
  /** Each run's window and its slice of `requests`. */
  runs: RunWindow[];
}

/**
 * Runs a level `repeats` times. A stopped run sends nothing more: requests never sent are not
 * errors of the server, and are not in the result.
 */
export async function runLevelLoad(load: LevelLoad): Promise<LevelLoadResult> {
  const requests: RequestSample[] = [];
  const runs: RunWindow[] = [];
  const tally: LoadTally = { done: 0, errors: 0, tokens: 0 };
  const record = (s: RequestSample) => {
    requests.push(s);
    tally.done++;
    if (s.error !== null) tally.errors++;
    tally.tokens += s.completionTokens;
    load.onDone?.(tally);
  };
  for (let rep = 0; rep < load.repeats && !load.signal.aborted; rep++) {
    const firstRequest = requests.length;
    const startedAtSeconds = hostNow(load.clock);
    if (load.mode === "closed") await closedLoop(load, record);
    else await openLoop(load, poissonArrivals(load.level, load.count, load.seed + rep), record);
    runs.push({
      startedAtSeconds,
      finishedAtSeconds: hostNow(load.clock),
      firstRequest,
      requestCount: requests.length - firstRequest,
    });
  }
  return { requests, runs };
}

async function closedLoop(load: LevelLoad, record: (s: RequestSample) => void): Promise<void> {
  let next = 0;
  const worker = async () => {
    while (next < load.count && !load.signal.aborted) record(await load.send(load.request(next++)));
  };
  await Promise.all(Array.from({ length: Math.min(load.level, load.count) }, worker));
}

/** Each request leaves at its arrival time (host seconds from the run's start; / X on the wall clock). */
async function openLoop(load: LevelLoad, arrivals: number[], record: (s: RequestSample) => void): Promise<void> {
  const start = performance.now();
  await Promise.all(
    arrivals.map(async (at, i) => {
      const wait = (at * 1000) / load.clock.timeScale - (performance.now() - start);
      try {
        if (wait > 0) await sleep(wait, load.signal);
      } catch {
        return; // stopped before this request was due: never sent
      }
      if (load.signal.aborted) return;
      record(await load.send(load.request(i)));
    }),
  );
}

export interface SweepLoad {
  mode: "closed" | "open";
  /** Concurrencies (closed loop) or request rates per host second (open loop). */
  levels: readonly number[];
  /** Closed loop: requests per run = concurrency x this. Open loop: rate x this x 10 (ten seconds of arrivals). */
  requestsPerLevel: number;
  repeats: number;
  seed: number;
  request: (index: number) => LoadRequest;
  send: Send;
  clock: HostClock;
  signal: AbortSignal;
  /** Read after each level (speculative acceptance); null when the server reports none. */
  readAcceptance: () => Promise<number | null>;
  onStart?: (level: number, requestsPerRun: number) => void;
  onRequest?: (level: number, tally: LoadTally, requestsPerRun: number) => void;
  onLevel?: (level: LevelSamples) => void;
}

/** Requests in one run of a level. */
export function requestsPerRun(mode: "closed" | "open", level: number, requestsPerLevel: number): number {
  return mode === "closed" ? level * requestsPerLevel : Math.max(1, Math.round(level * requestsPerLevel * 10));
}

/**
 * The sweep, level after level. A level the deadline or an interrupt cut short measured the cut,
 * not the server: it is dropped, and no level after it runs.
 */
export async function runSweep(load: SweepLoad): Promise<LevelSamples[]> {
  const out: LevelSamples[] = [];
  for (const level of load.levels) {
    if (load.signal.aborted) break;
    const count = requestsPerRun(load.mode, level, load.requestsPerLevel);
    load.onStart?.(level, count);
    const startedAtSeconds = hostNow(load.clock);
    const result = await runLevelLoad({
      ...load,
      level,
      count,
      onDone: (tally) => load.onRequest?.(level, tally, count * load.repeats),
    });
    const finishedAtSeconds = hostNow(load.clock);
    if (load.signal.aborted) break;
    const samples: LevelSamples = {
      mode: load.mode,
      ...(load.mode === "closed" ? { concurrency: level } : { requestRate: level }),
      startedAtSeconds,
      finishedAtSeconds,
      acceptanceLength: await load.readAcceptance(),
      ...result,
    };
    out.push(samples);
    load.onLevel?.(samples);
  }
  return out;
}

export interface MeasureOptions {
  shape: WorkloadShape;
  levels: number[];
  requestsPerLevel: number;
  repeats: number;
  requestTimeoutSeconds: number;
  /** Simulated seconds per wall second of the server measured (1 on real hardware). */
  timeScale: number;
  judgement: LevelJudgement;
  signal?: AbortSignal;
  onLevel?: (level: SweepLevel) => void;
}

/** The sweep alone, for a caller that verified the server itself (the comparison): levels with their runs' samples. */
export async function measureSweep(endpoint: Endpoint, model: string, opts: MeasureOptions): Promise<SweepLevel[]> {
  const base = baseUrl(endpoint.url);
  const mode = opts.shape.mode;
  const agent = makeAgent(mode === "closed" ? Math.max(...opts.levels, 1) + 4 : 256);
  const signal = opts.signal ?? new AbortController().signal;
  const clock: HostClock = { origin: performance.now(), timeScale: opts.timeScale };
  const summarize = (l: LevelSamples) =>
    summarizeSweepLevel(
      mode,
      l.concurrency ?? l.requestRate ?? 0,
      levelRuns(l, opts.judgement.slo),
      opts.judgement.slo,
      l.acceptanceLength,
      opts.judgement,
    );
  try {
    const levels = await runSweep({
      mode,
      levels: opts.levels,
      requestsPerLevel: opts.requestsPerLevel,
      repeats: opts.repeats,
      seed: opts.shape.seed,
      request: (i) => shapedRequest(opts.shape, i),
      send: makeSender({
        endpoint,
        base,
        model,
        agent,
        clock,
        signal,
        requestTimeoutSeconds: opts.requestTimeoutSeconds,
      }),
      clock,
      signal,
      readAcceptance: () =>
        withTimeout(
          [signal],
          10_000,
          () => "no answer within 10 s",
          (s) => readAcceptanceLength(agent, base, endpoint.apiKey, s),
        ).catch(() => null),
      onLevel: (l) => opts.onLevel?.(summarize(l)),
    });
    return levels.map(summarize);
  } finally {
    void agent.destroy().catch(() => undefined);
  }
}
