/**
 * The stack outputs, one schema family: VerifiedGeneration's (the benchmark) and ServiceComparison's
 * (the services compared) share their level fields, typed, documented, stable names, so that
 * `pulumi stack output --json` holds everything a capacity plan needs. The providers build their
 * outs with measuredOutputs() and comparisonOutputs(); the tests parse them with these schemas.
 *
 * Time: every duration and rate is in the host's own time. On real hardware that is the wall clock;
 * on a simulated host at time scale X it is the simulated hardware's (wall-clock durations x X),
 * and `timeNote` says so in every output.
 */
import { z } from "zod";
import type { BenchSummary } from "../run/bench";
import { CertificateSchema } from "../judge/certificate";
import type { CapacityPlan } from "../plan/capacity";
import { SERVICE_NAMES } from "../plan/compare";
import type { CompareResult } from "../plan/compare-run";
import type { VerifyResult } from "../readiness/verify";

/** What clock the figures are in, one sentence (the same in every output, report and chart). */
export function timeNote(timeScale: number): string {
  return timeScale === 1
    ? "Figures are wall-clock measurements of the host."
    : `Figures are in the simulated host's own time: measured on the wall clock at time scale ${timeScale}, durations multiplied and rates divided by ${timeScale}.`;
}

const seconds = (what: string) =>
  z.number().nullable().describe(`${what}, seconds of host time (null when no successful request)`);

const latencyFields = {
  ttftP50Seconds: seconds("time to first token, median"),
  ttftP95Seconds: seconds("time to first token, 95th percentile"),
  ttftP99Seconds: seconds("time to first token, 99th percentile"),
  ttfaP50Seconds: seconds("time to first answer token (visible content, after any reasoning), median"),
  ttfaP95Seconds: seconds("time to first answer token, 95th percentile"),
  ttfaP99Seconds: seconds("time to first answer token, 99th percentile"),
  itlP50Seconds: seconds("inter-token latency, median"),
  itlP95Seconds: seconds("inter-token latency, 95th percentile"),
  itlP99Seconds: seconds("inter-token latency, 99th percentile"),
  e2eP50Seconds: seconds("end-to-end latency, median"),
  e2eP95Seconds: seconds("end-to-end latency, 95th percentile"),
  e2eP99Seconds: seconds("end-to-end latency, 99th percentile"),
};

export const PhaseTimingSchema = z.object({
  phase: z.enum(["connect", "models", "generate", "stability", "answers", "ready"]).describe("gate phase"),
  startedAtSeconds: z.number().describe("seconds from the gate's start to the phase's start"),
  seconds: z.number().describe("time the phase took"),
  attempts: z.number().int().describe("attempts in the phase (retries while the server started)"),
});

export const AnswerCertificateSchema = z
  .object({
    checked: z
      .boolean()
      .describe('the answer check ran; false: "answers not checked" (verification.answers.file none)'),
    note: z.string().describe('one sentence: the score against the threshold, or "answers not checked" and why'),
    set: z.string().nullable().describe('the answer set: "default" (shipped) or the JSONL file'),
    digest: z.string().nullable().describe("sha256 of the set's prompts and checks"),
    prompts: z.number().int().describe("prompts answered"),
    right: z.number().int().describe("answers that passed their check"),
    score: z.number().nullable().describe("right / prompts; null when not checked"),
    threshold: z.number().nullable().describe("verification.answers.passThreshold"),
    degenerate: z.number().int().describe("answers in a repetition loop or only in reasoning"),
    passed: z.boolean().nullable().describe("score >= threshold; null when not checked"),
    records: z
      .array(
        z.object({
          prompt: z.string(),
          answer: z.string().describe("the visible answer (reasoning excluded), cut to 200 characters"),
          finishReason: z.string().nullable(),
          right: z.boolean(),
          why: z.string().nullable().describe("why it is wrong; null when right"),
          degenerate: z.boolean(),
        }),
      )
      .describe("each prompt's greedy (temperature 0) answer and its judgement, in the set's order"),
  })
  .describe("The answer certificate: greedy answers to prompts with checkable answers (gate/readiness/answers.ts)");

export const ReadinessSchema = z
  .object({
    elapsedSeconds: z.number().describe("time from the gate's start to verified generation"),
    phases: z.array(PhaseTimingSchema).describe("each phase with its timing"),
    probeCompletionTokens: z
      .number()
      .int()
      .nullable()
      .describe(
        "usage.completion_tokens of the first successful probe (reasoning included); null when the probe stopped reading at the answer",
      ),
    probeReasoningTokens: z
      .number()
      .int()
      .nullable()
      .describe("reasoning tokens of that probe, when the server reports them"),
    probeFinishReason: z
      .string()
      .nullable()
      .describe("finish_reason of that probe; null when it stopped reading at the first answer token"),
    probeTimeToFirstAnswerSeconds: z
      .number()
      .describe("seconds from sending the probe to its first visible answer token"),
  })
  .describe("How readiness was established");

/** What the successful requests of a run produced: the same fields for single requests and sweep levels. */
const tokenFields = {
  completionTokens: z.number().int().describe("usage completion tokens of the successful requests"),
  reasoningTokens: z.number().int().nullable().describe("reasoning tokens, when reported"),
  answerTokens: z.number().int().nullable().describe("completion minus reasoning tokens, when reasoning is reported"),
  answerlessRequests: z
    .number()
    .int()
    .describe("successful requests with no visible content (reasoning used the whole budget)"),
  truncatedRequests: z
    .number()
    .int()
    .describe(
      "successful requests cut short: finish_reason length before their max_tokens (the context limit); their tokens count as produced",
    ),
};

export const SingleRequestOutputSchema = z.object({
  maxTokens: z.number().int().describe("max_tokens of these requests"),
  requests: z.number().int().describe("requests sent, one at a time"),
  errors: z.number().int().describe("requests that failed"),
  outputTokensPerSecond: z.number().describe("output tokens over summed end-to-end time of the successful requests"),
  decodeTokensPerSecond: z.number().nullable().describe("decode speed of one request, 1/TPOT"),
  ...tokenFields,
  ...latencyFields,
});

const intervalSchema = (what: string) =>
  z
    .object({
      mean: z.number().describe("mean over the runs"),
      halfWidth: z.number().nullable().describe("half-width of the 95 % confidence interval (null: one run)"),
      low: z.number().nullable().describe("low end of the interval"),
      high: z.number().nullable().describe("high end of the interval"),
      n: z.number().int().describe("runs"),
    })
    .describe(what);

const RunOutputSchema = z.object({
  durationSeconds: z.number().describe("time of the run"),
  outputTokensPerSecond: z.number().describe("aggregate output tok/s of the run"),
  goodputTokensPerSecond: z.number().describe("output tok/s of the run's requests that met the SLO"),
  requests: z.number().int().describe("requests sent in the run"),
  errors: z.number().int().describe("requests that failed"),
  sentRequestsPerSecond: z.number().nullable().describe("open loop: requests sent per second; null: closed loop"),
  achievedRequestsPerSecond: z
    .number()
    .nullable()
    .describe("open loop: successful requests begun (first token) per second; null: closed loop"),
});

/** A level's validity certificate (gate/judge/certificate.ts). */
export const CertificateOutputSchema = CertificateSchema.nullable().describe(
  "the level's validity certificate; not certified: never saturation, sustained throughput, a knee or a capacity figure (benchmark.certification.require); null: no evidence was gathered",
);

/** One level of a sweep: the fields every level summary has, bench's and the comparison's alike. */
export const SweepLevelOutputSchema = z.object({
  certificate: CertificateOutputSchema,
  mode: z.enum(["closed", "open"]).describe("closed: level is a concurrency; open: a request rate offered per second"),
  level: z.number().describe("the concurrency or the request rate offered"),
  concurrency: z
    .number()
    .describe(
      "requests in flight at once: the level of a closed loop; for a rate level, the mean the offered load produced",
    ),
  offeredRequestsPerSecond: z.number().nullable().describe("open loop: the request rate offered; null: closed loop"),
  achievedRequestsPerSecond: z
    .number()
    .nullable()
    .describe("open loop: successful requests the server began (first token) per second, mean over the runs"),
  keptUp: z
    .boolean()
    .nullable()
    .describe(
      "open loop: the server kept up with the rate (then the level measured the offered load, not capacity); false: saturated; null: closed loop",
    ),
  requests: z.number().int().describe("requests sent at this level (all runs)"),
  errors: z.number().int().describe("requests that failed (their tokens are not counted)"),
  errorRate: z.number().describe("errors / requests"),
  withinErrorBudget: z
    .boolean()
    .describe("false: the error rate broke the error budget and the level counts for no figure"),
  errorExamples: z.array(z.string()).describe("up to three distinct error messages"),
  durationSeconds: z.number().describe("time of the level's runs, summed"),
  outputTokensPerSecond: z
    .number()
    .describe("aggregate output tokens per second (usage completion tokens / time), mean over the runs"),
  throughput: intervalSchema("output tok/s per run: mean and 95 % interval over the runs"),
  goodput: intervalSchema("output tok/s of requests that met the SLO, per run"),
  meetsSlo: z.boolean().describe("every run met the SLO at its percentiles"),
  requestsPerSecond: z.number().describe("successful requests per second"),
  ...tokenFields,
  acceptanceLength: z
    .number()
    .nullable()
    .describe("speculative acceptance length read after the level; null when not speculative"),
  itlPerTokenP50Seconds: seconds("inter-token latency per token, (e2e - TTFT) / (tokens - 1), median"),
  itlPerTokenP95Seconds: seconds("inter-token latency per token, 95th percentile"),
  runs: z.array(RunOutputSchema).describe("each run of the level"),
  ...latencyFields,
});

export const CapacityPlanOutputSchema = z
  .object({
    sustainedOutputTokensPerSecond: z.number().describe("the throughput the plan assumes"),
    completions: z.number().int().describe("completions in the workload"),
    outputTokensPerCompletion: z.number().describe("average output tokens per completion"),
    totalOutputTokens: z.number().describe("completions x tokens per completion"),
    tokensPerDayPerHost: z.number().describe("sustained tok/s x 86,400"),
    daysOnOneHost: z.number().nullable().describe("days for the workload on one host; null at zero throughput"),
    hosts: z.number().int().describe("hosts the plan spreads the workload over"),
    daysOnHosts: z.number().nullable().describe("days on that many hosts"),
    deadlineDays: z.number().describe("the workload's deadline"),
    hostsForDeadline: z.number().int().nullable().describe("hosts needed to meet the deadline"),
    bytesPerToken: z.number().describe("raw storage per output token assumed"),
    rawStorageBytes: z.number().describe("raw storage of the generated text"),
    rawStorageGigabytes: z.number().describe("the same in GB (10^9 bytes)"),
    answers: z
      .string()
      .optional()
      .describe(
        'whether the answers behind this figure were checked: the answer certificate\'s note ("answers checked: ..." or "answers not checked ...")',
      ),
  })
  .describe("Capacity plan from the sustained throughput and the configured workload");

export const VerifiedGenerationOutputsSchema = z
  .object({
    generating: z.boolean().describe("the endpoint generated at the last create or refresh; false is drift"),
    generationCheck: z.string().describe('"ok", or a short stable reason the last refresh found no generation'),
    model: z.string().describe("the served model id that was verified"),
    servedModels: z
      .array(z.string())
      .describe("the models the benchmark's responses named (their `model` field); another than `model` is reported"),
    modelMismatch: z
      .string()
      .nullable()
      .describe("a response named another model than asked (a server that ignores `model`); null when none did"),
    verifiedAt: z.string().describe("ISO time verification and benchmark finished"),
    readiness: ReadinessSchema,
    singleRequest: z.array(SingleRequestOutputSchema).describe("single requests at each max_tokens"),
    sweep: z.array(SweepLevelOutputSchema).describe("the sweep: concurrencies, or request rates offered"),
    saturationConcurrency: z
      .number()
      .int()
      .nullable()
      .describe("the knee (gate/judge/saturation.ts); null when throughput still rose at the last level"),
    saturated: z.boolean().describe("a knee was found; false: not saturated up to the last level"),
    saturationVerdict: z.string().describe("the knee in one sentence, with the levels excluded by the error budget"),
    kneeUndetermined: z
      .boolean()
      .describe("the throughput intervals could not place the knee: no knee claimed, run more repeats"),
    sustainedOutputTokensPerSecond: z
      .number()
      .describe("aggregate output tok/s at the knee; not saturated: at the last level (a lower bound)"),
    acceptanceLength: z
      .number()
      .nullable()
      .describe("speculative acceptance length at low concurrency; null when not speculative"),
    benchComplete: z.boolean().describe("every sweep level ran"),
    capacity: CapacityPlanOutputSchema,
    answerCertificate: AnswerCertificateSchema.optional(),
    timeNote: z.string().describe("what clock the figures are in (the simulated host's own time when time-scaled)"),
  })
  .describe("Outputs of VerifiedGeneration");
export type VerifiedGenerationOutputs = z.infer<typeof VerifiedGenerationOutputsSchema>;

/** Builds the outputs from a successful verification, a benchmark and a plan. */
export function measuredOutputs(
  readiness: VerifyResult,
  summary: BenchSummary,
  plan: CapacityPlan,
): VerifiedGenerationOutputs {
  if (!readiness.ready || readiness.probe === null || readiness.model === null)
    throw new Error("outputs need a successful verification");
  return {
    generating: true,
    generationCheck: "ok",
    model: readiness.model,
    servedModels: summary.servedModels,
    modelMismatch: summary.modelMismatch,
    verifiedAt: new Date().toISOString(),
    readiness: {
      elapsedSeconds: readiness.elapsedSeconds,
      phases: readiness.phases,
      probeCompletionTokens: readiness.probe.completionTokens,
      probeReasoningTokens: readiness.probe.reasoningTokens,
      probeFinishReason: readiness.probe.finishReason,
      probeTimeToFirstAnswerSeconds: readiness.probe.timeToFirstAnswerSeconds,
    },
    singleRequest: summary.singleRequest,
    sweep: summary.sweep,
    saturationConcurrency: summary.saturationConcurrency,
    saturated: summary.saturated,
    saturationVerdict: summary.saturationVerdict,
    kneeUndetermined: summary.kneeUndetermined,
    sustainedOutputTokensPerSecond: summary.sustainedOutputTokensPerSecond,
    acceptanceLength: summary.acceptanceLength,
    benchComplete: summary.complete,
    capacity: { ...plan, answers: readiness.answers.note },
    answerCertificate: readiness.answers,
    timeNote: timeNote(summary.timeScale),
  };
}

const service = z.enum(SERVICE_NAMES);

/** A level of the comparison: the same fields as the benchmark's, flattened to keep state small (no runs). */
export const ComparedLevelSchema = SweepLevelOutputSchema.pick({
  mode: true,
  level: true,
  outputTokensPerSecond: true,
  ttftP95Seconds: true,
  ttfaP95Seconds: true,
  itlPerTokenP50Seconds: true,
  e2eP50Seconds: true,
  acceptanceLength: true,
  requests: true,
  errors: true,
  achievedRequestsPerSecond: true,
  keptUp: true,
  meetsSlo: true,
  certificate: true,
}).extend({
  withinErrorBudget: z
    .boolean()
    .nullable()
    .describe("false: the error rate broke the error budget and the level counts for no figure; null: not judged"),
  outputTokensPerSecondLow: z.number().nullable().describe("95 % confidence interval, low end (null: one repeat)"),
  outputTokensPerSecondHigh: z.number().nullable().describe("95 % confidence interval, high end"),
  goodputTokensPerSecond: z.number().describe("output tok/s of requests that met the SLO, mean over the repeats"),
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
    .describe(
      "the level where it saturates (gate/judge/saturation.ts): a concurrency, or for rates the rate offered; null: not saturated",
    ),
  kneeVerdict: z.string().nullable().describe("the knee in one sentence"),
  sustainedOutputTokensPerSecond: z
    .number()
    .nullable()
    .describe(
      "tok/s at the knee, or at the last level within the error budget (a lower bound); 0 when nothing is a capacity figure (every rate kept up with, or every level over the budget)",
    ),
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
  answers: z
    .string()
    .nullable()
    .optional()
    .describe(
      'its answer check in one sentence (speculative: greedy answers equal to autoregressive\'s on k of n prompts, both scores), or "answers not checked"',
    ),
  answerScore: z.number().nullable().optional().describe("its answer certificate's score; null: not checked"),
  exactMatchRate: z
    .number()
    .nullable()
    .optional()
    .describe("speculative: fraction of prompts with greedy answers equal to autoregressive's; null: not compared"),
  notRecommended: z
    .string()
    .nullable()
    .optional()
    .describe("why it is never recommended whatever its tok/s (it answers worse); null: it may be"),
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
          // A level recorded before these figures existed has none of them.
          withinErrorBudget: l.withinErrorBudget ?? null,
          achievedRequestsPerSecond: l.achievedRequestsPerSecond ?? null,
          keptUp: l.keptUp ?? null,
          certificate: l.certificate ?? null,
        })),
        knee: plan?.knee?.saturated ? plan.knee.sustainedLevel : null,
        kneeVerdict: plan?.knee?.verdict ?? null,
        sustainedOutputTokensPerSecond: plan?.sustainedOutputTokensPerSecond ?? null,
        daysOnOneHost: plan?.daysOnOneHost ?? null,
        hostsForDeadline: plan?.hostsForDeadline ?? null,
        crossoverConcurrency: cross?.estimatedLevel ?? null,
        crossoverFirstLevel: cross?.firstLevelNotBetter ?? null,
        answers: plan?.answers ?? o.answers?.note ?? null,
        answerScore: o.answers?.score ?? null,
        exactMatchRate: o.agreement?.exactMatchRate ?? null,
        notRecommended: plan?.notRecommended ?? null,
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
