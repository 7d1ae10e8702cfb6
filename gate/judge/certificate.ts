/**
 * A level's validity certificate: the proof a figure carries that it is the server's and not an
 * artefact of the client or a server that lies. Four checks, each with its detail:
 *
 * - reconciled: the server's own counters (server-counters.ts) grew by what the client counted:
 *   generated tokens within the tolerance, requests exact where the server counts them. A server
 *   whose `usage` over-claims, other clients or models on the server, or no /metrics at all ("not
 *   reconciled") fail it: a figure no counter confirms is not a capacity figure.
 * - load: the load asked for was the load applied. Closed loop: while every worker had requests
 *   left, the time-weighted mean of requests in flight against the concurrency asked for. Open loop:
 *   sent against planned arrivals, the dispatch lag p50/p99, and a Kolmogorov-Smirnov test of the
 *   inter-arrival times against the exponential of the rate asked for.
 * - client: the benchmark process was not the limit: its event loop's delay and its CPU share over
 *   the level.
 * - steady: the warmup was done and the server did not restart during the level (its counters did
 *   not go back, its process start time did not change).
 *
 * Pure: the evidence is gathered by the sweep (load.ts), judged here.
 */
import { monitorEventLoopDelay } from "node:perf_hooks";
import { z } from "zod";
import type { CounterRead } from "../base/samples";
import type { RequestSample } from "../base/samples";
import type { Certification } from "../base/schema";

/** One level's validity certificate: the one shape of the JSON, the CSV, the text and the stack outputs. */
export const CertificateSchema = z
  .object({
    certified: z.boolean().describe("every check held: the level's figures are the server's"),
    checks: z
      .array(
        z.object({
          name: z.enum(["reconciled", "received", "load", "client", "steady"]),
          ok: z.boolean(),
          detail: z.string().describe("what was compared, with both sides' numbers"),
        }),
      )
      .describe(
        "reconciled with the server's /metrics, the tokens claimed against what the client received, the load applied, the client not the limit, the server steady",
      ),
  })
  .describe("A level's validity certificate (gate/judge/certificate.ts).");
export type Certificate = z.infer<typeof CertificateSchema>;
export type CertificateCheck = Certificate["checks"][number];

/** What the client saw of itself over a level (wall clock). */
export interface ClientEvidence {
  wallSeconds: number;
  /** Event-loop delay beyond its sampling interval, ms: p99 and max. */
  loopDelayP99Ms: number;
  loopDelayMaxMs: number;
  /** The delays beyond the sampling interval, summed, over the wall time: the share the loop stood still. */
  stallShare: number;
  /** CPU time (user + system) of the process over the wall time: the share of one core it used. */
  cpuShare: number;
}

/** The evidence a sweep gathers for a level's certificate. */
export interface LevelEvidence {
  before: CounterRead;
  after: CounterRead;
  client: ClientEvidence;
  /** A level spread over client threads (client-threads.ts): per run, what each thread saw of itself; absent: none. */
  clientThreads?: ClientEvidence[][];
  /** A warmup request succeeded before the sweep. */
  warm: boolean;
  /** The model the level's requests asked for (the counters' model_name). */
  model: string;
  /** Host seconds per wall second (the samples are in host time). */
  timeScale: number;
  /** Speculative services: the least acceptance length that counts as working; null: not speculative. */
  acceptanceFloor: number | null;
  /** Closed loop: the server's own gauges of the requests it held, read during the level; absent: none read. */
  serverLoad?: ServerLoadRead[];
  /**
   * Evidence this run could not gather, by the check it belongs to (the mixed fleet reads no
   * worker's gauges of requests held: summedCounters): said in that check's detail, never passed in
   * silence. Absent: everything was gathered.
   */
  notGathered?: Partial<Record<CertificateCheck["name"], string>>;
  /** The sweep's first level, measured again after its last (load.ts); absent: not bracketed (one level, or cut short). */
  bracket?: Bracket;
}

/**
 * A concurrency sweep's bracket: its first level's throughput when it ran and when it ran again
 * after the last level (load.ts runSweep).
 */
export interface Bracket {
  /** The level as verdicts name it ("C=4"). */
  name: string;
  first: BracketRun;
  again: BracketRun;
}

export interface BracketRun {
  tokensPerSecond: number;
  /** Host seconds the run's window lasted. */
  seconds: number;
}

/** One read of the server's gauges during a level: requests running or waiting there, at a host time. */
export interface ServerLoadRead {
  atSeconds: number;
  held: number;
}

/**
 * Fewer reads of the server's gauges while the run had requests in flight judge nothing: a level
 * under a second of wall time, where one read caught at a request's edge weighs too much.
 */
export const MIN_SERVER_LOAD_READS = 10;

const LOOP_RESOLUTION_MS = 20;
/**
 * Stalls or work of the client shorter than this, in all, never make it the limit (clientCheck): a
 * shared machine's scheduler alone stalled a process for up to 0.4 s at a time on this project's
 * 2-core CI machine under load (levels of a time-scaled simulator last well under a second of wall
 * time there), while a level worth a capacity figure on real hardware lasts tens of seconds, where
 * half a second is under 2 %.
 */
export const CLIENT_NOISE_SECONDS = 0.5;
/** Node's timers fire to the millisecond at best. */
const TIMER_TICK_SECONDS = 0.001;

/** Watches the process over a level; stop() returns what it saw. */
export function watchClient(): { stop: () => ClientEvidence } {
  const loop = monitorEventLoopDelay({ resolution: LOOP_RESOLUTION_MS });
  loop.enable();
  // This thread's CPU where Node can tell it (a spread run's client threads are each watched on their own).
  const usage = (prev?: NodeJS.CpuUsage) => (process.threadCpuUsage ?? process.cpuUsage)(prev);
  const cpu = usage();
  const started = performance.now();
  return {
    stop: () => {
      loop.disable();
      const wallSeconds = (performance.now() - started) / 1000;
      const used = usage(cpu);
      const beyond = (ns: number) => (Number.isFinite(ns) ? Math.max(0, ns / 1e6 - LOOP_RESOLUTION_MS) : 0);
      // Each sample is one interval between the loop's turns: what exceeds the resolution is stall.
      const stalled = loop.count > 0 ? (loop.count * beyond(loop.mean)) / 1000 : 0;
      return {
        wallSeconds,
        loopDelayP99Ms: loop.count > 0 ? beyond(loop.percentile(99)) : 0,
        loopDelayMaxMs: loop.count > 0 ? beyond(loop.max) : 0,
        stallShare: wallSeconds > 0 ? Math.min(1, stalled / wallSeconds) : 0,
        cpuShare: wallSeconds > 0 ? (used.user + used.system) / 1e6 / wallSeconds : 0,
      };
    },
  };
}

const count = (n: number) => Math.round(n).toLocaleString("en-US");

/** The counters against what the client counted. */
export function reconcile(
  evidence: Pick<LevelEvidence, "before" | "after" | "model">,
  client: { requests: number; errors: number; generatedTokens: number; maxTokens: number },
  tolerance: number,
): CertificateCheck {
  const name = "reconciled";
  const { before, after } = evidence;
  if (!before.ok || !after.ok) {
    const reasons = new Set([before, after].flatMap((r) => (r.ok ? [] : [r.reason])));
    return { name, ok: false, detail: `not reconciled: ${[...reasons].join("; ")}` };
  }
  const b = before.snapshot;
  const a = after.snapshot;
  if (a.generatedTokens < b.generatedTokens || (a.requests ?? 0) < (b.requests ?? 0))
    return { name, ok: false, detail: "not reconciled: the server's counters went back during the level (a restart)" };
  const generated = a.generatedTokens - b.generatedTokens;
  const claimed = client.generatedTokens;
  // A request that failed may have generated tokens the client never counted; none may be missing.
  const slack = Math.max(1, claimed * tolerance);
  const most = claimed + slack + client.errors * client.maxTokens;
  const others = Object.entries(a.generatedByModel).filter(
    ([m, v]) => m !== evidence.model && v !== (b.generatedByModel[m] ?? 0),
  );
  const otherNote =
    others.length > 0
      ? `; the server also generated for ${others.map(([m]) => JSON.stringify(m)).join(", ")} during the level (other clients)`
      : "";
  if (generated < claimed - slack || generated > most)
    return {
      name,
      ok: false,
      detail: `not reconciled: the server generated ${count(generated)} tokens, the responses claimed ${count(claimed)}${otherNote}`,
    };
  if (others.length > 0)
    return { name, ok: false, detail: `not reconciled: other models were served during the level${otherNote}` };
  let requests = "";
  if (a.requests !== null && b.requests !== null) {
    const served = a.requests - b.requests;
    const least = client.requests - client.errors;
    if (served < least || served > client.requests)
      return {
        name,
        ok: false,
        detail: `not reconciled: the server finished ${count(served)} requests, the client sent ${count(client.requests)}${client.errors > 0 ? ` (${count(client.errors)} failed)` : ""}: other clients on the server, or requests it did not count`,
      };
    requests = `, ${count(served)} requests`;
  }
  return {
    name,
    ok: true,
    detail: `the server's ${a.dialect} counters: ${count(generated)} tokens generated${requests}, as the client counted`,
  };
}

/**
 * Closed loop: requests in flight while every worker had work, from the C-th request's start to the
 * last one's (then workers begin to run dry): time-weighted, against C. Where no such stretch exists
 * (one request per worker), every worker must have been in flight at once. Where the server's own
 * gauges were read during the run (SERVER_LOAD), what it held is held against what the client had
 * in flight at the same instants (serverHeld).
 */
export function closedLoopLoad(
  samples: RequestSample[],
  concurrency: number,
  shortfall: number,
  serverLoad: ServerLoadRead[] = [],
): CertificateCheck {
  const client = clientLoad(samples, concurrency, shortfall);
  const server = serverHeld(samples, serverLoad, shortfall);
  if (!server) return client;
  return { name: client.name, ok: client.ok && server.ok, detail: `${client.detail}; ${server.detail}` };
}

/**
 * The server's side of the load: the requests its gauges held (running and waiting: SGLang's
 * num_running_reqs and num_queue_reqs, llama.cpp's requests_processing and requests_deferred) at
 * each read while the client had requests of this run in flight, against how many it had at the
 * same instants. Instant for instant, never with C: a read between one request's end and the next
 * one's start, or in the run's ramp-down, sees the same fewer on both sides. A server holding fewer
 * than the client sent has them waiting in front of it (a proxy, a gateway's concurrency limit): the
 * figure is not of the load asked for. Null: too few reads to judge (a short level).
 */
export function serverHeld(
  samples: RequestSample[],
  reads: ServerLoadRead[],
  shortfall: number,
): { ok: boolean; detail: string } | null {
  const inFlightAt = (t: number) =>
    samples.filter((s) => s.startedAtSeconds <= t && t < s.startedAtSeconds + s.e2eSeconds).length;
  const within = reads.map((r) => ({ ...r, sent: inFlightAt(r.atSeconds) })).filter((r) => r.sent > 0);
  if (within.length < MIN_SERVER_LOAD_READS) return null;
  const held = within.reduce((a, r) => a + r.held, 0);
  const sent = within.reduce((a, r) => a + r.sent, 0);
  const ok = held >= sent * (1 - shortfall);
  const mean = (n: number) => (n / within.length).toFixed(2);
  return {
    ok,
    detail: `the server held ${mean(held)} running or waiting of the client's ${mean(sent)} in flight (${within.length} reads of its gauges)${ok ? "" : ": the requests waited in front of the server, which did not see the load asked for"}`,
  };
}

function clientLoad(samples: RequestSample[], concurrency: number, shortfall: number): CertificateCheck {
  const name = "load";
  if (samples.length === 0) return { name, ok: false, detail: "no request was sent" };
  const starts = samples.map((s) => s.startedAtSeconds).sort((x, y) => x - y);
  const from = starts[Math.min(concurrency, starts.length) - 1];
  const to = starts[starts.length - 1];
  const least = concurrency * (1 - shortfall);
  if (to - from <= 0) {
    // One request per slot: the most in flight at once, held to the same shortfall as the mean (a
    // level spread over client threads starts them within a timer's tick, not within one turn).
    const peak = peakInFlight(samples);
    return {
      name,
      ok: peak >= least,
      detail: `${peak} of ${concurrency} requests in flight at once${peak >= least ? "" : ": the client did not keep the load applied"}`,
    };
  }
  const busy = samples.reduce((acc, s) => {
    const end = s.startedAtSeconds + s.e2eSeconds;
    return acc + Math.max(0, Math.min(end, to) - Math.max(s.startedAtSeconds, from));
  }, 0);
  const mean = busy / (to - from);
  return {
    name,
    ok: mean >= least,
    detail: `${mean.toFixed(2)} requests in flight on average of ${concurrency} asked for${mean >= least ? "" : ": the client did not keep the load applied"}`,
  };
}

function peakInFlight(samples: RequestSample[]): number {
  const events = samples.flatMap((s) => [
    [s.startedAtSeconds, 1],
    [s.startedAtSeconds + s.e2eSeconds, -1],
  ]);
  events.sort((x, y) => x[0] - y[0] || x[1] - y[1]);
  let now = 0;
  let peak = 0;
  for (const [, d] of events) peak = Math.max(peak, (now += d));
  return peak;
}

/**
 * The Kolmogorov-Smirnov distance of GAPS from the exponential of RATE, and whether it passes at
 * the 1 % level (critical value 1.63 / sqrt(n), the asymptotic one; n >= 20). Each gap is known to
 * within RESOLUTION (the client's timer tick and dispatch lag): the empirical distribution is held
 * against the band [F(g - resolution), F(g + resolution)], not the curve, so a timer that sends due
 * requests on the same tick is not taken for another process, while a regular or bursty one is.
 */
export function exponentialFit(
  gaps: number[],
  rate: number,
  resolution = 0,
): { d: number; critical: number; ok: boolean } {
  const sorted = [...gaps].sort((x, y) => x - y);
  const n = sorted.length;
  const F = (x: number) => (x <= 0 ? 0 : 1 - Math.exp(-rate * x));
  let d = 0;
  sorted.forEach((g, i) => {
    d = Math.max(d, (i + 1) / n - F(g + resolution), F(g - resolution) - i / n);
  });
  const critical = 1.63 / Math.sqrt(n);
  return { d, critical, ok: d <= critical };
}

/**
 * The client could not offer a rate level as planned: it sent requests clearly slower than its
 * schedule planned (by more than the shortfall the server is allowed), or its p99 request left later
 * than that share of a run's length (the schedule's shape was lost even where the rate held).
 */
export function clientFellBehind(
  level: { planned: number | null; sent: number | null; lagP99: number | null; runSeconds: number },
  rateShortfall: number,
): boolean | null {
  if (level.planned === null || level.sent === null || level.lagP99 === null) return null;
  return level.sent < level.planned * (1 - rateShortfall) || level.lagP99 > rateShortfall * level.runSeconds;
}

/** The schedule of a rate level as the client kept it (levels.ts): rates planned and sent, dispatch lags. */
export interface KeptSchedule {
  planned: number | null;
  sent: number | null;
  lagP50: number | null;
  lagP99: number | null;
  /** Mean host seconds of a run. */
  runSeconds: number;
}

/** Open loop: the rate planned against the rate sent, the lag of each request, and the arrival process. */
export function openLoopLoad(
  schedule: KeptSchedule,
  rate: number,
  runs: { samples: RequestSample[] }[],
  shortfall: number,
  timeScale = 1,
): CertificateCheck {
  const name = "load";
  const { planned, sent, lagP50, lagP99 } = schedule;
  if (planned === null || sent === null || lagP99 === null || lagP50 === null)
    return { name, ok: false, detail: "too few requests to tell the rate sent" };
  const lagText = `dispatch lag p50 ${(lagP50 * 1000).toFixed(1)} ms, p99 ${(lagP99 * 1000).toFixed(1)} ms`;
  const rates = `sent ${sent.toFixed(2)} req/s of ${planned.toFixed(2)} planned (${rate} asked for)`;
  if (clientFellBehind(schedule, shortfall))
    return { name, ok: false, detail: `${rates}, ${lagText}: the client fell behind its schedule` };
  // Inter-arrival times of each run, as sent, against the exponential of the rate asked for.
  const gaps = runs.flatMap((r) => {
    const t = r.samples.map((s) => s.startedAtSeconds).sort((x, y) => x - y);
    return t.slice(1).map((v, i) => v - t[i]);
  });
  if (gaps.length < 20) return { name, ok: true, detail: `${rates}, ${lagText}; too few arrivals to test the process` };
  // A send is timed to the timer's millisecond (wall clock, so timeScale ms of host time) and left
  // up to the dispatch lag late: that is the resolution of each gap.
  const fit = exponentialFit(gaps, rate, TIMER_TICK_SECONDS * timeScale + lagP99);
  const fitText = `Kolmogorov-Smirnov D ${fit.d.toFixed(3)} against the exponential (critical ${fit.critical.toFixed(3)} at 1 %)`;
  return {
    name,
    ok: fit.ok,
    detail: `${rates}, ${lagText}, ${fitText}${fit.ok ? "" : ": the arrivals were not the Poisson process asked for"}`,
  };
}

/** The client's own delays over a level's runs (clientDelays), host seconds. */
export interface ClientDelays {
  /** Summed over the runs: each window's time beyond its requests' span (first start to last end). */
  excessSeconds: number;
  /** Closed loop, summed over the runs: slot-seconds between a request's end and its slot's next start, per slot. */
  idleSeconds: number;
  /** The runs' windows, summed. */
  windowSeconds: number;
  /** The successful requests whose server stated its own timing (stream.ts serverTiming), and its request time summed. */
  timedRequests: number;
  serverSeconds: number;
  /** Summed over those: how long after the server wrote them the client read its first and its last output event. */
  firstTokenLagSeconds: number;
  lastTokenLagSeconds: number;
}

/**
 * What the client's own timing cost a level, from its samples alone: the window's excess over the
 * requests' span in a closed loop (the level's clock ran while none of its requests did: threads
 * starting, results collected; the throughput is low by that share), and the slots' idle time
 * between a request's end and the start of the slot's next one. The k-th end frees the slot the
 * (C+k)-th start fills, so the idle total is the later starts' sum minus the earlier ends' sum,
 * whichever slot each was (a spread run's threads included). Where the server stated its own
 * timing, the lag of the first and the last output read behind their writing: a late reader
 * delays every request's end, which neither of the first two sees (the slot restarts on time
 * after an end read late).
 */
export function clientDelays(
  runs: { samples: RequestSample[]; durationSeconds?: number }[],
  mode: "closed" | "open",
  level: number,
): ClientDelays {
  const d: ClientDelays = {
    excessSeconds: 0,
    idleSeconds: 0,
    windowSeconds: 0,
    timedRequests: 0,
    serverSeconds: 0,
    firstTokenLagSeconds: 0,
    lastTokenLagSeconds: 0,
  };
  for (const r of runs) {
    tokenLags(d, r.samples);
    if (r.samples.length === 0 || r.durationSeconds === undefined) continue;
    const starts = r.samples.map((s) => s.startedAtSeconds).sort((a, b) => a - b);
    const ends = r.samples.map((s) => s.startedAtSeconds + s.e2eSeconds).sort((a, b) => a - b);
    d.windowSeconds += r.durationSeconds;
    // An open loop's window opens before its first arrival by design (the load check judges its lags).
    if (mode !== "closed") continue;
    d.excessSeconds += Math.max(0, r.durationSeconds - (ends[ends.length - 1] - starts[0]));
    if (starts.length <= level) continue;
    const later = starts.slice(level).reduce((a, v) => a + v, 0);
    const earlier = ends.slice(0, ends.length - level).reduce((a, v) => a + v, 0);
    d.idleSeconds += Math.max(0, later - earlier) / level;
  }
  return d;
}

/** Adds the token lags of the samples whose server stated its timing (clientDelays). */
function tokenLags(d: ClientDelays, samples: RequestSample[]): void {
  for (const s of samples) {
    const t = s.serverTiming;
    if (s.error !== null || t === undefined || s.ttftSeconds === null) continue;
    // The client's clock starts before the server's (the request's trip), so a lag is never below 0
    // unless the server's timing is wrong; a negative one is not credited against the others.
    d.timedRequests++;
    d.serverSeconds += t.lastTokenSeconds;
    d.firstTokenLagSeconds += Math.max(0, s.ttftSeconds - t.firstTokenSeconds);
    d.lastTokenLagSeconds += Math.max(0, t.clientLastTokenSeconds - t.lastTokenSeconds);
  }
}

/**
 * A mean token lag under this, wall clock, is noise: a request's trip over loopback and back and a
 * scheduler's time slice (Linux CFS's latency target is 6-24 ms), not a client that fell behind.
 */
const LAG_NOISE_SECONDS = 0.01;

/**
 * The delays in words, and what went over the fraction (null: nothing). The figure's own lateness
 * is the sum of what delayed it (the window's excess, the slots' idle time, the last token's lag);
 * the first token's lag is held apart (it delays TTFT, not the throughput). Each counts when it is
 * above its noise: CLIENT_NOISE_SECONDS of wall time for the window's, LAG_NOISE_SECONDS of mean
 * lag for the server-timed ones.
 */
function delayLimit(
  d: ClientDelays,
  policy: Pick<Certification, "maxClientDelayShare">,
  timeScale: number,
): { seen: string; limit: string | null } {
  const pct = (v: number) => `${(v * 100).toFixed(1)} %`;
  const ofWindow = (v: number) =>
    d.windowSeconds > 0 && v / timeScale >= CLIENT_NOISE_SECONDS ? v / d.windowSeconds : 0;
  const meanLag = (v: number) => (d.timedRequests > 0 ? v / d.timedRequests : 0);
  const ofServer = (v: number) =>
    d.serverSeconds > 0 && meanLag(v) / timeScale >= LAG_NOISE_SECONDS ? v / d.serverSeconds : 0;
  const late = [
    { what: "the window's excess", share: ofWindow(d.excessSeconds) },
    { what: "the slots' idle time", share: ofWindow(d.idleSeconds) },
    { what: "the last token's lag", share: ofServer(d.lastTokenLagSeconds) },
  ].filter((x) => x.share > 0);
  const figure = late.reduce((a, x) => a + x.share, 0);
  const first = ofServer(d.firstTokenLagSeconds);
  const over: string[] = [];
  if (figure > policy.maxClientDelayShare)
    over.push(`they made the figure ${pct(figure)} late (${late.map((x) => `${x.what} ${pct(x.share)}`).join(", ")})`);
  if (first > policy.maxClientDelayShare)
    over.push(`the first token's lag was ${pct(first)} of the server's request time`);
  return {
    seen: delaysSeen(d, timeScale),
    limit: over.length > 0 ? `${over.join("; ")}, over ${pct(policy.maxClientDelayShare)}` : null,
  };
}

/** The client's delays in words (delayLimit). */
function delaysSeen(d: ClientDelays, timeScale: number): string {
  const pct = (v: number, of: number) => `${((of > 0 ? v / of : 0) * 100).toFixed(1)} %`;
  const window = `client delays: the window ${((d.excessSeconds / timeScale) * 1000).toFixed(0)} ms past the requests' span (${pct(d.excessSeconds, d.windowSeconds)}), slots idle ${pct(d.idleSeconds, d.windowSeconds)} between a request's end and their next`;
  if (d.timedRequests === 0) return `${window}; token lag not measured (the server stated no Server-Timing)`;
  const ms = (v: number) => `${((v / d.timedRequests / timeScale) * 1000).toFixed(0)} ms`;
  return `${window}; the first token read ${ms(d.firstTokenLagSeconds)} after the server wrote it (${pct(d.firstTokenLagSeconds, d.serverSeconds)} of its request time), the last ${ms(d.lastTokenLagSeconds)} (${pct(d.lastTokenLagSeconds, d.serverSeconds)}; means of ${d.timedRequests} requests the server timed)`;
}

/**
 * The client was not the limit: its event loop ran (a loop that stood still for a share of the
 * level delayed the level's end, and so its throughput, by up to that share) and its CPU was not
 * used up. The delay's p99 and max are named beside, for the latencies measured. A level spread
 * over client threads holds each thread (and the main thread, which records their samples) to the
 * same bounds; the detail names the busiest thread, or the one that was the limit.
 */
export function clientCheck(
  main: ClientEvidence,
  policy: Certification,
  runs: ClientEvidence[][] = [],
  delays?: { delays: ClientDelays; timeScale: number },
): CertificateCheck {
  const name = "client";
  const own = clientOwnCheck(main, policy, runs);
  if (!delays) return own;
  const d = delayLimit(delays.delays, policy, delays.timeScale);
  if (d.limit === null) return own.ok ? { ...own, detail: `${own.detail}; ${d.seen}` } : own;
  return {
    name,
    ok: false,
    detail: `${own.ok ? `client: ${own.detail}` : own.detail}; ${d.seen}: ${d.limit}: the figure measured the client's own delays`,
  };
}

/** The process and its threads: event loops and CPU (clientCheck). */
function clientOwnCheck(main: ClientEvidence, policy: Certification, runs: ClientEvidence[][]): CertificateCheck {
  const name = "client";
  const one = clientLimit(main, policy);
  const threads = runs.flatMap((run, r) => run.map((c, t) => ({ c, at: `thread ${t + 1} of run ${r + 1}` })));
  if (threads.length === 0)
    return one.limit
      ? { name, ok: false, detail: `client: ${one.seen}, over ${one.limit}: the benchmark process was the limit` }
      : { name, ok: true, detail: one.seen };
  const judged = threads.map((t) => ({ ...t, ...clientLimit(t.c, policy) }));
  const busiest = judged.reduce((b, t) => (t.c.cpuShare > b.c.cpuShare ? t : b));
  const shown = judged.find((j) => j.limit !== null) ?? busiest;
  const most = Math.max(...runs.map((r) => r.length));
  const spread = `spread over ${most} client threads; ${shown.limit === null ? "the busiest, " : ""}${shown.at}: ${shown.seen}; main thread: ${one.seen}`;
  if (one.limit !== null)
    return {
      name,
      ok: false,
      detail: `client: ${spread}; the main thread over ${one.limit}: the benchmark process was the limit`,
    };
  if (shown.limit !== null)
    return {
      name,
      ok: false,
      detail: `client: ${spread}; ${shown.at} over ${shown.limit}: the benchmark client was the limit`,
    };
  return { name, ok: true, detail: spread };
}

/** What a thread saw of itself, and the bound it went over (null: none). */
function clientLimit(c: ClientEvidence, policy: Certification): { seen: string; limit: string | null } {
  const pct = (v: number) => `${(v * 100).toFixed(0)} %`;
  const seen = `event loop stood still ${pct(c.stallShare)} of the level (delay p99 ${c.loopDelayP99Ms.toFixed(0)} ms, max ${c.loopDelayMaxMs.toFixed(0)} ms), CPU ${pct(c.cpuShare)} of a core`;
  // Under CLIENT_NOISE_SECONDS of stall or of work is a scheduler's and a timer's noise, whatever
  // share of a very short level it is.
  const stalled = c.stallShare > policy.maxClientStallShare && c.stallShare * c.wallSeconds >= CLIENT_NOISE_SECONDS;
  const busy = c.cpuShare > policy.maxClientCpuShare && c.cpuShare * c.wallSeconds >= CLIENT_NOISE_SECONDS;
  const limit = stalled ? pct(policy.maxClientStallShare) : busy ? `${pct(policy.maxClientCpuShare)} of a core` : null;
  return { seen, limit };
}

/**
 * Warm, the server the same process from the level's start to its end, and for a speculative
 * service the level's acceptance length at or above its floor (speculation that collapsed measures
 * another server than the one verified).
 */
export function steadyCheck(
  e: Pick<LevelEvidence, "before" | "after" | "warm"> & Partial<Pick<LevelEvidence, "acceptanceFloor">>,
  acceptanceLength: number | null = null,
): CertificateCheck {
  const name = "steady";
  if (!e.warm) return { name, ok: false, detail: "no warmup succeeded before the level" };
  const floor = e.acceptanceFloor ?? null;
  if (floor !== null && acceptanceLength !== null && acceptanceLength < floor)
    return {
      name,
      ok: false,
      detail: `speculative acceptance ${acceptanceLength.toFixed(2)} tokens per step at this level, below the floor ${floor}: the draft no longer helps`,
    };
  const accept =
    floor !== null && acceptanceLength !== null ? `; acceptance ${acceptanceLength.toFixed(2)} (floor ${floor})` : "";
  if (e.before.ok && e.after.ok) {
    const b = e.before.snapshot;
    const a = e.after.snapshot;
    if (
      b.processStartSeconds !== null &&
      a.processStartSeconds !== null &&
      a.processStartSeconds !== b.processStartSeconds
    )
      return { name, ok: false, detail: "the server restarted during the level (its process start time changed)" };
    if (a.generatedTokens < b.generatedTokens)
      return { name, ok: false, detail: "the server restarted during the level (its counters went back)" };
    return { name, ok: true, detail: `warm; the server ran through the level${accept}` };
  }
  return { name, ok: true, detail: `warm; no counters to tell a restart (the server watch saw none)${accept}` };
}

/**
 * Received: what each successful request's usage claims against what the client itself received.
 * Never more tokens than its max_tokens (ignore_eos asks for exactly that many; a server may stop
 * short at its context limit, never beyond), and never more than maxTokensPerChunk per output chunk
 * (content or reasoning) received: SGLang writes one event per stream_interval decode steps, each
 * step one token or a speculative step's accepted few; llama.cpp one event per token. Characters
 * bound nothing (a token may decode to none: a byte of a multi-byte character held back, a special
 * token skipped under ignore_eos), so they are named, not held against the claim. A level whose
 * every request failed received nothing: it is never certified, though its 0 tokens reconcile.
 */
export function receivedCheck(
  samples: RequestSample[],
  policy: Pick<Certification, "maxTokensPerChunk">,
): CertificateCheck {
  const name = "received";
  const ok = samples.filter((s) => s.error === null);
  if (ok.length === 0)
    return {
      name,
      ok: false,
      detail:
        samples.length === 0
          ? "no request was sent"
          : `every request failed (${count(samples.length)} of ${count(samples.length)}): nothing was received to certify`,
    };
  const sum = (f: (s: RequestSample) => number) => count(ok.reduce((a, s) => a + f(s), 0));
  const seen = `${sum((s) => s.completionTokens)} tokens claimed, ${sum((s) => s.outputChunks)} output chunks (${sum((s) => s.outputCharacters)} characters) received over ${count(ok.length)} requests`;
  const over = ok.filter((s) => s.completionTokens > s.maxTokens);
  const unseen = ok.filter((s) => s.completionTokens > s.outputChunks * policy.maxTokensPerChunk);
  const of = (n: RequestSample[]) => `${count(n.length)} of ${count(ok.length)} requests`;
  const broken = [
    over.length === 0
      ? ""
      : `${of(over)} claimed more tokens than max_tokens asked for (${over[0].completionTokens} for ${over[0].maxTokens})`,
    unseen.length === 0
      ? ""
      : `${of(unseen)} claimed more than ${policy.maxTokensPerChunk} tokens per output chunk received (${unseen[0].completionTokens} tokens in ${unseen[0].outputChunks})`,
  ].filter((b) => b.length > 0);
  if (broken.length === 0) return { name, ok: true, detail: seen };
  return {
    name,
    ok: false,
    detail: `the usage claimed tokens the client never received: ${broken.join("; ")} (${seen})`,
  };
}

const rate = (v: number) => Math.round(v).toLocaleString("en-US");
/** Whether LO is beyond TOLERANCE below HI, by more than the client's noise (the slower run's excess, wall clock). */
function apart(lo: BracketRun, hi: BracketRun, tolerance: number, timeScale: number): boolean {
  if (hi.tokensPerSecond <= 0 || lo.tokensPerSecond >= hi.tokensPerSecond * (1 - tolerance)) return false;
  const excessWall = (lo.seconds * (1 - lo.tokensPerSecond / hi.tokensPerSecond)) / timeScale;
  return excessWall >= CLIENT_NOISE_SECONDS;
}

/**
 * The server held steady over the sweep and over the level's repeats: the sweep's first level
 * measured again at its end within the tolerance (or the whole sweep measured a changing server,
 * never a knee), and the repeats within it of each other (or they are unstable, never a mean).
 */
export function changeCheck(
  runs: BracketRun[],
  bracket: Bracket | undefined,
  policy: Pick<Certification, "changeTolerance">,
  timeScale: number,
): { ok: boolean; detail: string } {
  const tol = policy.changeTolerance;
  const sorted = [...runs].sort((a, b) => a.tokensPerSecond - b.tokensPerSecond);
  if (sorted.length > 1 && apart(sorted[0], sorted[sorted.length - 1], tol, timeScale))
    return {
      ok: false,
      detail: `unstable: its ${runs.length} repeats measured ${runs.map((r) => rate(r.tokensPerSecond)).join(", ")} tok/s, more than ${(tol * 100).toFixed(0)} % apart: no mean of them is a figure`,
    };
  if (!bracket) return { ok: true, detail: "" };
  const { first, again } = bracket;
  const moved = `${bracket.name}: ${rate(first.tokensPerSecond)} -> ${rate(again.tokensPerSecond)} tok/s`;
  if (apart(again, first, tol, timeScale))
    return { ok: false, detail: `the server slowed down during the run (${moved}): a changing server, not a knee` };
  if (apart(first, again, tol, timeScale))
    return {
      ok: false,
      detail: `the server sped up during the run (${moved}): the first levels measured another server`,
    };
  return { ok: true, detail: `; measured again after the sweep, ${moved}` };
}

/** The certificate of a level from its samples, its runs and the evidence gathered around it. */
export function certify(
  level: {
    mode: "closed" | "open";
    level: number;
    samples: RequestSample[];
    runs: { samples: RequestSample[]; outputTokensPerSecond?: number; durationSeconds?: number }[];
    /** The schedule as the client kept it (levels.ts); its figures are null for a closed loop. */
    schedule: KeptSchedule;
    maxTokens: number;
    acceptanceLength?: number | null;
  },
  evidence: LevelEvidence,
  policy: Certification,
): Certificate {
  const ok = level.samples.filter((s) => s.error === null);
  const load =
    level.mode === "closed"
      ? // each run is its own closed loop: the worst run is the level's
        worstOf(
          level.runs.map((r) => closedLoopLoad(r.samples, level.level, policy.loadShortfall, evidence.serverLoad)),
        )
      : openLoopLoad(level.schedule, level.level, level.runs, policy.loadShortfall, evidence.timeScale);
  const runs = level.runs.map((r) => ({
    tokensPerSecond: r.outputTokensPerSecond ?? 0,
    seconds: r.durationSeconds ?? 0,
  }));
  const steady = steadyCheck(evidence, level.acceptanceLength ?? null);
  const change = changeCheck(runs, evidence.bracket, policy, evidence.timeScale);
  const checks: CertificateCheck[] = [
    reconcile(
      evidence,
      {
        requests: level.samples.length,
        errors: level.samples.length - ok.length,
        generatedTokens: ok.reduce((a, s) => a + s.completionTokens, 0),
        maxTokens: level.maxTokens,
      },
      policy.tokenTolerance,
    ),
    receivedCheck(level.samples, policy),
    load,
    clientCheck(evidence.client, policy, evidence.clientThreads, {
      delays: clientDelays(level.runs, level.mode, level.level),
      timeScale: evidence.timeScale,
    }),
    !steady.ok || change.ok
      ? { ...steady, detail: steady.detail + (steady.ok ? change.detail : "") }
      : { name: "steady", ...change },
  ];
  return { certified: checks.every((c) => c.ok), checks: checks.map((c) => withNotGathered(c, evidence.notGathered)) };
}

/** CHECK with what its run could not gather named in its detail. */
function withNotGathered(check: CertificateCheck, notGathered: LevelEvidence["notGathered"]): CertificateCheck {
  const missing = notGathered?.[check.name];
  return missing === undefined ? check : { ...check, detail: `${check.detail}; not gathered: ${missing}` };
}

function worstOf(checks: CertificateCheck[]): CertificateCheck {
  return checks.find((c) => !c.ok) ?? checks[0] ?? { name: "load", ok: false, detail: "no run" };
}

/** "certified" or "not certified: <the failed checks>": the end of a level's line. */
export function certificateText(c: Certificate | null | undefined): string {
  if (!c) return "not certified: no evidence was gathered";
  if (c.certified) return "certified";
  return `not certified: ${c.checks
    .filter((x) => !x.ok)
    .map((x) => (x.detail.startsWith(x.name) || x.detail.startsWith("not ") ? x.detail : `${x.name}: ${x.detail}`))
    .join("; ")}`;
}
