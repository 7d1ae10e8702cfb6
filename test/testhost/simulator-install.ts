/**
 * Puts the project's compiled SGLang simulator on a test host at /opt/gpuhost-sim (what the stand-in
 * sglang.launch_server execs), with its profiles and its two runtime packages (yaml, zod). The
 * host's Node.js is Debian bookworm's (18.x), so the simulator is compiled for ES2022 as the project is.
 */
import { existsSync, promises as fs, realpathSync } from "node:fs";
import * as path from "node:path";
import { run } from "./proc";

export const SIMULATOR_DIR = "/opt/gpuhost-sim";
export const SIMULATOR_MAIN = `${SIMULATOR_DIR}/dist/cli/sim-server.js`;
/** The simulator's stand-in `sglang.launch_server` (simulator/sglang.ts): SGLang's own flags in. */
export const SIMULATOR_SGLANG = `${SIMULATOR_DIR}/dist/simulator/sglang.js`;
const REPO = path.resolve(__dirname, "../..");

/** Compiles cli/sim-server.ts and simulator/sglang.ts (and what they import) into `out`/dist, laid out as in the repository. */
export async function buildSimulatorBundle(out: string): Promise<string> {
  await fs.mkdir(out, { recursive: true });
  await run(
    path.join(REPO, "node_modules/.bin/tsc"),
    [
      "--target",
      "ES2022",
      "--module",
      "commonjs",
      "--moduleResolution",
      "node",
      "--esModuleInterop",
      "--resolveJsonModule",
      "--skipLibCheck",
      "--strict",
      "--types",
      "node",
      "--rootDir",
      REPO,
      "--outDir",
      path.join(out, "dist"),
      path.join(REPO, "cli/sim-server.ts"),
      path.join(REPO, "simulator/sglang.ts"),
    ],
    { cwd: REPO, timeoutMs: 180_000 },
  );
  await fs.cp(path.join(REPO, "simulator/profiles"), path.join(out, "simulator/profiles"), { recursive: true });
  for (const pkg of ["yaml", "zod"]) {
    await fs.cp(path.join(REPO, "node_modules", pkg), path.join(out, "node_modules", pkg), {
      recursive: true,
      dereference: true,
    });
  }
  return out;
}

/**
 * The simulator as mounts of this checkout (harness `binds`), in the bundle's layout at
 * /opt/gpuhost-sim: the project's own compile (dist/, ES2022 and commonjs as buildSimulatorBundle
 * makes it; the end-to-end suites need it compiled anyway), its profiles and its two runtime
 * packages. Nothing to compile or copy per host.
 */
export function simulatorBinds(): Array<{ path: string; from: string }> {
  const dist = path.join(REPO, "dist");
  for (const main of [SIMULATOR_MAIN, SIMULATOR_SGLANG]) {
    const compiled = path.join(dist, path.relative(`${SIMULATOR_DIR}/dist`, main));
    if (!existsSync(compiled)) throw new Error(`${compiled} is missing: compile the project first (npx tsc -p .)`);
  }
  return [
    { path: `${SIMULATOR_DIR}/dist`, from: dist },
    { path: `${SIMULATOR_DIR}/simulator/profiles`, from: path.join(REPO, "simulator/profiles") },
    ...["yaml", "zod"].map((pkg) => ({
      path: `${SIMULATOR_DIR}/node_modules/${pkg}`,
      from: realpathSync(path.join(REPO, "node_modules", pkg)),
    })),
  ];
}

/** Copies a bundle into a test host's root filesystem (the container sees it at once). */
export async function installSimulator(bundle: string, hostRootDir: string): Promise<void> {
  const target = path.join(hostRootDir, SIMULATOR_DIR.slice(1));
  await fs.rm(target, { recursive: true, force: true });
  await fs.cp(bundle, target, { recursive: true });
  // the services run as an unprivileged user; a bundle made under mkdtemp (0700) would be unreadable
  await run("chmod", ["-R", "a+rX", target]);
}

/** The stand-in sglang's config (see standin-python/sglang/sglang/launch_server.py). */
export interface StandinSglangConfig {
  profiles: Record<string, string>;
  timeScale: number;
  faults: string[];
}

export async function writeStandinSglangConfig(hostRootDir: string, cfg: StandinSglangConfig): Promise<void> {
  const file = path.join(hostRootDir, "etc/gpuhost-standin/sglang.json");
  await fs.mkdir(path.dirname(file), { recursive: true });
  await fs.writeFile(
    file,
    `${JSON.stringify({ simulatorSglang: SIMULATOR_SGLANG, node: "/usr/bin/node", ...cfg }, null, 2)}\n`,
  );
}
