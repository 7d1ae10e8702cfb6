/**
 * The benchmark client spread over Node's own worker threads, for loads one thread cannot ingest
 * with correct timing (a fleet behind a router, a simulated host at a large time scale): one thread
 * parses a few hundred thousand streamed tokens a second on a core (README,
 * bench/gate-client-ceiling.ts), and at that rate its own client check already says it was the limit.
 *
 * A spread run is the run one thread would send, cut in shares: a closed loop's slots are dealt out
 * (the threads take the run's next request number from one shared counter, so the same requests
 * are sent); an open loop's Poisson schedule is dealt out request by request (thread k sends
 * requests k, k + n, ...), each at its arrival time from one common origin, so the arrivals are
 * the very schedule asked for. Each thread has its own connection pool and event loop, and sends
 * its samples back in batches; this thread records them as its own (the server watch, the tally,
 * the level's samples). Every thread watches itself as the main thread does (certificate.ts
 * watchClient), and the level's client check judges each: spread or not, the certificate says
 * whether the client was the limit.
 *
 * Threads are started before the level that needs them, outside its window (a thread loads the
 * measurement code in a few hundred milliseconds), and ended by close() when the sweep ends; an
 * interrupt reaches them through the run's signal and the process takes them with it.
 */
import * as fs from "node:fs";
import { availableParallelism } from "node:os";
import * as path from "node:path";
import { Worker } from "node:worker_threads";
import type { ClientEvidence } from "../judge/certificate";
import type { RequestSample } from "../base/samples";
import type { RequestSource } from "../base/workload";
import { CLIENT_THREAD_TOKENS_PER_SECOND, MAX_CLIENT_THREADS } from "../base/schema";

/** How many client threads a sweep uses: "auto" (as the projected token rate needs) or a number (1: this thread alone). */
export type ClientThreadsSetting = "auto" | number;

/** What a level is expected to stream, for "auto". */
export interface LevelProjection {
  mode: "closed" | "open";
  level: number;
  /** Host seconds per wall second: the client ingests X times the host's token rate. */
  timeScale: number;
  /** The largest max_tokens a request asks for (open loop: tokens per request at most). */
  maxTokens: number;
  /** The last level measured: its level and its output tokens per host second. */
  previous: { level: number; tokensPerSecond: number } | null;
  /** One request alone: output tokens per host second (the single requests), or null. */
  singleStreamTokensPerSecond: number | null;
  /**
   * One thread was measured to be the limit: the sweep's previous level ran on this thread alone
   * and its client check said the client was the limit, or it already ran spread. Until then
   * "auto" is this thread alone (clientThreadsFor).
   */
  oneThreadWasLimit: boolean;
}

/**
 * Output tokens per wall second a level may stream, at most: an open loop's rate times the most
 * tokens a request asks for; a closed loop's previous level scaled to this one (throughput grows
 * at most in proportion to concurrency), or before any level one stream's speed times the
 * concurrency. Both bound the level from above; 0 when nothing is known.
 */
export function projectedWallTokensPerSecond(p: LevelProjection): number {
  const host =
    p.mode === "open"
      ? p.level * p.maxTokens
      : p.previous !== null && p.previous.level > 0
        ? (p.previous.tokensPerSecond * p.level) / p.previous.level
        : (p.singleStreamTokensPerSecond ?? 0) * p.level;
  return host * p.timeScale;
}

/**
 * Threads for a level: the number set, or for "auto" one per CLIENT_THREAD_TOKENS_PER_SECOND of the
 * projected rate, at most one fewer than the cores and at most the level's concurrency (closed
 * loop: a thread holds one slot at least). "auto" spreads nothing until one thread was measured to
 * be the limit (LevelProjection.oneThreadWasLimit): against a paced server whose own log is the
 * truth, two threads read later than one at every rate one thread timed correctly (their figures
 * 1-2 % low, one thread's within 0.2 %: docs/results.md), so a projection alone never spreads a level
 * that one thread would have measured better. One core is left to the main thread and whatever else
 * the machine runs: on the 2-core CI machine beside a competitor and simulated hosts, two client
 * threads were descheduled in turn (a thread's loop stood still 30 % of a level), and a level of 32
 * one-request slots had at most 26 in flight at once; auto there is one thread, as before.
 */
export function clientThreadsFor(
  setting: ClientThreadsSetting,
  projection: LevelProjection,
  cores = availableParallelism(),
): number {
  const most = projection.mode === "closed" ? Math.max(1, Math.floor(projection.level)) : MAX_CLIENT_THREADS;
  if (setting !== "auto") return Math.max(1, Math.min(setting, most));
  if (!projection.oneThreadWasLimit) return 1;
  const need = Math.ceil(projectedWallTokensPerSecond(projection) / CLIENT_THREAD_TOKENS_PER_SECOND);
  return Math.max(1, Math.min(need, cores - 1, most));
}

/** What every thread of a pool is started with (worker data). */
export interface ClientThreadSpec {
  /** The server's base URL and its API key (never in argv: worker data stays in the process). */
  base: string;
  apiKey?: string;
  model: string;
  requestTimeoutSeconds: number;
  requests: RequestSource;
  timeScale: number;
  /** The run's clock origin as epoch milliseconds (performance.timeOrigin + origin): threads have their own performance clocks. */
  originEpochMs: number;
  /** Each thread's connection pool. */
  connections: number;
}

/** A run's share, as a thread gets it. */
export type ThreadRun =
  | {
      kind: "run";
      mode: "closed";
      slots: number;
      count: number;
      counter: SharedArrayBuffer;
      /** When every thread starts its slots, epoch milliseconds (the threads fill the level together). */
      startEpochMs: number;
    }
  | {
      kind: "run";
      mode: "open";
      arrivals: number[];
      indices: number[];
      /** The schedule's origin, epoch milliseconds. */
      startEpochMs: number;
      maxInFlight: number;
    };

/** What a thread posts back. */
export type ThreadMessage =
  | { kind: "ready" }
  | { kind: "samples"; samples: RequestSample[] }
  | { kind: "done"; client: ClientEvidence; maxTokens: number }
  | { kind: "failed"; error: string };

/** A run spread over the threads: when its window began (host seconds), what the threads asked and saw. */
export interface SpreadRun {
  startedAtSeconds: number;
  maxTokens: number;
  client: ClientEvidence[];
}

/** A run as one thread would send it (runLevelLoad's run). */
export interface RunShape {
  mode: "closed" | "open";
  level: number;
  count: number;
  /** Open loop: the run's Poisson schedule, host seconds from its origin. */
  arrivals: readonly number[];
  maxInFlight: number;
}

/** How late past now a spread run starts, so every thread has its share before it. */
const START_LEAD_MS = 20;
/** How long a thread may take to load the measurement code and say it is ready. */
const READY_TIMEOUT_MS = 60_000;

/** The worker entry: the compiled module beside this one, or from the sources, through tsx (tests, `npm run tsx`). */
function startThread(spec: ClientThreadSpec): Worker {
  const js = path.join(__dirname, "client-thread.js");
  if (fs.existsSync(js)) return new Worker(js, { workerData: spec });
  const ts = path.join(__dirname, "client-thread.ts");
  return new Worker(`require("tsx/cjs/api").register(); require(${JSON.stringify(ts)});`, {
    eval: true,
    workerData: spec,
  });
}

class ClientThread {
  private listener: ((m: ThreadMessage) => void) | null = null;
  private failure: Error | null = null;

  private constructor(readonly worker: Worker) {
    worker.on("message", (m: ThreadMessage) => this.listener?.(m));
    const fail = (err: Error) => {
      this.failure ??= err;
      this.listener?.({ kind: "failed", error: err.message });
    };
    worker.on("error", fail);
    worker.on("exit", (code) => fail(new Error(`a client thread exited (code ${code})`)));
  }

  static start(spec: ClientThreadSpec, signal: AbortSignal): Promise<ClientThread> {
    const t = new ClientThread(startThread(spec));
    return new Promise((resolve, reject) => {
      const timer = setTimeout(
        () => done(new Error(`a client thread was not ready within ${READY_TIMEOUT_MS / 1000} s`)),
        READY_TIMEOUT_MS,
      );
      const onAbort = () => done(new Error("stopped while the client threads started"));
      signal.addEventListener("abort", onAbort, { once: true });
      const done = (err: Error | null) => {
        clearTimeout(timer);
        signal.removeEventListener("abort", onAbort);
        t.listener = null;
        if (err === null) return resolve(t);
        void t.worker.terminate();
        reject(err);
      };
      t.listener = (m) => {
        if (m.kind === "ready") done(null);
        else if (m.kind === "failed") done(new Error(`a client thread failed to start: ${m.error}`));
      };
    });
  }

  /** Sends a share; every sample goes to RECORD as it arrives. */
  run(
    share: ThreadRun,
    signal: AbortSignal,
    record: (s: RequestSample) => void,
  ): Promise<{ client: ClientEvidence; maxTokens: number }> {
    if (this.failure) return Promise.reject(this.failure);
    return new Promise((resolve, reject) => {
      const onAbort = () =>
        this.worker.postMessage({
          kind: "abort",
          reason: signal.reason instanceof Error ? signal.reason.message : String(signal.reason),
        });
      signal.addEventListener("abort", onAbort, { once: true });
      const end = () => {
        signal.removeEventListener("abort", onAbort);
        this.listener = null;
      };
      this.listener = (m) => {
        if (m.kind === "samples") for (const s of m.samples) record(s);
        else if (m.kind === "done") {
          end();
          resolve({ client: m.client, maxTokens: m.maxTokens });
        } else if (m.kind === "failed") {
          end();
          reject(new Error(`a client thread failed: ${m.error}`));
        }
      };
      this.worker.postMessage(share);
      if (signal.aborted) onAbort();
    });
  }
}

/** The pool of a sweep: grown as levels need more threads, closed when the sweep ends. */
export class ClientThreads {
  private readonly threads: ClientThread[] = [];

  constructor(private readonly spec: ClientThreadSpec) {}

  get size(): number {
    return this.threads.length;
  }

  /** Starts threads until the pool has N, each ready to send. */
  async ensure(n: number, signal: AbortSignal): Promise<void> {
    const more = Math.max(0, n - this.threads.length);
    const started = await Promise.allSettled(Array.from({ length: more }, () => ClientThread.start(this.spec, signal)));
    for (const s of started) if (s.status === "fulfilled") this.threads.push(s.value);
    const failed = started.find((s) => s.status === "rejected");
    if (failed) throw failed.reason;
  }

  /**
   * One run spread over the first N threads (started with ensure()); its samples go to RECORD as
   * they arrive. The threads stop sending when SIGNAL aborts, and the run ends when each has
   * finished what it had in flight.
   */
  async run(shape: RunShape, n: number, signal: AbortSignal, record: (s: RequestSample) => void): Promise<SpreadRun> {
    const threads = this.threads.slice(0, n);
    if (threads.length < n) throw new Error(`the client pool has ${threads.length} threads, ${n} were asked for`);
    const { origin, timeScale } = {
      origin: this.spec.originEpochMs - performance.timeOrigin,
      timeScale: this.spec.timeScale,
    };
    const hostAt = (now: number) => ((now - origin) / 1000) * timeScale;
    let shares: ThreadRun[];
    // One start for every thread, a little ahead so that each has its share by then: a thread that
    // began as its message came filled its slots late, and on a fast server a level of 32 had at
    // most 31 in flight (a CI run's load check failed).
    const start = performance.now() + START_LEAD_MS;
    const startedAtSeconds = hostAt(start);
    if (shape.mode === "closed") {
      const counter = new SharedArrayBuffer(4);
      shares = threads.map((_, k) => ({
        kind: "run",
        mode: "closed",
        slots: Math.floor(shape.level / n) + (k < shape.level % n ? 1 : 0),
        count: shape.count,
        counter,
        startEpochMs: performance.timeOrigin + start,
      }));
    } else {
      shares = threads.map((_, k) => {
        const indices: number[] = [];
        for (let i = k; i < shape.arrivals.length; i += n) indices.push(i);
        return {
          kind: "run",
          mode: "open",
          indices,
          arrivals: indices.map((i) => shape.arrivals[i]),
          startEpochMs: performance.timeOrigin + start,
          maxInFlight: Math.max(1, Math.ceil(shape.maxInFlight / n)),
        };
      });
    }
    const ends = await Promise.all(threads.map((t, k) => t.run(shares[k], signal, record)));
    return {
      startedAtSeconds,
      maxTokens: Math.max(0, ...ends.map((e) => e.maxTokens)),
      client: ends.map((e) => e.client),
    };
  }

  /** Ends every thread (a run in flight is abandoned: call after the sweep). */
  async close(): Promise<void> {
    const threads = this.threads.splice(0);
    await Promise.all(threads.map((t) => t.worker.terminate().catch(() => undefined)));
  }
}
