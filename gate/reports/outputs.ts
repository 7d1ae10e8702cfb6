/**
 * The stack outputs of a VerifiedGeneration: typed, documented, stable names, so that
 * `pulumi stack output --json` holds everything a capacity plan needs. The provider builds its
 * outs with measuredOutputs() and the tests parse them with this schema.
 */
import { z } from "zod";
import type { BenchSummary } from "../measurement/bench";
import type { CapacityPlan } from "../measurement/capacity";
import type { VerifyResult } from "../readiness/verify";

const seconds = (what: string) => z.number().nullable().describe(`${what}, seconds (null when no successful request)`);

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
  phase: z.enum(["connect", "models", "generate", "stability", "ready"]).describe("gate phase"),
  startedAtSeconds: z.number().describe("seconds from the gate's start to the phase's start"),
  seconds: z.number().describe("time the phase took"),
  attempts: z.number().int().describe("attempts in the phase (retries while the server started)"),
});

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

export const SingleRequestOutputSchema = z.object({
  maxTokens: z.number().int().describe("max_tokens of these requests"),
  requests: z.number().int().describe("requests sent, one at a time"),
  errors: z.number().int().describe("requests that failed"),
  outputTokensPerSecond: z.number().describe("output tokens over summed end-to-end time of the successful requests"),
  decodeTokensPerSecond: z.number().nullable().describe("decode speed of one request, 1/TPOT"),
  completionTokens: z.number().int().describe("usage completion tokens of the successful requests"),
  reasoningTokens: z.number().int().nullable().describe("reasoning tokens, when reported"),
  answerTokens: z.number().int().nullable().describe("completion minus reasoning tokens, when reasoning is reported"),
  answerlessRequests: z
    .number()
    .int()
    .describe("successful requests with no visible content (reasoning used the whole budget)"),
  ...latencyFields,
});

export const SweepLevelOutputSchema = z.object({
  concurrency: z.number().int().describe("requests in flight at once (closed loop)"),
  requests: z.number().int().describe("requests sent at this level"),
  errors: z.number().int().describe("requests that failed (their tokens are not counted)"),
  errorRate: z.number().describe("errors / requests"),
  withinErrorBudget: z
    .boolean()
    .describe("false: the error rate broke the error budget and the level counts for no figure"),
  errorExamples: z.array(z.string()).describe("up to three distinct error messages"),
  durationSeconds: z.number().describe("wall time of the level"),
  outputTokensPerSecond: z
    .number()
    .describe("aggregate output tokens per second (usage completion tokens / wall time)"),
  requestsPerSecond: z.number().describe("successful requests per second"),
  completionTokens: z.number().int().describe("usage completion tokens of the successful requests"),
  reasoningTokens: z.number().int().nullable().describe("reasoning tokens, when reported"),
  answerTokens: z.number().int().nullable().describe("completion minus reasoning tokens, when reasoning is reported"),
  answerlessRequests: z
    .number()
    .int()
    .describe("successful requests with no visible content (reasoning used the whole budget)"),
  acceptanceLength: z
    .number()
    .nullable()
    .describe("speculative acceptance length read after the level; null when not speculative"),
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
  })
  .describe("Capacity plan from the sustained throughput and the configured workload");

export const VerifiedGenerationOutputsSchema = z
  .object({
    generating: z.boolean().describe("the endpoint generated at the last create or refresh; false is drift"),
    generationCheck: z.string().describe('"ok", or a short stable reason the last refresh found no generation'),
    model: z.string().describe("the served model id that was verified"),
    verifiedAt: z.string().describe("ISO time verification and benchmark finished"),
    readiness: ReadinessSchema,
    singleRequest: z.array(SingleRequestOutputSchema).describe("single requests at each max_tokens"),
    sweep: z.array(SweepLevelOutputSchema).describe("the concurrency sweep"),
    saturationConcurrency: z
      .number()
      .int()
      .nullable()
      .describe("the knee (gate/measurement/saturation.ts); null when throughput still rose at the last level"),
    saturated: z.boolean().describe("a knee was found; false: not saturated up to the last level"),
    saturationVerdict: z.string().describe("the knee in one sentence, with the levels excluded by the error budget"),
    sustainedOutputTokensPerSecond: z
      .number()
      .describe("aggregate output tok/s at the knee; not saturated: at the last level (a lower bound)"),
    acceptanceLength: z
      .number()
      .nullable()
      .describe("speculative acceptance length at low concurrency; null when not speculative"),
    benchComplete: z.boolean().describe("every sweep level ran"),
    capacity: CapacityPlanOutputSchema,
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
    sustainedOutputTokensPerSecond: summary.sustainedOutputTokensPerSecond,
    acceptanceLength: summary.acceptanceLength,
    benchComplete: summary.complete,
    capacity: plan,
  };
}
