/**
 * The stack outputs of a service comparison (components/service-comparison): typed, documented,
 * stable names, like outputs.ts for VerifiedGeneration. Per service its sweep as a table (no raw
 * samples: state stays small), its knee, acceptance and crossover; the recommendation sentence;
 * the service left active. comparisonOutputs() builds them and the tests parse them with the schema.
 */
import { z } from "zod";
import { SERVICE_NAMES } from "../measurement/compare";
import { timeNote } from "./compare-report";
import type { CompareResult } from "../measurement/compare-run";

const service = z.enum(SERVICE_NAMES);
const nullableSeconds = (what: string) => z.number().nullable().describe(`${what}, seconds of host time`);

export const ComparedLevelSchema = z.object({
  mode: z.enum(["closed", "open"]).describe("closed: level is a concurrency; open: a request rate per second"),
  level: z.number().describe("the concurrency or request rate"),
  outputTokensPerSecond: z.number().describe("mean aggregate output tok/s over the repeats"),
  outputTokensPerSecondLow: z.number().nullable().describe("95 % confidence interval, low end (null: one repeat)"),
  outputTokensPerSecondHigh: z.number().nullable().describe("95 % confidence interval, high end"),
  goodputTokensPerSecond: z.number().describe("output tok/s of requests that met the SLO"),
  ttftP95Seconds: nullableSeconds("time to first token, 95th percentile"),
  ttfaP95Seconds: nullableSeconds("time to first answer token, 95th percentile"),
  itlPerTokenP50Seconds: nullableSeconds("inter-token latency per token, median"),
  e2eP50Seconds: nullableSeconds("end-to-end latency, median"),
  acceptanceLength: z.number().nullable().describe("speculative acceptance length at this level; null: autoregressive"),
  requests: z.number().int().describe("requests sent"),
  errors: z.number().int().describe("requests that failed"),
  meetsSlo: z.boolean().describe("every repeat met the SLO at its percentiles"),
});

export const ComparedServiceSchema = z.object({
  service: service.describe("the service"),
  failure: z.string().nullable().describe("why it is out of the comparison (not ready, acceptance below the floor)"),
  acceptanceLength: z
    .number()
    .nullable()
    .describe("acceptance at one stream on a realistic prompt; null: autoregressive"),
  sweep: z.array(ComparedLevelSchema).describe("the same workload at each level"),
  knee: z
    .number()
    .nullable()
    .describe("the concurrency where it saturates (gate/measurement/saturation.ts); null: not saturated"),
  kneeVerdict: z.string().nullable().describe("the knee in one sentence"),
  sustainedOutputTokensPerSecond: z.number().nullable().describe("tok/s at the knee, or at the best level"),
  daysOnOneHost: z.number().nullable().describe("days for the configured job on one host"),
  hostsForDeadline: z.number().int().nullable().describe("hosts that meet the job's deadline"),
  crossoverConcurrency: z
    .number()
    .nullable()
    .describe(
      "speculative services: estimated concurrency where it stops beating autoregressive; null: no crossover measured",
    ),
  crossoverFirstLevel: z
    .number()
    .nullable()
    .describe("the first measured level where it no longer beats autoregressive"),
});

export const ServiceComparisonOutputsSchema = z
  .object({
    services: z.array(ComparedServiceSchema).describe("per service, in the order measured"),
    recommended: service.nullable().describe("the service the comparison recommends; null: none could be measured"),
    runnerUp: service.nullable().describe("the next best service"),
    margin: z.number().nullable().describe("how much better the recommendation is than the runner-up (0.12 = 12 %)"),
    recommendation: z.string().describe("the recommendation with its reason, one sentence"),
    activeService: service.describe(
      "the service left active: the recommendation under `auto`, else the configured one",
    ),
    activeUnit: z.string().describe("its unit, e.g. sglang-eagle3.service"),
    timeNote: z.string().describe("what clock the figures are in (the simulated host's own time when time-scaled)"),
    comparedAt: z.string().describe("ISO time the comparison finished"),
  })
  .describe("Outputs of ServiceComparison");
export type ServiceComparisonOutputs = z.infer<typeof ServiceComparisonOutputsSchema>;

export function comparisonOutputs(r: CompareResult): ServiceComparisonOutputs {
  const c = r.comparison;
  return {
    services: r.outcomes.map((o) => {
      const plan = c?.plans.find((p) => p.service === o.service) ?? null;
      const cross = c?.crossovers.find((x) => x.service === o.service) ?? null;
      return {
        service: o.service,
        failure: o.failure,
        acceptanceLength: o.acceptanceLength,
        sweep: o.sweep.map((l) => ({
          mode: l.mode,
          level: l.level,
          outputTokensPerSecond: l.throughput.mean,
          outputTokensPerSecondLow: l.throughput.low,
          outputTokensPerSecondHigh: l.throughput.high,
          goodputTokensPerSecond: l.goodput.mean,
          ttftP95Seconds: l.ttftP95Seconds,
          ttfaP95Seconds: l.ttfaP95Seconds,
          itlPerTokenP50Seconds: l.itlPerTokenP50Seconds,
          e2eP50Seconds: l.e2eP50Seconds,
          acceptanceLength: l.acceptanceLength,
          requests: l.requests,
          errors: l.errors,
          meetsSlo: l.meetsSlo,
        })),
        knee: plan?.knee?.saturationConcurrency ?? null,
        kneeVerdict: plan?.knee?.verdict ?? null,
        sustainedOutputTokensPerSecond: plan?.sustainedOutputTokensPerSecond ?? null,
        daysOnOneHost: plan?.daysOnOneHost ?? null,
        hostsForDeadline: plan?.hostsForDeadline ?? null,
        crossoverConcurrency: cross?.estimatedLevel ?? null,
        crossoverFirstLevel: cross?.firstLevelNotBetter ?? null,
      };
    }),
    recommended: c?.recommended ?? null,
    runnerUp: c?.runnerUp ?? null,
    margin: c?.margin ?? null,
    recommendation: c?.sentence ?? "No service could be measured: nothing to recommend.",
    activeService: r.activeAfter,
    activeUnit: `sglang-${r.activeAfter}.service`,
    timeNote: timeNote(r.timeScale),
    comparedAt: new Date().toISOString(),
  };
}
