/**
 * gpuhost's readiness gate, benchmark and capacity plans: a pure library (no Pulumi), used by the
 * VerifiedGeneration provider (loaded compiled, by path, at call time) and by `gpuhost verify|bench|plan`.
 */
export {
  verify,
  PHASE_MEANING,
  type GateHooks,
  type GatePhase,
  type PhaseTiming,
  type ServiceState,
  type VerifyResult,
} from "./verify";
export {
  bench,
  summarizeBench,
  parseSpecAcceptLength,
  type BenchHooks,
  type BenchProgress,
  type BenchResult,
  type BenchSamples,
  type BenchSummary,
} from "./bench";
export { capacity, type CapacityPlan } from "./capacity";
export { acceptanceFailure, AcceptanceFloorSchema, measureAcceptance, type AcceptanceMeasurement } from "./acceptance";
export { installProcessGuard, engineAddress, type ProcessGuard } from "./process-guard";
export { checkGenerating, type GenerationCheck } from "./check";
export { commandHooks, parseServiceState } from "./service-hooks";
export { measuredOutputs, VerifiedGenerationOutputsSchema, type VerifiedGenerationOutputs } from "./outputs";
export {
  BenchPlanSchema,
  VerifyPolicySchema,
  WorkloadSchema,
  type BenchPlan,
  type VerifyPolicy,
  type Workload,
} from "./schema";
export { baseUrl, EndpointError, type Endpoint } from "./http";
export {
  findKnee,
  errorRate,
  gainPerDoubling,
  withinErrorBudget,
  type Knee,
  type KneeOptions,
  type LevelFigures,
} from "./saturation";
export { armTimeout, withTimeout, raceTimeout, TimeoutError, MAX_TIMER_SECONDS, type Timeout } from "./timers";
export {
  percentile,
  answerStats,
  summarizeLevel,
  summarizeSingle,
  type LevelSamples,
  type LevelSummary,
  type SingleRequestSummary,
} from "./stats";
export type { RequestSample } from "./stream";
export type { ProbeResult } from "./probe";
export { runComparison, type CompareOptions, type CompareResult } from "./compare-run";
export { JobSchema, SERVICE_NAMES, type ServiceName } from "./compare";
export { comparisonOutputs, ServiceComparisonOutputsSchema, type ServiceComparisonOutputs } from "./compare-outputs";
export { WorkloadShapeSchema } from "./workload";
export { SloSchema } from "./goodput";
