/**
 * The job's live truth against the plan: from what the job has recorded and the tokens/s it gets over
 * the last minutes, its ETA, whether it runs at the throughput the stack certified, whether it makes
 * the deadline and how many more hosts of the measured kind it needs (the plan's own arithmetic,
 * capacity()), and how big its output will be. Pure: the clock and the counts come in.
 */
import { capacity, SECONDS_PER_DAY } from "../gate/plan/capacity";

/** Within this share of the certified throughput the job is "on plan". */
export const ON_PLAN_TOLERANCE = 0.05;

/** What the job has done so far, in the host's time. */
export interface JobProgressCounts {
  /** Requests in the input. */
  total: number;
  /** Recorded in the output. */
  succeeded: number;
  /** Recorded in the errors file. */
  failed: number;
  /** Completion tokens of the recorded successes (usage.completion_tokens). */
  tokens: number;
  /** Bytes of the output file's lines. */
  outputBytes: number;
  /** Tokens/s over the last minutes (host time); null before any time has passed. */
  tokensPerSecond: number | null;
}

export interface PlanBasis {
  /** The sustained tok/s the stack certified for what the job runs against; null when unknown. */
  certifiedTokensPerSecond: number | null;
  /** Hosts the job runs on (the fleet's workers, or 1). */
  hosts: number;
  /** The deadline, epoch ms; null without --deadline. */
  deadlineMs: number | null;
}

export interface Forecast {
  done: number;
  remaining: number;
  tokensPerSecond: number | null;
  /** Seconds (host time) until the last request is recorded at the current rate; null without a rate. */
  etaSeconds: number | null;
  /** Job rate / certified rate; null when either is unknown. */
  ofPlan: number | null;
  planVerdict: string;
  /** The output file's projected size when every request has succeeded; null before the first. */
  projectedOutputBytes: number | null;
  deadline: { meets: boolean; daysLeft: number; hostsNeeded: number | null; moreHosts: number | null } | null;
  deadlineVerdict: string | null;
}

/** Where the job stands at NOW (epoch ms, host time) against the plan. */
export function forecast(c: JobProgressCounts, plan: PlanBasis, now: number): Forecast {
  const done = c.succeeded + c.failed;
  const remaining = Math.max(0, c.total - done);
  const perCompletion = c.succeeded > 0 ? c.tokens / c.succeeded : null;
  const rate = c.tokensPerSecond !== null && c.tokensPerSecond > 0 ? c.tokensPerSecond : null;
  const etaSeconds =
    remaining === 0 ? 0 : rate !== null && perCompletion !== null ? (remaining * perCompletion) / rate : null;
  const certified = plan.certifiedTokensPerSecond;
  const ofPlan = rate !== null && certified !== null && certified > 0 ? rate / certified : null;
  const deadline = plan.deadlineMs === null ? null : deadlineOf(plan, remaining, perCompletion, rate, etaSeconds, now);
  return {
    done,
    remaining,
    tokensPerSecond: rate,
    etaSeconds,
    ofPlan,
    planVerdict: planVerdict(ofPlan, certified),
    projectedOutputBytes: c.succeeded > 0 ? Math.round((c.outputBytes / c.succeeded) * (c.total - c.failed)) : null,
    deadline,
    deadlineVerdict: deadline === null ? null : deadlineVerdict(deadline, etaSeconds, plan.hosts),
  };
}

function planVerdict(ofPlan: number | null, certified: number | null): string {
  if (certified === null) return "no certified throughput to compare with (the stack measured none)";
  if (ofPlan === null) return `the stack measured ${fmt(certified)} tok/s; no rate yet`;
  const gap = Math.round(Math.abs(1 - ofPlan) * 100);
  if (Math.abs(1 - ofPlan) <= ON_PLAN_TOLERANCE) return `on plan (${fmt(certified)} tok/s measured by the stack)`;
  return `${gap} % ${ofPlan < 1 ? "below" : "above"} the ${fmt(certified)} tok/s the stack measured`;
}

/** Whether the rest of the job fits before the deadline, and the hosts of the measured kind that make it fit. */
function deadlineOf(
  plan: PlanBasis,
  remaining: number,
  perCompletion: number | null,
  rate: number | null,
  etaSeconds: number | null,
  now: number,
): NonNullable<Forecast["deadline"]> {
  const daysLeft = ((plan.deadlineMs ?? now) - now) / 1000 / SECONDS_PER_DAY;
  if (remaining === 0) return { meets: true, daysLeft, hostsNeeded: plan.hosts, moreHosts: 0 };
  if (etaSeconds === null || rate === null || perCompletion === null || daysLeft <= 0)
    return { meets: false, daysLeft, hostsNeeded: null, moreHosts: null };
  // The plan's arithmetic, fed by what one host of this kind really gets in this job.
  const p = capacity(rate / plan.hosts, {
    completions: remaining,
    outputTokensPerCompletion: perCompletion,
    deadlineDays: daysLeft,
  });
  const hostsNeeded = p.hostsForDeadline;
  return {
    meets: etaSeconds <= daysLeft * SECONDS_PER_DAY,
    daysLeft,
    hostsNeeded,
    moreHosts: hostsNeeded === null ? null : Math.max(0, hostsNeeded - plan.hosts),
  };
}

function deadlineVerdict(d: NonNullable<Forecast["deadline"]>, etaSeconds: number | null, hosts: number): string {
  if (d.daysLeft <= 0) return "the deadline has passed";
  if (etaSeconds === null) return `deadline in ${d.daysLeft.toFixed(1)} days; no rate yet to judge it`;
  const etaDays = etaSeconds / SECONDS_PER_DAY;
  if (d.meets) return `makes the deadline: ${etaDays.toFixed(1)} of ${d.daysLeft.toFixed(1)} days left`;
  const more = d.moreHosts ?? 0;
  return `misses the deadline by ${(etaDays - d.daysLeft).toFixed(1)} days: ${more} more host${more === 1 ? "" : "s"} of the measured kind (${d.hostsNeeded} in all, ${hosts} now)`;
}

function fmt(n: number): string {
  return Math.round(n).toLocaleString("en-US");
}

/** Seconds as "3 d 4 h", "2 h 5 min", "42 s". */
export function duration(seconds: number | null): string {
  if (seconds === null) return "unknown";
  const s = Math.round(seconds);
  if (s >= 86_400) return `${Math.floor(s / 86_400)} d ${Math.floor((s % 86_400) / 3600)} h`;
  if (s >= 3600) return `${Math.floor(s / 3600)} h ${Math.floor((s % 3600) / 60)} min`;
  if (s >= 60) return `${Math.floor(s / 60)} min ${s % 60} s`;
  return `${s} s`;
}

/** Tokens/s over the last WINDOW ms: cumulative token counts sampled as results are recorded. */
export class RateWindow {
  private readonly samples: { at: number; tokens: number }[] = [];

  /** TOKENS: the count at START (what earlier runs recorded is no part of this run's rate). */
  constructor(
    private readonly windowMs: number,
    start: number,
    tokens = 0,
  ) {
    this.samples.push({ at: start, tokens });
  }

  add(at: number, cumulativeTokens: number): void {
    // A sample closer than a thousandth of the window to the one before the last replaces the last:
    // at most two a thousandth are held at any rate (one per result was 135,000 at 450 results/s
    // over 5 minutes).
    const n = this.samples.length;
    if (n > 1 && at - this.samples[n - 2].at < this.windowMs / 1000)
      this.samples[n - 1] = { at, tokens: cumulativeTokens };
    else this.samples.push({ at, tokens: cumulativeTokens });
    // Keep one sample at or before the window's start, so the rate spans the whole window.
    while (this.samples.length > 2 && this.samples[1].at <= at - this.windowMs) this.samples.shift();
  }

  /** Samples held (at most about 2,000: bounded by the window's thousandths, not the results recorded). */
  get held(): number {
    return this.samples.length;
  }

  /** Tokens per second (of the clock given) between the window's first sample and NOW. */
  rate(now: number): number | null {
    const first = this.samples[0];
    const last = this.samples[this.samples.length - 1];
    const seconds = (now - first.at) / 1000;
    return seconds > 0 ? (last.tokens - first.tokens) / seconds : null;
  }
}
