/**
 * The split of a mixed fleet, from measurement (issue 29 point 2): interactive traffic (people
 * waiting: a TTFT and an inter-token latency objective) on the service that holds the most users
 * per host within the objective, the batch job (tokens to a deadline) on the service that sustains
 * the most tok/s, each group sized from each service's measured curve on one host (the comparison's
 * sweep: `gpuhost compare --json`, the story demo's story-compare.json, or a stack's
 * gpuHosts.<host>.comparison). Beside it, the homogeneous fleets (every host the same service, the
 * classes still on hosts of their own), so the user sees what mixing saves, or that it saves nothing.
 *
 * The model, said plainly: a host serves one class; a class's hosts share its load evenly (SMG in
 * front); a level counts only within the error budget. Figures are the curve's own time (a
 * simulated host's host time, see its timeNote). Pure: no I/O.
 */
import { z } from "zod";

const PointSchema = z
  .object({
    level: z.number().positive(),
    outputTokensPerSecond: z.number().nonnegative(),
    ttftP95Seconds: z.number().nullable(),
    itlPerTokenP95Seconds: z.number().nullable(),
    errors: z.number().int().nonnegative(),
    withinErrorBudget: z.boolean().optional(),
    mode: z.enum(["closed", "open"]).optional(),
  })
  .loose();
const CurveSchema = z
  .object({ service: z.string(), failure: z.unknown().optional(), sweep: z.array(PointSchema) })
  .loose();
/** The part of a comparison (its JSON report or a stack's comparison output) the split reads. */
export const CurvesSchema = z.object({ services: z.array(CurveSchema).min(1) }).loose();
export type ServiceCurve = z.infer<typeof CurveSchema>;

export interface InteractiveDemand {
  /** Concurrent users, each with one request in flight. */
  users: number;
  ttftP95Seconds: number;
  /** Per-token inter-token latency, p95 (a speculative chunk of k tokens counts k gaps). */
  itlP95Seconds: number;
}
export interface BatchDemand {
  completions: number;
  outputTokensPerCompletion: number;
  deadlineDays: number;
}

/** One class's choice of service: hosts, the concurrency each runs at, and why. */
export interface GroupChoice {
  service: string;
  hosts: number;
  perHostConcurrency: number;
  /** Interactive: users one host holds within the objective; batch: sustained tok/s of one host. */
  perHost: number;
  why: string;
}

export interface Homogeneous {
  service: string;
  /** null: this service cannot carry one of the classes (no level meets the objective, or none measured). */
  hosts: number | null;
  interactiveHosts: number | null;
  batchHosts: number | null;
}

export interface MixedPlan {
  interactive: GroupChoice | null;
  batch: GroupChoice | null;
  /** Hosts of the mixed fleet; null when a class has no service that can carry it. */
  hosts: number | null;
  homogeneous: Homogeneous[];
  /** The best homogeneous fleet minus the mixed one (0: mixing does not win). */
  savedHosts: number | null;
  verdict: string;
}

/**
 * The points a class is sized from: closed-loop levels within the error budget, as the host's own
 * verdict counts them (errors inside the budget included: dropping them shrank a batch class from
 * 128 in flight to 16). A point that does not say whether it kept the budget counts only without errors.
 */
const counted = (c: ServiceCurve) =>
  c.failure ? [] : c.sweep.filter((p) => (p.mode ?? "closed") === "closed" && (p.withinErrorBudget ?? p.errors === 0));

/** The interactive objective, judged on a TTFT p95 and an ITL p95 (planned or measured); a missing one misses it. */
export function meetsObjective(ttftP95: number | null, itlP95: number | null, d: InteractiveDemand): boolean {
  return ttftP95 !== null && itlP95 !== null && ttftP95 <= d.ttftP95Seconds && itlP95 <= d.itlP95Seconds;
}

/** The batch job's tokens over its deadline's seconds: the throughput that meets the deadline. */
export function neededTokensPerSecond(b: BatchDemand): number {
  return (b.completions * b.outputTokensPerCompletion) / (b.deadlineDays * 86_400);
}

/** Days the batch job takes at TOKENS_PER_SECOND; null at none. */
export function daysForJob(tokensPerSecond: number, b: BatchDemand): number | null {
  return tokensPerSecond > 0 ? (b.completions * b.outputTokensPerCompletion) / (tokensPerSecond * 86_400) : null;
}

/** Users one host holds within the objective (the highest measured level meeting both latencies), or null. */
function interactiveCapacity(c: ServiceCurve, d: InteractiveDemand): number | null {
  const ok = counted(c).filter((p) => meetsObjective(p.ttftP95Seconds, p.itlPerTokenP95Seconds, d));
  return ok.length === 0 ? null : Math.max(...ok.map((p) => p.level));
}

/** The highest sustained tok/s of one host and the level it was measured at, or null. */
function batchCapacity(c: ServiceCurve): { tokensPerSecond: number; level: number } | null {
  const best = counted(c).reduce<(typeof c.sweep)[number] | null>(
    (a, p) => (a === null || p.outputTokensPerSecond > a.outputTokensPerSecond ? p : a),
    null,
  );
  return best && best.outputTokensPerSecond > 0
    ? { tokensPerSecond: best.outputTokensPerSecond, level: best.level }
    : null;
}

const fmt = (v: number) => Math.round(v).toLocaleString("en-US");

/** The fewest hosts for both classes, each on its own service, beside the homogeneous fleets. */
/** One service's figures for each class: what a host carries, and so how many hosts each class needs. */
interface ServiceFit {
  service: string;
  users: number | null;
  interactiveHosts: number | null;
  tput: ReturnType<typeof batchCapacity>;
  batchHosts: number | null;
}

export function mixedPlan(curves: ServiceCurve[], interactive: InteractiveDemand, batch: BatchDemand): MixedPlan {
  const seconds = batch.deadlineDays * 86_400;
  const totalTokens = batch.completions * batch.outputTokensPerCompletion;
  const per = curves.map((c): ServiceFit => {
    const users = interactiveCapacity(c, interactive);
    const tput = batchCapacity(c);
    return {
      service: c.service,
      users,
      interactiveHosts: users === null ? null : Math.ceil(interactive.users / users),
      tput,
      batchHosts: tput === null ? null : Math.ceil(totalTokens / (tput.tokensPerSecond * seconds)),
    };
  });
  const objective = `TTFT p95 <= ${interactive.ttftP95Seconds} s and ITL p95 <= ${interactive.itlP95Seconds * 1000} ms/token`;
  const interactiveChoice = interactiveGroup(per, interactive, objective);
  const batchChoice = batchGroup(per, batch, totalTokens);
  const hosts = interactiveChoice && batchChoice ? interactiveChoice.hosts + batchChoice.hosts : null;
  const homogeneous: Homogeneous[] = per.map((p) => ({
    service: p.service,
    interactiveHosts: p.interactiveHosts,
    batchHosts: p.batchHosts,
    hosts: p.interactiveHosts !== null && p.batchHosts !== null ? p.interactiveHosts + p.batchHosts : null,
  }));
  const feasible = homogeneous.filter((h) => h.hosts !== null).sort((a, b) => a.hosts! - b.hosts!);
  const best = feasible[0];
  const savedHosts = hosts === null || !best ? null : best.hosts! - hosts;
  return {
    interactive: interactiveChoice,
    batch: batchChoice,
    hosts,
    homogeneous,
    savedHosts,
    verdict: splitVerdict(interactiveChoice, batchChoice, hosts, best, savedHosts, objective),
  };
}

/** The other services' figures, for a choice's reason. */
const othersThan = (per: ServiceFit[], service: string, f: (p: ServiceFit) => string) =>
  per
    .filter((p) => p.service !== service)
    .map(f)
    .join(", ");

/** The interactive group: the service needing the fewest hosts (among equals the most users per host). */
function interactiveGroup(per: ServiceFit[], interactive: InteractiveDemand, objective: string): GroupChoice | null {
  const pick = per
    .filter((p) => p.interactiveHosts !== null)
    .sort((a, b) => a.interactiveHosts! - b.interactiveHosts! || b.users! - a.users!)[0];
  if (!pick) return null;
  const others = othersThan(per, pick.service, (p) => `${p.service} ${p.users ?? "none"}`);
  return {
    service: pick.service,
    hosts: pick.interactiveHosts!,
    perHostConcurrency: Math.ceil(interactive.users / pick.interactiveHosts!),
    perHost: pick.users!,
    why: `${pick.service} holds ${pick.users} users per host within ${objective} (${others}); ${pick.interactiveHosts} host(s) give ${pick.users! * pick.interactiveHosts!} slots for ${interactive.users} users`,
  };
}

/** The batch group: the service needing the fewest hosts (among equals the most tok/s per host). */
function batchGroup(per: ServiceFit[], batch: BatchDemand, totalTokens: number): GroupChoice | null {
  const pick = per
    .filter((p) => p.batchHosts !== null)
    .sort((a, b) => a.batchHosts! - b.batchHosts! || b.tput!.tokensPerSecond - a.tput!.tokensPerSecond)[0];
  if (!pick) return null;
  const tput = pick.tput!;
  const others = othersThan(per, pick.service, (p) => `${p.service} ${p.tput ? fmt(p.tput.tokensPerSecond) : "none"}`);
  return {
    service: pick.service,
    hosts: pick.batchHosts!,
    perHostConcurrency: tput.level,
    perHost: tput.tokensPerSecond,
    why: `${pick.service} sustains ${fmt(tput.tokensPerSecond)} tok/s per host at ${tput.level} concurrent (${others}); ${pick.batchHosts} host(s) finish ${fmt(totalTokens)} tokens in ${(totalTokens / (tput.tokensPerSecond * pick.batchHosts! * 86_400)).toFixed(1)} of ${batch.deadlineDays} days`,
  };
}

/** The split in one sentence (what mixing saves, or why it cannot be sized): the plan's words, not a run's verdict. */
function splitVerdict(
  i: GroupChoice | null,
  b: GroupChoice | null,
  hosts: number | null,
  best: Homogeneous | undefined,
  saved: number | null,
  objective: string,
): string {
  if (!i)
    return `No measured level of any service meets ${objective}: no fleet of these services serves the interactive class; measure lower concurrencies or relax the objective.`;
  if (!b) return "No service measured any throughput within the error budget: no fleet can be sized for the batch job.";
  if (saved === null || !best)
    return `Mix: ${i.service} for interactive, ${b.service} for batch, ${hosts} hosts; no single service can carry both classes.`;
  if (saved > 0)
    return `Mix: ${i.service} for interactive (${i.hosts} hosts), ${b.service} for batch (${b.hosts} hosts): ${hosts} hosts, ${saved} fewer than the best homogeneous fleet (all ${best.service}: ${best.hosts}).`;
  return i.service === b.service
    ? `Mixing does not win: ${i.service} is the best service for both classes (${hosts} hosts, all ${i.service}).`
    : `Mixing does not win: all ${best.service} needs the same ${best.hosts} hosts as mixing ${i.service} and ${b.service}; run one service.`;
}

/** The split as a person reads it. */
export function mixedPlanText(p: MixedPlan): string {
  const group = (name: string, g: GroupChoice | null) =>
    g
      ? `  ${name.padEnd(12)} ${g.service.padEnd(15)} ${String(g.hosts).padStart(5)}  ${String(g.perHostConcurrency).padStart(8)}  ${g.why}`
      : `  ${name.padEnd(12)} (none can carry it)`;
  const lines = [
    "Mixed fleet, from measured curves:",
    "  group        service          hosts  per host  why",
    group("interactive", p.interactive),
    group("batch", p.batch),
    `  total: ${p.hosts ?? "n/a"} hosts`,
    "Homogeneous fleets (every host the same service, the classes still on hosts of their own):",
    ...p.homogeneous.map(
      (h) =>
        `  all ${h.service.padEnd(15)} ${h.hosts === null ? "cannot carry both classes" : `${h.hosts} hosts (${h.interactiveHosts} interactive + ${h.batchHosts} batch)`}`,
    ),
    p.verdict,
  ];
  return lines.join("\n") + "\n";
}

/** Groups as configured: each class's service and hosts (and the batch's concurrency per host, if set). */
export interface ConfiguredGroups {
  interactive: { service: string; hosts: number };
  batch: { service: string; hosts: number; perHostConcurrency?: number };
}

/**
 * Configured groups as a plan degradedPlan can judge: their sizes, not the fewest hosts. The users
 * spread evenly over the interactive hosts; the batch's concurrency per host judged at the curve's
 * first counted level holding it, by default the level of the curve's highest throughput (no batch
 * choice where the curve has no such level).
 */
export function configuredPlan(curves: ServiceCurve[], groups: ConfiguredGroups, users: number): MixedPlan {
  const curve = curves.find((c) => c.service === groups.batch.service);
  const set = groups.batch.perHostConcurrency;
  const at = set === undefined || !curve ? undefined : counted(curve).find((p) => p.level >= set);
  const b = !curve
    ? null
    : set === undefined
      ? batchCapacity(curve)
      : at
        ? { level: set, tokensPerSecond: at.outputTokensPerSecond }
        : null;
  const perUserHost = Math.ceil(users / groups.interactive.hosts);
  const interactive: GroupChoice = {
    service: groups.interactive.service,
    hosts: groups.interactive.hosts,
    perHostConcurrency: perUserHost,
    perHost: perUserHost,
    why: "configured",
  };
  const batch: GroupChoice | null = b && {
    service: groups.batch.service,
    hosts: groups.batch.hosts,
    perHostConcurrency: b.level,
    perHost: b.tokensPerSecond,
    why: "configured",
  };
  return {
    interactive,
    batch,
    hosts: groups.interactive.hosts + groups.batch.hosts,
    homogeneous: [],
    savedHosts: null,
    verdict: "",
  };
}

/** Hosts of each group that are out (their gate failed, or they stopped). */
export interface HostsDown {
  interactive: number;
  batch: number;
}

/** What a mixed fleet can still promise with hosts out of its groups (issue 29 point 4). */
export interface DegradedPlan {
  interactive: {
    hosts: number;
    /** Users per remaining host; null when no host remains. */
    perHost: number | null;
    /** The curve's point those users are judged at (the first measured level holding them), or null. */
    measuredAt: number | null;
    ttftP95Seconds: number | null;
    itlPerTokenP95Seconds: number | null;
    meetsObjective: boolean;
  } | null;
  batch: {
    hosts: number;
    tokensPerSecond: number;
    daysForJob: number | null;
    meetsDeadline: boolean;
    /** Hosts the deadline needs at the measured per-host figure. */
    hostsForDeadline: number;
  } | null;
  verdict: string;
}

/**
 * The plan's groups with DOWN hosts out of each: the interactive users spread over the hosts left
 * (judged at the first measured level of the group's service that holds as many per host: a level
 * beyond the curve is not promised), the batch job on the batch hosts left at their measured figure.
 * Each says whether its objective or deadline still holds, and what it would take to restore it.
 */
export function degradedPlan(
  curves: ServiceCurve[],
  plan: MixedPlan,
  interactive: InteractiveDemand,
  batch: BatchDemand,
  down: HostsDown,
): DegradedPlan {
  const lines: string[] = [];
  let i: DegradedPlan["interactive"] = null;
  if (plan.interactive) {
    const g = plan.interactive;
    const hosts = Math.max(0, g.hosts - down.interactive);
    const perHost = hosts > 0 ? Math.ceil(interactive.users / hosts) : null;
    const curve = curves.find((c) => c.service === g.service);
    const point = perHost === null || !curve ? undefined : counted(curve).find((p) => p.level >= perHost);
    const ttft = point?.ttftP95Seconds ?? null;
    const itl = point?.itlPerTokenP95Seconds ?? null;
    const meets = meetsObjective(ttft, itl, interactive);
    i = {
      hosts,
      perHost,
      measuredAt: point?.level ?? null,
      ttftP95Seconds: ttft,
      itlPerTokenP95Seconds: itl,
      meetsObjective: meets,
    };
    const lead = `interactive, ${hosts} of ${g.hosts} ${g.service} hosts`;
    if (perHost === null) lines.push(`${lead}: no host left, the ${interactive.users} users are not served.`);
    else if (!point)
      lines.push(
        `${lead}: ${perHost} users per host, past every level measured: not promised (restore ${g.hosts - hosts} host(s)).`,
      );
    else
      lines.push(
        `${lead}: ${perHost} users per host, measured at ${point.level}: TTFT p95 ${ttft?.toFixed(2) ?? "n/a"} s, ITL p95 ${itl === null ? "n/a" : (itl * 1000).toFixed(1)} ms/token: the objective ${meets ? "still holds" : `is missed${hosts < g.hosts ? ` (restore ${g.hosts - hosts} host(s))` : " even with every host"}`}.`,
      );
  }
  let b: DegradedPlan["batch"] = null;
  if (plan.batch) {
    const g = plan.batch;
    const hosts = Math.max(0, g.hosts - down.batch);
    const tokensPerSecond = hosts * g.perHost;
    const total = batch.completions * batch.outputTokensPerCompletion;
    const days = daysForJob(tokensPerSecond, batch);
    const meets = days !== null && days <= batch.deadlineDays;
    const hostsForDeadline = Math.ceil(total / (g.perHost * batch.deadlineDays * 86_400));
    b = { hosts, tokensPerSecond, daysForJob: days, meetsDeadline: meets, hostsForDeadline };
    lines.push(
      `batch, ${hosts} of ${g.hosts} ${g.service} hosts: ${fmt(tokensPerSecond)} tok/s, the job takes ${days === null ? "forever" : `${days.toFixed(2)} days`} of ${batch.deadlineDays}: the deadline ${meets ? "still holds" : `is missed (it needs ${hostsForDeadline} hosts)`}.`,
    );
  }
  return { interactive: i, batch: b, verdict: lines.join(" ") };
}
