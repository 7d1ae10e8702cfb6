// The simulated platform as the program composes it: a HostPlatform (components/platform.ts) whose
// connection runs the host scripts with GPUHOST_ROOT and the shims, whose units start the SGLang
// simulator, whose CUDA repository is the catalogue laid out in the folder, and whose preparation
// (scripts/prepare.sh) lays that folder out as a resource step at `pulumi up`, never at preview.
import * as path from "node:path";
import * as pulumi from "@pulumi/pulumi";
import { descriptionHash } from "../components/cuda-catalog/catalog";
import type { SimulatorConfig } from "./config";
import type { HostPlatform } from "../components/platform";
import { projectRoot } from "../project-files";
import { SIM_REPO_URL, simShimDir, simulatorProgram } from "./platform";
import { workdirPath } from "../components/host/invocation";

export const PREPARE_SCRIPT = "sim-host/scripts/prepare.sh";

/**
 * The platform of a simulated host whose folder (standing for /) is `root`: an Input, so a resource
 * standing for a VM can make the folder and hand it over (examples/).
 */
export function simulatedPlatform(root: pulumi.Input<string>, simulator: SimulatorConfig): HostPlatform {
  // Relative to the program's folder where it lies inside it (workdirPath): the state then names no
  // absolute folder of the checkout, and a moved checkout shows no diff.
  const where = pulumi.output(root).apply((r) => workdirPath(r));
  return {
    connection: { kind: "local", root: where, toolsDir: workdirPath(simShimDir()) },
    serverProgram: simulatorProgram(simulator),
    timeScale: simulator.timeScale,
    toolkitRepository: { url: SIM_REPO_URL, trust: "trusted" },
    // The catalogue's hash: an edited catalogue lays the repository out again.
    preparation: {
      step: { script: PREPARE_SCRIPT, args: [workdirPath(path.join(projectRoot(), "dist", "sim-host", "prepare.js"))] },
      triggers: [descriptionHash()],
    },
    serviceProbes: (unit) => {
      const shims = workdirPath(simShimDir());
      // No PATH here: it would land in the resource's inputs and make every run a diff. The argv runs
      // in the program's folder, where relative paths resolve.
      const env = ["env", pulumi.interpolate`GPUHOST_ROOT=${where}`];
      return {
        state: [...env, path.join(shims, "systemctl"), "show", "-p", "NRestarts,ActiveState", unit],
        logs: [...env, path.join(shims, "journalctl"), "-u", unit, "-n", "50", "--no-pager"],
      };
    },
  };
}
