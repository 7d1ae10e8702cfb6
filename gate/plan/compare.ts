/**
 * Choosing a service by measurement: the same workload on each service of one host, then the
 * crossover where a speculative service stops beating autoregressive, the recommendation for the
 * configured job in one sentence, and a capacity plan per service. Pure functions of the measured
 * sweeps; compare-run.ts does the measuring.
 */
import { z } from "zod";
import { SECONDS_PER_DAY } from "./capacity";
import { BenchPlanSchema } from "../base/schema";
import { levelPhrase, type SweepLevel } from "../judge/levels";
import { judgeLevels, type Knee, type KneeOptions } from "../judge/saturation";

export const SERVICE_NAMES = ["autoregressive", "eagle3", "dflash"] as const;
export type ServiceName = (typeof SERVICE_NAMES)[number];
export const SERVICE_LABEL: Record<ServiceName, string> = {
  autoregressive: "autoregressive",
  eagle3: "EAGLE-3",
  dflash: "DFlash",
};

export const JobSchema = z
  .object({
    purpose: z
      .enum(["batch", "interactive"])
      .default("batch")
      .describe(
        "batch: the service that finishes the job soonest wins; interactive: the highest goodput under the SLO.",
      ),
    completions: z.number().int().positive().default(900_000).describe("Completions in the job."),
    outputTokensPerCompletion: z.number().positive().default(2000).describe("Output tokens per completion."),
    deadlineDays: z.number().positive().default(7).describe("Deadline of the job, days."),
    gpuHourCost: z
      .number()
      .nonnegative()
      .optional()
      .describe("Price of one GPU-hour; with it, the plan gives cost per million output tokens."),
    gpusPerHost: z.number().int().positive().default(8).describe("GPUs of one host (for the cost)."),
  })
  .strict()
  .describe("The job a capacity plan picks a service for.");
export type Job = z.infer<typeof JobSchema>;
export type JobInput = z.input<typeof JobSchema>;

export interface ServiceMeasurement {
  service: ServiceName;
  sweep: SweepLevel[];
  /** Acceptance at one stream on a realistic prompt (speculative services). */
  acceptanceLength: number | null;
  /** Its answers beside autoregressive's, one sentence (compare-run.ts answerVerdicts); absent: not judged. */
  answers?: string;
  /** Why it is never recommended whatever its tok/s (it answers worse); null or absent: it may be. */
  notRecommended?: string | null;
}

export interface ServicePlan {
  service: ServiceName;
  /** closed: levels are concurrencies; open: offered request rates. */
  mode: "closed" | "open";
  /** The sustained figure (gate/judge/saturation.ts: the knee's, or the last counted level's), and where. */
  sustainedOutputTokensPerSecond: number;
  atLevel: number | null;
  /** Where the sweep saturates, by the gate's one knee definition (closed loop only). */
  knee: Knee | null;
  bestGoodputTokensPerSecond: number;
  daysOnOneHost: number | null;
  hostsForDeadline: number | null;
  costPerMillionTokens: number | null;
  answers: string | null;
  notRecommended: string | null;
}

export interface Crossover {
  service: ServiceName;
  /** The first measured level where it no longer beats autoregressive; null: it wins (or loses) throughout. */
  firstLevelNotBetter: number | null;
  /** Linear estimate of the crossing between the two measured levels around it. */
  estimatedLevel: number | null;
  /** It beat autoregressive at the lowest level measured. */
  winsAtLowest: boolean;
}

export interface Comparison {
  job: Job;
  /** closed: levels are concurrencies; open: offered request rates. */
  mode: "closed" | "open";
  plans: ServicePlan[];
  crossovers: Crossover[];
  recommended: ServiceName;
  runnerUp: ServiceName | null;
  /** How much better the recommendation is than the runner-up, as a fraction (0.12 = 12 %). */
  margin: number | null;
  sentence: string;
}

const mean = (l: SweepLevel) => l.throughput.mean;

export function crossover(ar: SweepLevel[], spec: SweepLevel[], service: ServiceName): Crossover {
  const levels = spec
    .map((s) => ({ level: s.level, diff: mean(s) - (ar.find((a) => a.level === s.level)?.throughput.mean ?? NaN) }))
    .filter((p) => Number.isFinite(p.diff))
    .sort((a, b) => a.level - b.level);
  const winsAtLowest = levels.length > 0 && levels[0].diff > 0;
  for (let i = 1; i < levels.length; i++) {
    const prev = levels[i - 1];
    const cur = levels[i];
    if (prev.diff > 0 && cur.diff <= 0) {
      const t = prev.diff / (prev.diff - cur.diff);
      return {
        service,
        firstLevelNotBetter: cur.level,
        estimatedLevel: prev.level + t * (cur.level - prev.level),
        winsAtLowest,
      };
    }
  }
  return { service, firstLevelNotBetter: null, estimatedLevel: null, winsAtLowest };
}

const DEFAULT_PLAN = BenchPlanSchema.parse({});
/** The schema's knee settings: a caller without a stack (tests, defaults) judges with these. */
export const DEFAULT_KNEE: KneeOptions = {
  errorBudget: DEFAULT_PLAN.errorBudget,
  minGain: DEFAULT_PLAN.kneeMinGain,
  maxTtftP95Seconds: DEFAULT_PLAN.kneeMaxTtftP95Seconds,
  requireCertified: DEFAULT_PLAN.certification.require,
};

export function planService(m: ServiceMeasurement, job: Job, judgement: KneeOptions = DEFAULT_KNEE): ServicePlan {
  // Failure is never capacity: levels over the error budget count for nothing, and a rate level the
  // server kept up with measured the offered load, not the server (saturation.ts).
  const mode = m.sweep.length > 0 && m.sweep.every((l) => l.mode === "open") ? "open" : "closed";
  const knee =
    m.sweep.length > 0
      ? judgeLevels(
          m.sweep.map((l) => ({
            mode: l.mode,
            level: l.level,
            requests: l.requests,
            errors: l.errors,
            outputTokensPerSecond: mean(l),
            throughput: l.throughput,
            ttftP95Seconds: l.ttftP95Seconds,
            achievedRequestsPerSecond: l.achievedRequestsPerSecond ?? null,
            keptUp: l.keptUp ?? null,
            clientLimited: l.clientLimited ?? null,
            plannedRequestsPerSecond: l.plannedRequestsPerSecond ?? null,
            sentRequestsPerSecond: l.sentRequestsPerSecond ?? null,
            dispatchLagP99Seconds: l.dispatchLagP99Seconds ?? null,
            answerlessRequests: l.answerlessRequests,
          })),
          judgement,
        )
      : null;
  const rate = knee ? knee.sustainedOutputTokensPerSecond : 0;
  const at = knee ? knee.sustainedLevel : null;
  const total = job.completions * job.outputTokensPerCompletion;
  const days = rate > 0 ? total / (rate * SECONDS_PER_DAY) : null;
  return {
    service: m.service,
    mode,
    sustainedOutputTokensPerSecond: rate,
    atLevel: at,
    knee,
    bestGoodputTokensPerSecond: Math.max(0, ...m.sweep.map((l) => l.goodput.mean)),
    daysOnOneHost: days,
    hostsForDeadline: days === null ? null : Math.max(1, Math.ceil(days / job.deadlineDays - 1e-9)),
    costPerMillionTokens:
      job.gpuHourCost === undefined || rate <= 0 ? null : ((job.gpuHourCost * job.gpusPerHost) / (rate * 3600)) * 1e6,
    answers: m.answers ?? null,
    notRecommended: m.notRecommended ?? null,
  };
}

export function compareServices(
  measurements: ServiceMeasurement[],
  jobInput: JobInput = {},
  judgement: KneeOptions = DEFAULT_KNEE,
): Comparison {
  const job = JobSchema.parse(jobInput);
  if (measurements.length === 0) throw new Error("nothing to compare: no service was measured");
  const plans = measurements.map((m) => planService(m, job, judgement));
  const ar = measurements.find((m) => m.service === "autoregressive");
  const crossovers = ar
    ? measurements.filter((m) => m.service !== "autoregressive").map((m) => crossover(ar.sweep, m.sweep, m.service))
    : [];
  const score = (p: ServicePlan) =>
    job.purpose === "batch" ? p.sustainedOutputTokensPerSecond : p.bestGoodputTokensPerSecond;
  // A service that answers worse is ranked after every other, whatever its tok/s: never recommended
  // while one that answers right remains (autoregressive is never vetoed: it is the reference).
  const vetoed = (p: ServicePlan) => (p.notRecommended ? 1 : 0);
  const ranked = [...plans].sort((a, b) => vetoed(a) - vetoed(b) || score(b) - score(a));
  const winner = ranked[0];
  const second = ranked[1] ?? null;
  const margin = second && score(second) > 0 ? score(winner) / score(second) - 1 : null;
  return {
    job,
    mode: plans.every((p) => p.mode === "open") ? "open" : "closed",
    plans,
    crossovers,
    recommended: winner.service,
    runnerUp: second?.service ?? null,
    margin,
    sentence: recommendationSentence(job, winner, second, margin, crossovers) + notRecommendedText(plans),
  };
}

/** Each vetoed service and why, appended to the recommendation so the table says why it lost. */
function notRecommendedText(plans: ServicePlan[]): string {
  return plans
    .filter((p) => p.notRecommended)
    .map((p) => ` ${SERVICE_LABEL[p.service]} is not recommended whatever its tok/s: ${p.notRecommended}.`)
    .join("");
}

function fmt(n: number): string {
  return Math.round(n).toLocaleString("en-US");
}

export function recommendationSentence(
  job: Job,
  winner: ServicePlan,
  second: ServicePlan | null,
  margin: number | null,
  crossovers: Crossover[],
): string {
  const name = SERVICE_LABEL[winner.service];
  const fades = crossovers
    .filter((c) => c.estimatedLevel !== null)
    .map(
      (c) =>
        `${SERVICE_LABEL[c.service]} stops beating autoregressive near ${levelPhrase(winner.mode, Math.round(c.estimatedLevel!))}`,
    );
  if (job.purpose === "batch" && !(winner.sustainedOutputTokensPerSecond > 0))
    return `Run ${name}: no capacity was measured, so this ranks nothing: ${winner.knee?.verdict ?? "no level ran"}.`;
  const than =
    second && margin !== null ? `, ${(margin * 100).toFixed(0)} % more than ${SERVICE_LABEL[second.service]}` : "";
  const why =
    job.purpose === "batch"
      ? `it finishes ${fmt(job.completions)} x ${fmt(job.outputTokensPerCompletion)} tokens soonest, sustaining ${fmt(winner.sustainedOutputTokensPerSecond)} tok/s at ${levelPhrase(winner.mode, winner.atLevel ?? "n/a")}${than} (${winner.daysOnOneHost?.toFixed(1) ?? "n/a"} days on one host)`
      : `it has the highest goodput under the SLO, ${fmt(winner.bestGoodputTokensPerSecond)} tok/s${than}`;
  // A knee the intervals could not place: the figure is the best level's mean, and more repeats would place it.
  const undetermined =
    job.purpose === "batch" && winner.knee?.undetermined ? "; the knee is undetermined (run more repeats)" : "";
  return `Run ${name}: ${why}${undetermined}${fades.length ? `; ${fades.join(", ")}` : ""}.`;
}
