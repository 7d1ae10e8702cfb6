/**
 * What a sweep may conclude, in one place: which levels count (the error budget) and where the
 * knee is. Failure is never capacity: a level whose error rate exceeds the budget is excluded from
 * everything that follows (saturation, sustained throughput, capacity plans, comparisons).
 *
 * The knee: walk the levels that kept the budget in order of concurrency; the knee is the first
 * level where going to the next one adds less than `minGain` of throughput per doubling of
 * concurrency (gain (T2/T1)^(1/log2(C2/C1)) - 1, so 32 -> 48 is judged like a doubling), or, with a
 * TTFT bound, the last level before TTFT p95 crosses it. When throughput still rises at the last
 * level, there is no knee: "not saturated up to C=N", and the sustained figure is that level's, a
 * lower bound, never called saturation.
 *
 * Noisy means (repeats give each level a 95 % interval): a step is judged by the range of gains its
 * two intervals allow. Clearly under `minGain`: a knee; clearly over: still rising; a range that
 * holds the threshold: the knee is undetermined ("run more repeats"), and the sustained figure is
 * the best level's mean, said so. A knee is never taken when a later level is clearly higher (its
 * gain per doubling over the knee reaches `minGain`): that level is not discarded for an earlier knee.
 */

import { certificateText, type Certificate } from "./certificate";

/** The fields of a level summary these rules read (LevelSummary has them all). */
export interface LevelFigures {
  concurrency: number;
  requests: number;
  errors: number;
  outputTokensPerSecond: number;
  ttftP95Seconds: number | null;
  /** Successful requests with no visible content (reasoning used the budget); absent: not counted. */
  answerlessRequests?: number;
  /** The throughput's 95 % interval over the repeats (levels.ts); absent or null half-width: one run, judged by the mean. */
  throughput?: { halfWidth: number | null };
}

/**
 * A level whose successful requests all produced no visible answer (reasoning used each one's
 * budget) measured no answer at all: by the gate's rule (no answer is no generation) it is no
 * capacity, however many tokens it streamed.
 */
export function answerless(level: Pick<LevelFigures, "requests" | "errors" | "answerlessRequests">): boolean {
  const ok = level.requests - level.errors;
  return ok > 0 && level.answerlessRequests === ok;
}

/** Error rate of a level: failed requests over requests sent (a level that sent nothing failed). */
export function errorRate(level: Pick<LevelFigures, "requests" | "errors">): number {
  return level.requests > 0 ? level.errors / level.requests : 1;
}

/** Whether a level kept the error budget (a fraction, 0.01 = 1 %). */
export function withinErrorBudget(level: Pick<LevelFigures, "requests" | "errors">, budget: number): boolean {
  return level.requests > 0 && errorRate(level) <= budget;
}

/** Throughput gain from one level to the next, normalised to one doubling of concurrency. */
export function gainPerDoubling(from: LevelFigures, to: LevelFigures): number {
  if (from.outputTokensPerSecond <= 0) return to.outputTokensPerSecond > 0 ? Infinity : 0;
  const doublings = Math.log2(to.concurrency / from.concurrency);
  const ratio = to.outputTokensPerSecond / from.outputTokensPerSecond;
  if (doublings <= 0) return ratio - 1;
  return Math.pow(ratio, 1 / doublings) - 1;
}

/** The gains per doubling a step's two throughput intervals allow: [low, high] (both the mean's without intervals). */
export function gainRange(from: LevelFigures, to: LevelFigures): [number, number] {
  const h1 = from.throughput?.halfWidth ?? 0;
  const h2 = to.throughput?.halfWidth ?? 0;
  const at = (t1: number, t2: number) =>
    gainPerDoubling(
      { ...from, outputTokensPerSecond: Math.max(0, t1) },
      { ...to, outputTokensPerSecond: Math.max(0, t2) },
    );
  return [
    at(from.outputTokensPerSecond + h1, to.outputTokensPerSecond - h2),
    at(from.outputTokensPerSecond - h1, to.outputTokensPerSecond + h2),
  ];
}

const tps = (l: LevelFigures) =>
  `${l.outputTokensPerSecond.toFixed(1)}${l.throughput?.halfWidth == null ? "" : ` ± ${l.throughput.halfWidth.toFixed(1)}`} tok/s`;
const pct = (v: number) => (Number.isFinite(v) ? `${v >= 0 ? "+" : ""}${(v * 100).toFixed(0)} %` : "unbounded");

export interface KneeOptions {
  errorBudget: number;
  minGain: number;
  maxTtftP95Seconds?: number;
  /** Levels whose certificate failed are excluded (BenchPlan certification.require); absent: false. */
  requireCertified?: boolean;
}

export interface Knee {
  /** True when a knee was found among the levels that kept the error budget. */
  saturated: boolean;
  /** The knee's concurrency; null when not saturated or no level counts. */
  saturationConcurrency: number | null;
  /** The knee's throughput, or, not saturated, the last counted level's (a lower bound); 0 when none counts. */
  sustainedOutputTokensPerSecond: number;
  /** The concurrency of the level the sustained figure comes from (null when none counts). */
  sustainedConcurrency: number | null;
  /** Concurrency levels excluded because they broke the error budget. */
  failedLevels: number[];
  /** Levels (within the budget) excluded because no request produced a visible answer. */
  answerlessLevels: number[];
  /** One sentence: "saturation at C=32 (...)", "not saturated up to C=64", "no level ...". */
  verdict: string;
  /** The throughput intervals could not tell a step's gain from `minGain`: no knee is claimed; run more repeats. */
  undetermined?: boolean;
  /** closed: levels are concurrencies; open: offered request rates. */
  mode: "closed" | "open";
  /** The level the sustained figure comes from, concurrency or offered rate (null when none counts). */
  sustainedLevel: number | null;
  /**
   * Open loop: every rate ran, within the error budget and on the client's schedule, and the server
   * kept up with each: no saturation within the rates tried, a healthy result (not "nothing measured").
   */
  keptUpWithEveryRate?: boolean;
  /** Open loop: rates the client could not offer on schedule (levels.ts clientLimited): excluded, never capacity. */
  clientLimitedLevels?: number[];
  /** Levels whose certificate failed (certificate.ts), with requireCertified: excluded, never capacity. */
  uncertifiedLevels?: number[];
}

/**
 * The levels in order of their key (concurrency or rate), split by the one rule: over the error budget
 * they count for nothing, and so do the levels whose requests produced no visible answer.
 */
function splitByBudget<L extends Parameters<typeof answerless>[0] & Parameters<typeof withinErrorBudget>[0]>(
  levels: readonly L[],
  key: (l: L) => number,
  errorBudget: number,
): { failedLevels: number[]; answerlessLevels: number[]; ok: L[]; budget: string } {
  const sorted = [...levels].sort((a, b) => key(a) - key(b));
  const kept = sorted.filter((l) => withinErrorBudget(l, errorBudget));
  return {
    failedLevels: sorted.filter((l) => !withinErrorBudget(l, errorBudget)).map(key),
    answerlessLevels: kept.filter(answerless).map(key),
    ok: kept.filter((l) => !answerless(l)),
    budget: `${(errorBudget * 100).toFixed(errorBudget * 100 < 1 ? 2 : 0)} %`,
  };
}

/** Why levels of a concurrency sweep are left out: over the error budget, or without a visible answer. */
function closedExclusions(failedLevels: number[], answerlessLevels: number[], budget: string): string {
  return (
    (failedLevels.length > 0
      ? `; C=${failedLevels.join(", C=")} broke the error budget of ${budget} and are excluded`
      : "") +
    (answerlessLevels.length > 0
      ? `; C=${answerlessLevels.join(", C=")} produced no visible answer (reasoning used every request's budget) and ${answerlessLevels.length > 1 ? "are" : "is"} excluded`
      : "")
  );
}

/** Where the walk up a concurrency sweep stops: the level whose figure is sustained, and why. */
interface KneePoint {
  level: LevelFigures;
  saturated: boolean;
  why: string;
  undetermined?: true;
}

/** A sweep that supports no figure: nothing saturated, nothing sustained, the verdict says why. */
function noFigure(
  mode: Knee["mode"],
  failedLevels: Knee["failedLevels"],
  answerlessLevels: Knee["answerlessLevels"],
  verdict: string,
): Knee {
  return {
    saturated: false,
    saturationConcurrency: null,
    sustainedOutputTokensPerSecond: 0,
    sustainedConcurrency: null,
    failedLevels,
    answerlessLevels,
    mode,
    sustainedLevel: null,
    verdict,
  };
}

export function findKnee(levels: readonly LevelFigures[], opts: KneeOptions): Knee {
  const { failedLevels, answerlessLevels, ok, budget } = splitByBudget(levels, (l) => l.concurrency, opts.errorBudget);
  const failedNote = closedExclusions(failedLevels, answerlessLevels, budget);
  if (ok.length === 0)
    return noFigure(
      "closed",
      failedLevels,
      answerlessLevels,
      answerlessLevels.length > 0
        ? `no level produced a visible answer within the error budget of ${budget}: no throughput can be claimed${failedNote}`
        : `no level kept the error budget of ${budget}: no throughput can be claimed${levels.length === 0 ? " (no level ran)" : ""}`,
    );
  const { level: l, saturated, why, undetermined } = walkToKnee(ok, opts);
  return {
    saturated,
    saturationConcurrency: saturated ? l.concurrency : null,
    sustainedOutputTokensPerSecond: l.outputTokensPerSecond,
    sustainedConcurrency: l.concurrency,
    failedLevels,
    answerlessLevels,
    verdict: `${why}${failedNote}`,
    mode: "closed",
    sustainedLevel: l.concurrency,
    ...(undetermined ? { undetermined } : {}),
  };
}

/**
 * Up the counted levels (in order): the knee is the last level before TTFT p95 crosses its bound,
 * or the first whose step to the next adds less than minGain per doubling (no later level clearly
 * higher); an interval that holds the threshold claims nothing; none: not saturated at the last.
 */
function walkToKnee(ok: readonly LevelFigures[], opts: KneeOptions): KneePoint {
  const bound = opts.maxTtftP95Seconds;
  for (let i = 0; i < ok.length; i++) {
    const level = ok[i];
    if (bound !== undefined && level.ttftP95Seconds !== null && level.ttftP95Seconds > bound) {
      const knee = i > 0 ? ok[i - 1] : level;
      const why = `saturation at C=${knee.concurrency}: TTFT p95 crosses ${bound} s at C=${level.concurrency} (${level.ttftP95Seconds.toFixed(2)} s)`;
      return { level: knee, saturated: true, why };
    }
    if (i + 1 >= ok.length) continue;
    const next = ok[i + 1];
    const gain = gainPerDoubling(level, next);
    const [low, high] = gainRange(level, next);
    // A later level clearly higher than this one: whatever this step says, this is no knee.
    const laterHigher = ok.slice(i + 2).some((later) => gainRange(level, later)[0] >= opts.minGain);
    if (laterHigher || low >= opts.minGain) continue;
    if (high < opts.minGain) {
      const why = `saturation at C=${level.concurrency}: going to C=${next.concurrency} adds ${(gain * 100).toFixed(1)} % per doubling (< ${(opts.minGain * 100).toFixed(0)} %)`;
      return { level, saturated: true, why };
    }
    // The intervals hold the threshold: neither a knee nor a rise can be claimed.
    const best = ok.reduce((a, b) => (b.outputTokensPerSecond > a.outputTokensPerSecond ? b : a));
    return {
      level: best,
      saturated: false,
      why: `knee undetermined, run more repeats: from C=${level.concurrency} (${tps(level)}) to C=${next.concurrency} (${tps(next)}) the gain per doubling lies between ${pct(low)} and ${pct(high)}, which cannot be told from the ${(opts.minGain * 100).toFixed(0)} % threshold; the sustained figure is the best level's mean (C=${best.concurrency}), not a knee`,
      undetermined: true,
    };
  }
  const last = ok[ok.length - 1];
  const why = `not saturated up to C=${last.concurrency}: throughput still rises; ${last.outputTokensPerSecond.toFixed(1)} tok/s there is a lower bound`;
  return { level: last, saturated: false, why };
}

/** The fields of an open-loop level these rules read (LevelSummary has them all). */
export interface RateFigures {
  /** The offered request rate per second. */
  level: number;
  requests: number;
  errors: number;
  outputTokensPerSecond: number;
  achievedRequestsPerSecond: number | null;
  /** The achieved rate kept up with the rate sent (levels.ts); false: saturated; null: unknown. */
  keptUp: boolean | null;
  /** The client fell behind its schedule (levels.ts): the level measured the client, not the server. */
  clientLimited?: boolean | null;
  plannedRequestsPerSecond?: number | null;
  sentRequestsPerSecond?: number | null;
  dispatchLagP99Seconds?: number | null;
  answerlessRequests?: number;
}

const fixed = (v: number | null | undefined, digits: number) => (v == null ? "n/a" : v.toFixed(digits));

/**
 * Open loop: a rate level the server kept up with measured the offered load, not the server, so
 * its throughput is no capacity figure. A level (within the error budget) where the server fell
 * behind is saturated: the best throughput among those is the sustained figure. With none, nothing
 * is claimed (sustained 0) and the verdict says to offer more. A level where the client fell behind
 * its own schedule is neither: the client's lag is never the server's capacity, so it is excluded,
 * named, and keeps the run from reading as "kept up with every rate".
 */
export function findRateSaturation(levels: readonly RateFigures[], opts: Pick<KneeOptions, "errorBudget">): Knee {
  const { failedLevels, answerlessLevels, ok, budget } = splitByBudget(levels, (l) => l.level, opts.errorBudget);
  const failedNote = rateExclusions(failedLevels, answerlessLevels, budget);
  const none = (verdict: string): Knee => noFigure("open", failedLevels, answerlessLevels, `${verdict}${failedNote}`);
  if (ok.length === 0)
    return none(
      `no rate level kept the error budget of ${budget}: no throughput can be claimed${levels.length === 0 ? " (no level ran)" : ""}`,
    );
  const limited = ok.filter((l) => l.clientLimited === true);
  const offered = ok.filter((l) => l.clientLimited !== true);
  const clientNote = clientLimitedNote(limited);
  const clientLimitedLevels = limited.map((l) => l.level);
  const behind = offered.filter((l) => l.keptUp === false);
  if (behind.length === 0) {
    if (offered.length === 0)
      return {
        ...none(`no rate level was offered on schedule, so none measured the server${clientNote}`),
        clientLimitedLevels,
      };
    const last = offered[offered.length - 1];
    const every = limited.length === 0 && failedLevels.length === 0 && answerlessLevels.length === 0;
    return {
      ...none(
        `not saturated up to ${last.level} req/s offered: the server kept up with every rate ${limited.length === 0 ? "tried" : "the client offered on schedule"} (no saturation found within them), so ${last.outputTokensPerSecond.toFixed(1)} tok/s there is the offered load's, not a capacity figure; to find the capacity, offer a higher rate${clientNote}`,
      ),
      keptUpWithEveryRate: every && offered.every((l) => l.keptUp === true),
      clientLimitedLevels,
    };
  }
  const best = behind.reduce((a, b) => (b.outputTokensPerSecond > a.outputTokensPerSecond ? b : a));
  const achieved = best.achievedRequestsPerSecond;
  return {
    saturated: true,
    saturationConcurrency: null,
    sustainedOutputTokensPerSecond: best.outputTokensPerSecond,
    sustainedConcurrency: null,
    failedLevels,
    answerlessLevels,
    verdict: `saturation at ${best.level} req/s offered: the server began only ${achieved === null ? "n/a" : achieved.toFixed(2)} req/s, so ${best.outputTokensPerSecond.toFixed(1)} tok/s there is its capacity${failedNote}${clientNote}`,
    mode: "open",
    sustainedLevel: best.level,
    clientLimitedLevels,
  };
}

/** Why rate levels are left out: over the error budget, or without a visible answer. */
function rateExclusions(failedLevels: number[], answerlessLevels: number[], budget: string): string {
  return (
    (failedLevels.length > 0
      ? `; ${failedLevels.join(", ")} req/s offered broke the error budget of ${budget} and ${failedLevels.length > 1 ? "are" : "is"} excluded`
      : "") +
    (answerlessLevels.length > 0
      ? `; ${answerlessLevels.join(", ")} req/s offered produced no visible answer (reasoning used every request's budget) and ${answerlessLevels.length > 1 ? "are" : "is"} excluded`
      : "")
  );
}

/** The rates the client could not offer on schedule, each with its figures: excluded, never capacity. */
function clientLimitedNote(limited: readonly RateFigures[]): string {
  if (limited.length === 0) return "";
  const each = limited.map(
    (l) =>
      `${l.level} req/s offered the client fell behind its schedule (sent ${fixed(l.sentRequestsPerSecond, 2)} of ${fixed(l.plannedRequestsPerSecond, 2)} req/s planned, dispatch lag p99 ${fixed(l.dispatchLagP99Seconds, 3)} s)`,
  );
  return `; at ${each.join(", at ")}: the client's lag, not the server's capacity, so ${limited.length > 1 ? "they are" : "it is"} excluded; offer ${limited.length > 1 ? "those rates" : "that rate"} from several clients`;
}

/**
 * A level that would count (within the error budget, with visible answers, offered on schedule) but
 * whose certificate failed: its figure is not proven. The others are excluded by their own rules.
 */
export function uncertifiedFigure(
  l: Parameters<typeof answerless>[0] & { certificate?: Certificate | null; clientLimited?: boolean | null },
  errorBudget: number,
): boolean {
  return (
    l.certificate?.certified === false &&
    withinErrorBudget(l, errorBudget) &&
    !answerless(l) &&
    // A rate the client could not offer on schedule is excluded by its own rule, which names the lag.
    l.clientLimited !== true
  );
}

/** The certificate's received check failed: the usage claimed tokens the client never received. */
function unreceived(c: Certificate | null | undefined): boolean {
  return c?.checks.some((x) => x.name === "received" && !x.ok) === true;
}

type JudgedLevel = RateFigures & {
  mode?: "closed" | "open";
  ttftP95Seconds: number | null;
  throughput?: { halfWidth: number | null };
  certificate?: Certificate | null;
};

/**
 * The one judgement of a sweep: the knee for concurrencies, saturation by shortfall for rates. With
 * requireCertified, a level whose certificate failed is judged by neither: a figure no check proves
 * (a server whose counters disagree, a load not applied, a client at its limit) is never capacity.
 */
export function judgeLevels(levels: readonly JudgedLevel[], opts: KneeOptions): Knee {
  // Tokens the client never received are no figure even where certificates are only reported.
  const excluded = (l: JudgedLevel) => opts.requireCertified === true || unreceived(l.certificate);
  const uncertified = levels.filter((l) => uncertifiedFigure(l, opts.errorBudget) && excluded(l));
  const kept = levels.filter((l) => !uncertified.includes(l));
  const open = levels.length > 0 && levels.every((l) => l.mode === "open");
  const name = (l: JudgedLevel) => (open ? `${l.level} req/s offered` : `C=${l.level}`);
  const judged =
    kept.length > 0 && open
      ? findRateSaturation(kept, opts)
      : findKnee(
          kept.map((l) => ({ ...l, concurrency: l.level })),
          opts,
        );
  if (uncertified.length === 0) return { ...judged, uncertifiedLevels: [] };
  // Levels failed for one reason (a server that changed mid-run fails them all) are named once.
  const reasons = new Map<string, string[]>();
  for (const l of uncertified) {
    const text = certificateText(l.certificate);
    reasons.set(text, [...(reasons.get(text) ?? []), name(l)]);
  }
  const why = [...reasons].map(([text, names]) => `${names.join(", ")} ${text}`).join("; ");
  if (!kept.some((l) => withinErrorBudget(l, opts.errorBudget) && !answerless(l)))
    return {
      ...judged,
      mode: open ? "open" : "closed",
      verdict: `no level was certified (${why}): no throughput can be claimed${kept.length > 0 ? `; ${judged.verdict}` : ""}`,
      keptUpWithEveryRate: false,
      uncertifiedLevels: uncertified.map((l) => l.level),
    };
  return {
    ...judged,
    verdict: `${judged.verdict}; excluded as not certified: ${why}`,
    keptUpWithEveryRate: false,
    uncertifiedLevels: uncertified.map((l) => l.level),
  };
}
