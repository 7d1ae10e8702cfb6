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
} from "./measurement/bench";
export { capacity, type CapacityPlan } from "./measurement/capacity";
export {
  mixedVerdictOf,
  verdictOf,
  type MixedClass,
  type MixedVerdict,
  type Verdict,
  type VerdictInput,
} from "./measurement/verdict";
export { forWorkers } from "./measurement/for-workers";
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
} from "./schema";
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
} from "./measurement/saturation";
export {
  armTimeout,
  withTimeout,
  raceTimeout,
  TimeoutError,
  MAX_TIMER_SECONDS,
  type Timeout,
} from "./transport/timers";
export { percentile, answerStats, summarizeSingle, type SingleRequestSummary } from "./measurement/stats";
export {
  summarizeLevel,
  summarizeSweepLevel,
  levelName,
  type LevelSamples,
  type LevelSummary,
  type SweepLevel,
} from "./measurement/levels";
export { measureSweep, toHostTime, type HostClock } from "./measurement/load";
export {
  runMixedTraffic,
  type ClassResult,
  type MixedTrafficOptions,
  type MixedTrafficResult,
  type TrafficClass,
} from "./measurement/mixed-run";
export type { RequestSample } from "./measurement/stream";
export type { ProbeResult } from "./readiness/probe";
export { runComparison, type CompareOptions, type CompareResult } from "./measurement/compare-run";
export { JobSchema, SERVICE_NAMES, type ServiceName } from "./measurement/compare";
export { comparisonOutputs, ServiceComparisonOutputsSchema, type ServiceComparisonOutputs } from "./reports/outputs";
export { WorkloadShapeSchema } from "./measurement/workload";
export {
  fleetCounters,
  parseCounters,
  readCounters,
  SERVER_COUNTERS,
  type CounterRead,
} from "./measurement/server-counters";
export {
  certificateText,
  CertificateSchema,
  CertificationSchema,
  certify,
  type Certificate,
  type CertificateCheck,
} from "./measurement/certificate";
export { SloSchema } from "./measurement/goodput";
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
} from "./readiness/health";
export { HealthPolicySchema, type HealthPolicy } from "./schema";
export { answerScoreBaseline } from "./readiness/answer-health";
export {
  answersFailure,
  answerAgreement,
  checkAnswers,
  NOT_CHECKED,
  type AnswerAgreement,
  type AnswerCertificate,
} from "./readiness/answers";
export { DEFAULT_ANSWER_SET, readAnswerSet, type AnswerItem, type AnswerSet } from "./readiness/answer-set";
