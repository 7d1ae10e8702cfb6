/**
 * One summary of a load level, for bench() and the comparison alike: from the raw samples of its
 * runs (repeats), the error rate against the budget, throughput per run and its confidence
 * interval, goodput under the SLO, latency percentiles, reasoning vs answer, and for an open loop
 * (a request rate) whether the server kept up. Pure functions: no clock, no network.
 *
 * An open-loop level offers requests at a rate whatever the server's state. While the server keeps
 * up, the level measures the offered load, not the server: its throughput is no capacity figure.
 * When the server falls behind, requests queue and it begins answering them more slowly than they
 * arrive: the achieved rate (successful requests begun, by their first tokens, per second) drops
 * below the rate they were sent at, and the level is saturated (saturation.ts).
 *
 * The client can fall behind too (its event loop, its connections): requests then leave later than
 * their schedule, and the server is offered less than planned. That is judged apart, planned against
 * sent (clientLimited), before sent against achieved (keptUp): a level the client could not offer
 * on schedule says nothing about the server, and is never its capacity.
 */
import { BenchPlanSchema } from "../base/schema";
import { certify, clientFellBehind, type Certificate, type KeptSchedule, type LevelEvidence } from "./certificate";
import { type Certification } from "../base/schema";
import { goodput, meanInterval, perTokenLatencies, type MeanInterval } from "./goodput";
import { type Slo } from "../base/schema";
import { errorRate, withinErrorBudget } from "./saturation";
import { answerStats, latencyStats, percentile, type AnswerStats, type LatencyStats } from "./stats";
import type { RequestSample } from "../base/samples";

/** One run of a level: its window (seconds from the run's start) and its slice of the level's requests. */
export interface RunWindow {
  startedAtSeconds: number;
  finishedAtSeconds: number;
  firstRequest: number;
  requestCount: number;
}

/** The raw measurement of one level, as bench() keeps it. */
export interface LevelSamples {
  /** closed (absent: closed): `concurrency` requests in flight; open: Poisson arrivals at `requestRate`. */
  mode?: "closed" | "open";
  concurrency?: number;
  /** Open loop: requests offered per second. */
  requestRate?: number;
  /** Seconds from the run's start to the level's first request and to its last request's end. */
  startedAtSeconds: number;
  finishedAtSeconds: number;
  /** Acceptance length read from the server right after the level (speculative services). */
  acceptanceLength: number | null;
  /** Every run's samples, run after run. */
  requests: RequestSample[];
  /** The repeats; absent: one run spanning the level. */
  runs?: RunWindow[];
  /** What the sweep gathered for the level's certificate (certificate.ts); absent: none (a hand-built level). */
  evidence?: LevelEvidence & { maxTokens: number };
}

/** Figures of one run of a level. */
export interface RunFigures {
  durationSeconds: number;
  outputTokensPerSecond: number;
  goodputTokensPerSecond: number;
  requests: number;
  errors: number;
  /** Open loop: requests per second the schedule planned for the requests sent (their due times); null: closed or < 2. */
  plannedRequestsPerSecond: number | null;
  /** Open loop: requests sent per second, as the Poisson draw realised the offered rate; null: closed or < 2. */
  sentRequestsPerSecond: number | null;
  /** Open loop: successful requests the server began answering (first token) per second; null: closed or < 2. */
  achievedRequestsPerSecond: number | null;
}

export interface SweepRun extends RunFigures {
  samples: RequestSample[];
}

export interface LevelSummary extends LatencyStats, AnswerStats {
  mode: "closed" | "open";
  /** The concurrency (closed loop) or the offered request rate per second (open loop). */
  level: number;
  /**
   * Requests in flight at once: the level of a closed loop; for a rate level, what the offered load
   * produced on average (the requests' summed time over the runs' time, Little's law).
   */
  concurrency: number;
  /** Open loop: the request rate offered per second; null for a concurrency level. */
  offeredRequestsPerSecond: number | null;
  /** Open loop: mean over the runs of the achieved rate (RunFigures). */
  achievedRequestsPerSecond: number | null;
  /** Open loop: the achieved rate stayed within the shortfall of the rate sent; false: saturated; null: closed or unknown. */
  keptUp: boolean | null;
  /** Open loop: means over the runs of the rates planned and sent (RunFigures). */
  plannedRequestsPerSecond: number | null;
  sentRequestsPerSecond: number | null;
  /** Open loop: 99th percentile over the level's requests of how late each left against its schedule; null: closed. */
  dispatchLagP99Seconds: number | null;
  /**
   * Open loop: the client fell behind its own schedule (clientFellBehind): the server was offered
   * less than planned, so the level measured the client, and neither keptUp nor its throughput
   * says anything of the server's capacity. Null: closed loop, or samples without a schedule.
   */
  clientLimited: boolean | null;
  requests: number;
  errors: number;
  /** errors / requests. */
  errorRate: number;
  /** False when the error rate exceeds the error budget: the level then counts for nothing. */
  withinErrorBudget: boolean;
  /** The first few distinct errors, for the report. */
  errorExamples: string[];
  /** Summed duration of the runs. */
  durationSeconds: number;
  /** Aggregate output tok/s: usage tokens of successful requests over a run's time, mean over the runs. */
  outputTokensPerSecond: number;
  /** Successful requests per second over the runs' time. */
  requestsPerSecond: number;
  /** Throughput per run: mean and 95 % interval over the repeats. */
  throughput: MeanInterval;
  /** Output tok/s of requests that met the SLO, per run: mean and interval. */
  goodput: MeanInterval;
  /** Every run met the SLO at its percentiles. */
  meetsSlo: boolean;
  /** ITL per token, (e2e - TTFT) / (tokens - 1), over all runs' successful requests. */
  itlPerTokenP50Seconds: number | null;
  itlPerTokenP95Seconds: number | null;
  acceptanceLength: number | null;
  /**
   * The level's validity certificate (certificate.ts): reconciled with the server's counters, the
   * load applied, the client not the limit, the server steady. Null: no evidence was gathered (a
   * level built by hand, or recorded before certificates), which is reported as not certified.
   */
  certificate: Certificate | null;
  runs: RunFigures[];
}

/** A level with its runs' raw samples (the comparison keeps them in its cache). */
export interface SweepLevel extends LevelSummary {
  runs: SweepRun[];
}

export interface LevelJudgement {
  errorBudget: number;
  slo: Slo;
  /** Open loop: the fraction the achieved rate may fall below the rate sent before the level is saturated. */
  rateShortfall: number;
  certification: Certification;
}

const DEFAULT_PLAN = BenchPlanSchema.parse({});
/** The schema's defaults (gate/base/schema.ts BenchPlanSchema): for callers that pass no plan. */
export const DEFAULT_JUDGEMENT: LevelJudgement = {
  errorBudget: DEFAULT_PLAN.errorBudget,
  slo: DEFAULT_PLAN.slo,
  rateShortfall: DEFAULT_PLAN.rateShortfall,
  certification: DEFAULT_PLAN.certification,
};

/** "C=8" or "2 req/s offered": how a level is named in verdicts and tables. */
export function levelName(l: { mode?: "closed" | "open"; level: number }): string {
  return l.mode === "open" ? `${l.level} req/s offered` : `C=${l.level}`;
}

/** "8 concurrent" or "2 req/s offered": a level in a sentence. */
export function levelPhrase(mode: "closed" | "open" | undefined, level: number | string): string {
  return mode === "open" ? `${level} req/s offered` : `${level} concurrent`;
}

/** (count - 1) over the span between the first and the last of the times; null with fewer than two. */
function spacingRate(times: number[]): number | null {
  if (times.length < 2) return null;
  const span = Math.max(...times) - Math.min(...times);
  return span > 0 ? (times.length - 1) / span : null;
}

/** How late each request left against its schedule (sent minus due), for those that have one. */
function dispatchLags(samples: RequestSample[]): number[] {
  return samples.flatMap((s) =>
    s.scheduledAtSeconds === undefined ? [] : [Math.max(0, s.startedAtSeconds - s.scheduledAtSeconds)],
  );
}

/** The figures of one run from its samples and its duration (seconds of host time). */
export function runSummary(
  samples: RequestSample[],
  durationSeconds: number,
  slo: Slo,
  mode: "closed" | "open" = "closed",
): SweepRun {
  const ok = samples.filter((s) => s.error === null);
  const tokens = ok.reduce((a, s) => a + s.completionTokens, 0);
  const open = mode === "open";
  return {
    durationSeconds,
    outputTokensPerSecond: durationSeconds > 0 ? tokens / durationSeconds : 0,
    goodputTokensPerSecond: goodput(samples, durationSeconds, slo).goodputTokensPerSecond,
    requests: samples.length,
    errors: samples.length - ok.length,
    plannedRequestsPerSecond: open
      ? spacingRate(samples.flatMap((s) => (s.scheduledAtSeconds === undefined ? [] : [s.scheduledAtSeconds])))
      : null,
    sentRequestsPerSecond: open ? spacingRate(samples.map((s) => s.startedAtSeconds)) : null,
    // A failed request was not answered: it lowers the achieved rate by not counting.
    achievedRequestsPerSecond: open
      ? spacingRate(ok.flatMap((s) => (s.ttftSeconds === null ? [] : [s.startedAtSeconds + s.ttftSeconds])))
      : null,
    samples,
  };
}

/** Summary of a level's runs (pure): the one summary of bench() and the comparison. */
export function summarizeSweepLevel(
  mode: "closed" | "open",
  level: number,
  runs: SweepRun[],
  slo: Slo,
  acceptanceLength: number | null,
  judgement: Omit<LevelJudgement, "slo"> = DEFAULT_JUDGEMENT,
  evidence?: LevelSamples["evidence"],
): SweepLevel {
  const all = runs.flatMap((r) => r.samples);
  const ok = all.filter((s) => s.error === null);
  const itl = perTokenLatencies(all);
  const counts = { requests: all.length, errors: all.length - ok.length };
  const duration = runs.reduce((a, r) => a + r.durationSeconds, 0);
  const throughput = meanInterval(runs.map((r) => r.outputTokensPerSecond));
  const { figures, schedule } = loadFigures(mode, level, runs, judgement.rateShortfall);
  return {
    mode,
    level,
    ...figures,
    ...counts,
    errorRate: errorRate(counts),
    withinErrorBudget: withinErrorBudget(counts, judgement.errorBudget),
    errorExamples: [...new Set(all.flatMap((s) => (s.error === null ? [] : [s.error])))].slice(0, 3),
    durationSeconds: duration,
    outputTokensPerSecond: throughput.mean,
    requestsPerSecond: duration > 0 ? ok.length / duration : 0,
    throughput,
    goodput: meanInterval(runs.map((r) => r.goodputTokensPerSecond)),
    meetsSlo: runs.length > 0 && runs.every((r) => goodput(r.samples, r.durationSeconds, slo).levelMeetsSlo),
    itlPerTokenP50Seconds: percentile(itl, 50),
    itlPerTokenP95Seconds: percentile(itl, 95),
    acceptanceLength,
    certificate: evidence
      ? certify(
          { mode, level, samples: all, runs, schedule, maxTokens: evidence.maxTokens, acceptanceLength },
          evidence,
          judgement.certification,
        )
      : null,
    runs,
    ...answerStats(all),
    ...latencyStats(all),
  };
}

/** What a level's loop says of its load: the concurrency, and an open loop's rates and schedule. */
type LoadFigures = Pick<
  LevelSummary,
  | "concurrency"
  | "offeredRequestsPerSecond"
  | "achievedRequestsPerSecond"
  | "keptUp"
  | "plannedRequestsPerSecond"
  | "sentRequestsPerSecond"
  | "dispatchLagP99Seconds"
  | "clientLimited"
>;

/**
 * The load a level's runs applied: a closed loop's is its concurrency; an open loop's the rates
 * planned, sent and achieved (means over the runs), the requests in flight they produced (Little's
 * law), and the schedule as the client kept it, judged here (clientLimited) and by the certificate.
 */
function loadFigures(
  mode: "closed" | "open",
  level: number,
  runs: SweepRun[],
  rateShortfall: number,
): { figures: LoadFigures; schedule: KeptSchedule } {
  const all = runs.flatMap((r) => r.samples);
  const duration = runs.reduce((a, r) => a + r.durationSeconds, 0);
  const open = mode === "open";
  const meanOf = (values: (number | null)[]) =>
    values.some((v) => v === null) || values.length === 0
      ? null
      : values.reduce<number>((a, v) => a + (v ?? 0), 0) / values.length;
  const planned = open ? meanOf(runs.map((r) => r.plannedRequestsPerSecond)) : null;
  const sent = open ? meanOf(runs.map((r) => r.sentRequestsPerSecond)) : null;
  const achieved = open ? meanOf(runs.map((r) => r.achievedRequestsPerSecond)) : null;
  const lags = Float64Array.from(dispatchLags(all)).sort();
  const lagP99 = open ? percentile(lags, 99) : null;
  const schedule: KeptSchedule = {
    planned,
    sent,
    lagP50: open ? percentile(lags, 50) : null,
    lagP99,
    runSeconds: runs.length > 0 ? duration / runs.length : 0,
  };
  const figures: LoadFigures = {
    concurrency: open ? (duration > 0 ? all.reduce((a, s) => a + s.e2eSeconds, 0) / duration : 0) : level,
    offeredRequestsPerSecond: open ? level : null,
    achievedRequestsPerSecond: achieved,
    keptUp: sent === null || achieved === null ? null : achieved >= sent * (1 - rateShortfall),
    plannedRequestsPerSecond: planned,
    sentRequestsPerSecond: sent,
    dispatchLagP99Seconds: lagP99,
    clientLimited: open ? clientFellBehind(schedule, rateShortfall) : null,
  };
  return { figures, schedule };
}

/** The runs of a level as bench() keeps them (one window when `runs` is absent). */
export function levelRuns(level: LevelSamples, slo: Slo): SweepRun[] {
  const windows = level.runs ?? [
    {
      startedAtSeconds: level.startedAtSeconds,
      finishedAtSeconds: level.finishedAtSeconds,
      firstRequest: 0,
      requestCount: level.requests.length,
    },
  ];
  return windows.map((w) =>
    runSummary(
      level.requests.slice(w.firstRequest, w.firstRequest + w.requestCount),
      Math.max(0, w.finishedAtSeconds - w.startedAtSeconds),
      slo,
      level.mode ?? "closed",
    ),
  );
}

/** A measured level summarised with its runs' samples (the comparison keeps them; the sweep's one summary). */
export function sweepLevelOf(level: LevelSamples, judgement: LevelJudgement): SweepLevel {
  const mode = level.mode ?? "closed";
  const value = mode === "open" ? level.requestRate : level.concurrency;
  if (value === undefined)
    throw new Error(`a ${mode}-loop level needs its ${mode === "open" ? "requestRate" : "concurrency"}`);
  const { slo } = judgement;
  return summarizeSweepLevel(
    mode,
    value,
    levelRuns(level, slo),
    slo,
    level.acceptanceLength,
    judgement,
    level.evidence,
  );
}

/** A summary without its runs' raw samples (they stay in the run's samples, not in reports). */
export function withoutSamples(level: SweepLevel): LevelSummary {
  return { ...level, runs: level.runs.map(({ samples: _samples, ...run }) => run) };
}

/** A level of bench() summarised (its raw samples stay in BenchSamples, not in the summary). */
export function summarizeLevel(
  level: LevelSamples,
  errorBudget: number,
  judgement: Partial<Omit<LevelJudgement, "errorBudget">> = {},
): LevelSummary {
  return withoutSamples(sweepLevelOf(level, { ...DEFAULT_JUDGEMENT, ...judgement, errorBudget }));
}
