// The host layer: connections, quoting, host scripts through @pulumi/command, and (without
// Pulumi) execOnHost for dynamic providers. The simulated platform is sim-host/.
export * from "./connection";
export * from "./quote";
export * from "./invocation";
export * from "./script";
export { execOnHost, type ExecOptions, type ExecResult } from "./exec";
