// The host layer: connections, quoting, host scripts through @pulumi/command, and (without
// Pulumi) execOnHost for dynamic providers plus the simulated platform.
export * from "./connection";
export * from "./quote";
export * from "./invocation";
export * from "./script";
export { execOnHost, type ExecOptions, type ExecResult } from "./exec";
export {
  prepareSimulatedHost,
  simShimDir,
  simulatedEnvironment,
  SIM_REPO_URL,
  SIM_REPO_HOST_PATH,
} from "./sim/platform";
