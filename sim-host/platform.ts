// The simulated platform: a folder standing for / on which the host scripts run unchanged.
// Scripts see GPUHOST_ROOT=<folder> and prefix every host path with it; the shims in sim-host/bin
// (apt-get, dpkg-query, update-alternatives, systemctl, journalctl) stand in for the real tools
// and keep their state inside the folder. The "apt repository" of the simulated host is the
// CUDA catalogue itself, written as package trees into the folder by prepareSimulatedHost (the
// preparation step, sim-host/scripts/prepare.sh, at `pulumi up`). No Pulumi import: the host
// layer's execOnHost and hostScript take the connection made here (a local one with a root and a
// tools folder) as data, and never ask which platform they run on.
import * as fs from "node:fs";
import * as path from "node:path";
import { writeStandinTrees } from "./standin";
import { projectFile, projectRoot } from "../project-files";
import type { LocalConnection } from "../components/host/connection";
import { workdirPath } from "../components/host/invocation";
import type { ServerProgram } from "../components/services/launch-args";
import { SERVICE_KINDS } from "../components/services/schema";
import type { SimulatorConfig } from "./config";

/**
 * Where a simulated host sees gpuhost's own folder: its preparation (linkGpuhost, below) links
 * <root>/opt/gpuhost-sim to the checkout with a relative link, so a unit names this host path and
 * not the checkout's, and a checkout moved elsewhere renders the same units. Not /opt/gpuhost: the
 * serving environment's default venv is /opt/gpuhost/venv, which then landed in the checkout.
 */
export const SIM_GPUHOST_DIR = "/opt/gpuhost-sim";

/**
 * What the simulated host's units start: the simulator's stand-in `sglang` entry
 * (dist/simulator/sglang.js under SIM_GPUHOST_DIR), which parses the same flags as SGLang (refusing
 * unknown ones) and serves what they describe, speculative decoding included. What the flags
 * cannot say (profile, time scale, faults) travels in each unit's environment. `nodePath` and
 * `gpuhostDir` are this machine's node and SIM_GPUHOST_DIR unless a test fixes them.
 */
export function simulatorProgram(
  simulator: SimulatorConfig,
  where: { nodePath?: string; gpuhostDir?: string } = {},
): ServerProgram {
  const gpuhostDir = where.gpuhostDir ?? SIM_GPUHOST_DIR;
  return {
    command: [where.nodePath ?? process.execPath, `${gpuhostDir}/dist/simulator/sglang.js`],
    environment: Object.fromEntries(
      SERVICE_KINDS.map((kind) => [
        kind,
        [
          ["GPUHOST_SIM_PROFILE", simulator.serviceProfiles[kind] ?? simulator.profile],
          ["GPUHOST_SIM_TIME_SCALE", String(simulator.timeScale)],
          ["GPUHOST_SIM_FAULTS", simulator.faults.join(",")],
          // Only when set: the units of a stack that does not set it stay as they were.
          ...(simulator.loadSeconds === undefined ? [] : [["GPUHOST_SIM_LOAD_SECONDS", String(simulator.loadSeconds)]]),
        ],
      ]),
    ),
    platform: "simulated",
  };
}

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

/** The connection of a simulated host: a local one whose root is the host's folder and whose tools are the shims. */
export type SimulatedConnection = LocalConnection & { root: string; toolsDir: string };

/**
 * The connection every host script and probe of the simulated host whose folder is `root` runs
 * with: GPUHOST_ROOT=root and the shims first on PATH, both relative to the working directory where
 * they lie inside it (workdirPath), so the commands stored in the state name no absolute folder of
 * the checkout.
 */
export function simulatedConnection(root: string): SimulatedConnection {
  return { kind: "local", root: workdirPath(root), toolsDir: workdirPath(simShimDir()) };
}

/**
 * Make `root` a simulated host: the skeleton folders a Debian host has and the apt repository
 * (stand-in package trees from the toolkit description). Idempotent and cheap when nothing changed.
 * Returns the repository URL to give CudaToolkit.
 */
export function prepareSimulatedHost(root: string): string {
  const abs = path.resolve(root);
  for (const dir of [
    "opt",
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
  linkGpuhost(abs);
  return SIM_REPO_URL;
}

/**
 * <root>/opt/gpuhost-sim -> gpuhost's folder, as a RELATIVE link: the units name the host path
 * SIM_GPUHOST_DIR instead of the checkout's, and a checkout moved elsewhere (its .gpuhost/ with it)
 * keeps a link that still points at it. Rewritten only when it points elsewhere.
 */
function linkGpuhost(abs: string): void {
  // Hosts prepared before laid this link at <root>/opt/gpuhost, the parent of the default venv: a
  // link there sent the venv's files into the checkout. Only a link is removed, never a folder.
  const old = path.join(abs, "opt", "gpuhost");
  if (fs.lstatSync(old, { throwIfNoEntry: false })?.isSymbolicLink()) fs.rmSync(old);
  const link = path.join(abs, SIM_GPUHOST_DIR);
  const target = path.relative(fs.realpathSync(path.dirname(link)), fs.realpathSync(projectRoot()));
  let current: string | undefined;
  try {
    current = fs.readlinkSync(link);
  } catch {
    current = undefined;
  }
  if (current === target) return;
  fs.rmSync(link, { force: true });
  fs.symlinkSync(target, link);
}
