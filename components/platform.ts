// What a host's platform decides, chosen once where the program composes hosts (index.ts) and
// handed to GpuServingHost: the components below it take plain facts (a connection, a program for
// the units, a repository) and never ask which platform they run on. Two implementations:
// connectedPlatform (SSH or this machine, below) and simulatedPlatform (sim-host/platform-resource.ts).
import type * as pulumi from "@pulumi/pulumi";
import type { HostConnectionInput } from "./host/script";
import type { ServingServiceArgs } from "./services/serving-service";

/** A host script step with its arguments (the shape ToolkitState's repairs take too). */
export interface PlatformStep {
  /** Script path relative to the project root. */
  script: string;
  args: string[];
}

export interface HostPlatform {
  /** How host scripts and probes reach the host. */
  connection: HostConnectionInput;
  /** What the service units start. */
  serverProgram: ServingServiceArgs["program"];
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
    serverProgram: { kind: "sglang" },
    serviceProbes: (unit) =>
      connection.kind === "local"
        ? {
            state: ["systemctl", "show", "-p", "NRestarts,ActiveState", unit],
            logs: ["journalctl", "-u", unit, "-n", "50", "--no-pager"],
          }
        : undefined,
  };
}
