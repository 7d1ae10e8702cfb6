// What a host's platform decides, chosen once where the program composes hosts (index.ts) and
// handed to GpuServingHost as data: a connection (with its root and tools folder, where it has
// them), the program the units start, a repository, a preparation step, the unit probes. The
// components below it take these facts and never ask which platform they run on. Two
// implementations: connectedPlatform (SSH or this machine, below) and simulatedPlatform (sim-host/host.ts).
import type * as pulumi from "@pulumi/pulumi";
import type { CudaToolkitOptions } from "./cuda-toolkit/options";
import { type HostConnectionInput, hostScript } from "./host/script";
import type { ServerProgram } from "./services/launch-args";

/** A host script step with its arguments (the shape ToolkitState's repairs take too). */
export interface PlatformStep {
  /** Script path relative to the project root. */
  script: string;
  args: string[];
}

export interface HostPlatform {
  /** How host scripts and probes reach the host. */
  connection: HostConnectionInput;
  /** What the service units start in place of SGLang from the venv; unset: SGLang from the venv. */
  serverProgram?: ServerProgram;
  /** Host seconds per wall-clock second of the server (a simulator may run its clock faster); default 1. */
  timeScale?: number;
  /** The CUDA repository to install from when the stack names none (the platform's own). */
  toolkitRepository?: { url: string; trust: "trusted" };
  /**
   * The step that makes the host ready for provisioning, run as a resource at `pulumi up` (never at
   * preview) before any other host script, and again first when drift is repaired. `triggers`
   * re-run it when what it lays out changes.
   */
  preparation?: { step: PlatformStep; triggers: string[] };
  /** argv run where `pulumi up` runs to read a unit's state and logs; undefined: read over the connection (SSH). */
  serviceProbes(unit: string): { state: pulumi.Input<string>[]; logs: pulumi.Input<string>[] } | undefined;
}

/** A real host, over SSH or this machine: SGLang runs from the venv, NVIDIA's (or the stack's) repository. */
export function connectedPlatform(connection: HostConnectionInput): HostPlatform {
  return {
    connection,
    serviceProbes: (unit) =>
      connection.kind === "local"
        ? {
            state: ["systemctl", "show", "-p", "NRestarts,ActiveState", unit],
            logs: ["journalctl", "-u", unit, "-n", "50", "--no-pager"],
          }
        : undefined,
  };
}

/** The toolkit options with the platform's own repository where the stack names none. */
export function toolkitOptionsOn(platform: HostPlatform, options: CudaToolkitOptions): CudaToolkitOptions {
  if (options.repository.url !== undefined || platform.toolkitRepository === undefined) return options;
  return { ...options, repository: { ...options.repository, ...platform.toolkitRepository } };
}

/**
 * The platform's preparation as a resource `${name}-prepare` (none where it has none): what every
 * other host script of the host waits for.
 */
export function preparationOf(
  name: string,
  platform: HostPlatform,
  opts: pulumi.CustomResourceOptions,
): pulumi.Resource[] {
  const prep = platform.preparation;
  if (prep === undefined) return [];
  return [
    hostScript(`${name}-prepare`, { connection: platform.connection, ...prep.step, triggers: prep.triggers }, opts),
  ];
}
