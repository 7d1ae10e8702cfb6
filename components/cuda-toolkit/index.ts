export { CudaToolkit, cudaToolkitDrift, cudaToolkitPlan, type CudaToolkitArgs } from "./cuda-toolkit";
export {
  cudaToolkitOptionsSchema,
  cudaRepositorySchema,
  defaultRepositoryUrl,
  type CudaToolkitOptions,
  type CudaToolkitOptionsInput,
} from "./options";
export { toolkitPlan, type ToolkitPlan, type ScriptStep } from "./plan";
export { toolkitFingerprint, parsePackageVersions } from "./fingerprint";
