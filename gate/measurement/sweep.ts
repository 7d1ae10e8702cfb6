/**
 * A shaped sweep: the workload's requests at each level (concurrency, or request rate for open
 * loop), each level repeated, summarised with a confidence interval on throughput and goodput under
 * the SLO. Raw samples are kept; every figure is recomputed from them.
 *
 * timeScale: a simulated host runs X times faster than the wall clock (simulator/README.md). The
 * samples are converted to the host's own time as they are taken (durations x X), so every figure
 * downstream, rates included, is the hardware's, not the wall clock's.
 */
import type { Agent } from "undici";
import { readAcceptanceLength } from "./bench";
import { goodput, meanInterval, perTokenLatency, type MeanInterval, type Slo } from "./goodput";
import { baseUrl, makeAgent, type Endpoint } from "../transport/http";
import { withTimeout } from "../transport/timers";
import { latencyStats, percentile, type LatencyStats } from "./stats";
import { streamChat, type RequestSample } from "./stream";
import { poissonArrivals, shapedRequest, type WorkloadShape } from "./workload";

export interface SweepOptions {
  shape: WorkloadShape;
  slo: Slo;
  /** Concurrencies (closed loop) or request rates per second of host time (open loop). */
  levels: number[];
  /** Closed loop: requests per level = concurrency x this. Open loop: requests per level = rate x this x 10. */
  requestsPerLevel: number;
  repeats: number;
  requestTimeoutSeconds: number;
  /** Simulated seconds per wall second of the server measured (1 on real hardware). */
  timeScale: number;
  signal?: AbortSignal;
  onLevel?: (level: SweepLevel) => void;
}

export interface SweepRun {
  durationSeconds: number;
  outputTokensPerSecond: number;
  goodputTokensPerSecond: number;
  requests: number;
  errors: number;
  samples: RequestSample[];
}

export interface SweepLevel extends LatencyStats {
  mode: "closed" | "open";
  /** Concurrency, or request rate per second. */
  level: number;
  runs: SweepRun[];
  throughput: MeanInterval;
  goodput: MeanInterval;
  /** ITL per token, (e2e - TTFT) / (tokens - 1), over all runs' successful requests. */
  itlPerTokenP50Seconds: number | null;
  itlPerTokenP95Seconds: number | null;
  /** Every run met the SLO at its percentiles. */
  meetsSlo: boolean;
  requests: number;
  errors: number;
  acceptanceLength: number | null;
}

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

/** Summary of a level's runs (pure). */
export function summarizeSweepLevel(
  mode: "closed" | "open",
  level: number,
  runs: SweepRun[],
  slo: Slo,
  acceptanceLength: number | null,
): SweepLevel {
  const all = runs.flatMap((r) => r.samples);
  const itl = Float64Array.from(
    all.flatMap((s) => {
      const v = perTokenLatency(s);
      return v === null ? [] : [v];
    }),
  ).sort();
  return {
    mode,
    level,
    runs,
    throughput: meanInterval(runs.map((r) => r.outputTokensPerSecond)),
    goodput: meanInterval(runs.map((r) => r.goodputTokensPerSecond)),
    itlPerTokenP50Seconds: percentile(itl, 50),
    itlPerTokenP95Seconds: percentile(itl, 95),
    meetsSlo: runs.length > 0 && runs.every((r) => goodput(r.samples, r.durationSeconds, slo).levelMeetsSlo),
    requests: all.length,
    errors: all.filter((s) => s.error !== null).length,
    acceptanceLength,
    ...latencyStats(all),
  };
}

export function runSummary(samples: RequestSample[], durationSeconds: number, slo: Slo): SweepRun {
  const ok = samples.filter((s) => s.error === null);
  const tokens = ok.reduce((a, s) => a + s.completionTokens, 0);
  return {
    durationSeconds,
    outputTokensPerSecond: durationSeconds > 0 ? tokens / durationSeconds : 0,
    goodputTokensPerSecond: goodput(samples, durationSeconds, slo).goodputTokensPerSecond,
    requests: samples.length,
    errors: samples.length - ok.length,
    samples,
  };
}

export async function sweep(endpoint: Endpoint, model: string, opts: SweepOptions): Promise<SweepLevel[]> {
  const base = baseUrl(endpoint.url);
  const closed = opts.shape.mode === "closed";
  const maxConcurrency = closed ? Math.max(...opts.levels) : 256;
  const agent = makeAgent(maxConcurrency + 4);
  const signal = opts.signal ?? new AbortController().signal;
  const X = opts.timeScale;
  const origin = performance.now();
  const send = (i: number): Promise<RequestSample> => {
    const r = shapedRequest(opts.shape, i);
    const ms = (opts.requestTimeoutSeconds * 1000) / X;
    return withTimeout(
      [signal],
      ms,
      () => `no complete answer within ${opts.requestTimeoutSeconds} s`,
      (s) =>
        streamChat({
          url: `${base}/v1/chat/completions`,
          body: {
            model,
            messages: [{ role: "user", content: r.prompt }],
            max_tokens: r.maxTokens,
            stream: true,
            stream_options: { include_usage: true },
            ...r.extraBody,
          },
          apiKey: endpoint.apiKey,
          signal: s,
          dispatcher: agent,
          origin,
        }),
    ).then((s) => toHostTime(s, X));
  };
  const out: SweepLevel[] = [];
  try {
    for (const level of opts.levels) {
      const runs: SweepRun[] = [];
      for (let rep = 0; rep < opts.repeats && !signal.aborted; rep++) {
        // Each repeat sends the same requests (the same indices): repeats differ by timing only.
        const count = closed
          ? level * opts.requestsPerLevel
          : Math.max(1, Math.round(level * opts.requestsPerLevel * 10));
        const t0 = performance.now();
        const samples = closed
          ? await closedLoop(level, count, send)
          : await openLoop(poissonArrivals(level, count, opts.shape.seed + rep), X, send, signal);
        runs.push(runSummary(samples, ((performance.now() - t0) / 1000) * X, opts.slo));
      }
      const accept = await acceptance(agent, base, endpoint.apiKey, signal);
      const summary = summarizeSweepLevel(opts.shape.mode, level, runs, opts.slo, accept);
      out.push(summary);
      opts.onLevel?.(summary);
      if (signal.aborted) break;
    }
    return out;
  } finally {
    void agent.destroy().catch(() => undefined);
  }
}

async function closedLoop(
  concurrency: number,
  total: number,
  send: (i: number) => Promise<RequestSample>,
): Promise<RequestSample[]> {
  const samples: RequestSample[] = [];
  let next = 0;
  const worker = async () => {
    while (next < total) samples.push(await send(next++));
  };
  await Promise.all(Array.from({ length: Math.min(concurrency, total) }, worker));
  return samples;
}

/** Open loop: each request leaves at its arrival time (host seconds / X on the wall clock). */
async function openLoop(
  arrivals: number[],
  timeScale: number,
  send: (i: number) => Promise<RequestSample>,
  signal: AbortSignal,
): Promise<RequestSample[]> {
  const start = performance.now();
  const pending = arrivals.map(async (at, i) => {
    const wait = (at * 1000) / timeScale - (performance.now() - start);
    if (wait > 0) await new Promise((r) => setTimeout(r, wait));
    if (signal.aborted) throw signal.reason;
    return send(i);
  });
  return Promise.all(pending);
}

function acceptance(agent: Agent, base: string, apiKey: string | undefined, signal: AbortSignal) {
  return withTimeout(
    [signal],
    10_000,
    () => "no answer within 10 s",
    (s) => readAcceptanceLength(agent, base, apiKey, s),
  );
}
