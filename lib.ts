/**
 * gpuhost as a library: what another Pulumi program imports (`import { GpuServingHost } from "gpuhost"`).
 * The package's `main` is the gpuhost program itself (Pulumi.yaml `main: .` runs it); `exports` gives
 * importers this file instead (README "Use it from your own program" lists the API).
 */
export { GpuServingHost, type GpuServingHostArgs, type ServingHostConfig } from "./components/gpu-serving-host";
export { connectedPlatform, type HostPlatform, type PlatformStep } from "./components/platform";
export type { ServerProgram } from "./components/services/launch-args";
export { simulatedPlatform } from "./sim-host/host";
export type { HostConnectionInput } from "./components/host/script";
export {
  ConfigSchema,
  loadConfig,
  parseConfig,
  hostConnection,
  type GpuhostConfig,
  type GpuhostConfigInput,
  type HostConfig,
  type SimulatorConfig,
} from "./stack/config";
export { CudaToolkit, type CudaToolkitArgs } from "./components/cuda-toolkit";
export { ServingEnvironment, type ServingEnvironmentArgs } from "./components/serving-env/serving-environment";
export { ServingService, type ServingServiceArgs } from "./components/services/serving-service";
export { VerifiedGeneration, type VerifiedGenerationArgs } from "./components/verified-generation";
export { ServiceComparison, type ServiceComparisonArgs } from "./components/service-comparison";
export { ToolkitState, type ToolkitStateArgs } from "./components/drift";
export { Router, type RouterArgs, fleetWorkers } from "./components/router";
export { FleetVerification, type FleetVerificationArgs } from "./components/fleet-verification";
export { hostsForJob, type JobSpec, type ServicePlan } from "./stack/plan-from-outputs";
