// The simulated platform: a folder standing for / on which the host scripts run unchanged.
// Scripts see GPUHOST_ROOT=<folder> and prefix every host path with it; the shims in sim-host/bin
// (apt-get, dpkg-query, update-alternatives, systemctl, journalctl) stand in for the real tools
// and keep their state inside the folder. The "apt repository" of the simulated host is the
// CUDA catalogue itself, written as package trees into the folder by prepareSimulatedHost (the
// preparation step, sim-host/scripts/prepare.sh, at `pulumi up`). No Pulumi import: the host
// layer's execOnHost and hostScript take the environment from here.
import * as fs from "node:fs";
import * as path from "node:path";
import { writeStandinTrees } from "../components/cuda-catalog/catalog";
import { projectFile } from "../project-files";

/** Where the simulated host's apt repository lives, as the host sees it. */
export const SIM_REPO_HOST_PATH = "/var/lib/gpuhost-sim/apt-repo";
/** The repository URL CudaToolkit is given on a simulated host (the apt-get shim resolves file: URLs under GPUHOST_ROOT). */
export const SIM_REPO_URL = `file://${SIM_REPO_HOST_PATH}`;

/**
 * The folder of shim wrappers, found from source (tsx/vitest) and from dist/ alike. The wrappers
 * run the compiled shims in dist/sim-host/ (npm run build).
 */
export function simShimDir(): string {
  return path.dirname(projectFile("sim-host/bin/apt-get"));
}

/** Environment every host script gets on the simulated host. */
export function simulatedEnvironment(root: string): { environment: Record<string, string>; pathPrefix: string } {
  return { environment: { GPUHOST_ROOT: path.resolve(root) }, pathPrefix: simShimDir() };
}

/**
 * Make `root` a simulated host: the skeleton folders a Debian host has and the apt repository
 * (stand-in package trees from the toolkit description). Idempotent and cheap when nothing changed.
 * Returns the repository URL to give CudaToolkit.
 */
export function prepareSimulatedHost(root: string): string {
  const abs = path.resolve(root);
  for (const dir of [
    "etc/apt/sources.list.d",
    "etc/systemd/system",
    "usr/local",
    "usr/share/keyrings",
    "var/lib/dpkg/info",
    "run",
    "tmp",
  ]) {
    fs.mkdirSync(path.join(abs, dir), { recursive: true });
  }
  writeStandinTrees(path.join(abs, SIM_REPO_HOST_PATH));
  return SIM_REPO_URL;
}
