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
} from "./readiness/verify";
export {
  bench,
  summarizeBench,
  type BenchHooks,
  type BenchProgress,
  type BenchResult,
  type BenchSamples,
  type BenchSummary,
} from "./run/bench";
export { capacity, type CapacityPlan } from "./plan/capacity";
export {
  mixedVerdictOf,
  verdictOf,
  type MixedClass,
  type MixedVerdict,
  type Verdict,
  type VerdictInput,
} from "./judge/verdict";
export { forWorkers } from "./run/for-workers";
export {
  acceptanceFailure,
  AcceptanceFloorSchema,
  measureAcceptance,
  parseSpecAcceptLength,
  type AcceptanceMeasurement,
} from "./readiness/acceptance";
export { installProcessGuard, engineAddress, type ProcessGuard } from "./transport/process-guard";
export { checkGenerating, type GenerationCheck } from "./readiness/check";
export { commandHooks, parseServiceState } from "./readiness/service-hooks";
export { measuredOutputs, VerifiedGenerationOutputsSchema, type VerifiedGenerationOutputs } from "./reports/outputs";
export {
  BenchPlanSchema,
  VerifyPolicySchema,
  WorkloadSchema,
  type BenchPlan,
  type VerifyPolicy,
  type Workload,
} from "./base/schema";
export { baseUrl, EndpointError, type Endpoint } from "./transport/http";
export {
  findKnee,
  findRateSaturation,
  judgeLevels,
  errorRate,
  gainPerDoubling,
  withinErrorBudget,
  type Knee,
  type KneeOptions,
  type LevelFigures,
} from "./judge/saturation";
export {
  armTimeout,
  withTimeout,
  raceTimeout,
  TimeoutError,
  MAX_TIMER_SECONDS,
  type Timeout,
} from "./transport/timers";
export { percentile, answerStats, summarizeSingle, type SingleRequestSummary } from "./judge/stats";
export {
  summarizeLevel,
  summarizeSweepLevel,
  levelName,
  type LevelSamples,
  type LevelSummary,
  type SweepLevel,
} from "./judge/levels";
export { measureSweep, toHostTime, type HostClock } from "./run/load";
export {
  runMixedTraffic,
  type ClassResult,
  type MixedTrafficOptions,
  type MixedTrafficResult,
  type TrafficClass,
} from "./run/mixed-run";
export type { RequestSample } from "./base/samples";
export type { ProbeResult } from "./readiness/probe";
export { runComparison, type CompareOptions, type CompareResult } from "./plan/compare-run";
export { JobSchema, SERVICE_NAMES, type ServiceName } from "./plan/compare";
export { comparisonOutputs, ServiceComparisonOutputsSchema, type ServiceComparisonOutputs } from "./reports/outputs";
export { WorkloadShapeSchema } from "./base/workload";
export { fleetCounters, parseCounters, readCounters } from "./run/server-counters";
export { SERVER_COUNTERS, type CounterRead } from "./base/samples";
export {
  certificateText,
  CertificateSchema,
  certify,
  type Certificate,
  type CertificateCheck,
} from "./judge/certificate";
export { CertificationSchema, SloSchema } from "./base/schema";
export {
  answerDifference,
  checkHealth,
  bestDecodeProbe,
  probeAcceptance,
  decodeProbe,
  healthDrift,
  recordHealth,
  referenceAnswer,
  type HealthBaseline,
  type HealthCheck,
  type HealthFinding,
} from "./health/health";
export { HealthPolicySchema, type HealthPolicy } from "./base/schema";
export { answerScoreBaseline } from "./health/answer-health";
export {
  answersFailure,
  answerAgreement,
  checkAnswers,
  NOT_CHECKED,
  type AnswerAgreement,
  type AnswerCertificate,
} from "./readiness/answers";
export { DEFAULT_ANSWER_SET, readAnswerSet, type AnswerItem, type AnswerSet } from "./base/answer-set";
