/**
 * The stand-in `python -m sglang.launch_server`: takes SGLang's own command line (what a gpuhost
 * unit renders for a real host), refuses what SGLang refuses, and serves the simulator with the
 * model the flags describe: --speculative-algorithm picks the profile's draft behaviour, the
 * speculative settings change its acceptance and cost, --tp and --mem-fraction-static decide
 * whether the weights fit, --max-running-requests and --context-length replace the profile's.
 * Like SGLang, the port opens only once the weights are loaded.
 *
 * What the flags cannot say (which host this is, how fast simulated time runs, injected faults)
 * comes from the environment, which a simulated host's unit sets:
 *   GPUHOST_SIM_PROFILE (default tiny), GPUHOST_SIM_TIME_SCALE (default 1), GPUHOST_SIM_FAULTS (comma-separated),
 *   GPUHOST_SIM_LOAD_SECONDS (unset: the profile's load range).
 * Faults switched on while it runs are named in GPUHOST_SIM_FAULTS_FILE, by default the host's
 * /run/gpuhost-sim/faults (under GPUHOST_ROOT, which a simulated host's units get).
 *
 *   node dist/simulator/sglang.js --model-path M --tp 8 --speculative-algorithm EAGLE3 ...
 */
import * as path from "node:path";
import { startSimulator } from "./index";
import { loadProfile, ProfileError, withSpeculative, type Profile } from "./profile";
import { ArgparseError, parseSglangArgs, ServerArgsError, USAGE, type SglangArgs } from "./sglang-args";

export interface StandinEnv {
  GPUHOST_SIM_PROFILE?: string;
  GPUHOST_SIM_TIME_SCALE?: string;
  GPUHOST_SIM_FAULTS?: string;
  GPUHOST_SIM_FAULTS_FILE?: string;
  /** simulator.loadSeconds: every load takes this many simulated seconds instead of the profile's range. */
  GPUHOST_SIM_LOAD_SECONDS?: string;
  GPUHOST_ROOT?: string;
}

/** The faults file of a stand-in started with ENV (see the file's comment). */
export function faultsFileOf(env: StandinEnv): string {
  return env.GPUHOST_SIM_FAULTS_FILE || path.join(env.GPUHOST_ROOT || "/", "run/gpuhost-sim/faults");
}

/** The profile the flags describe on the environment's host; throws ServerArgsError/ProfileError. */
export function profileFor(args: SglangArgs, env: StandinEnv): { profile: Profile; faults: string[] } {
  const base = loadProfile(env.GPUHOST_SIM_PROFILE || "tiny");
  let profile = withSpeculative(base, args.speculative ?? null);
  profile = {
    ...profile,
    model: {
      ...profile.model,
      path: args.model_path,
      contextLength: args.context_length ?? profile.model.contextLength,
      reasoningParser: args.reasoning_parser ?? null,
      toolCallParser: args.tool_call_parser ?? null,
    },
    hardware: { ...profile.hardware, count: args.tp_size },
    decode: { ...profile.decode, maxRunningRequests: args.max_running_requests ?? profile.decode.maxRunningRequests },
    memFractionStatic: args.mem_fraction_static ?? profile.memFractionStatic,
    enableMetrics: args.enable_metrics,
  };
  const loadSeconds = env.GPUHOST_SIM_LOAD_SECONDS;
  if (loadSeconds !== undefined && loadSeconds !== "") {
    const seconds = Number(loadSeconds);
    if (!(seconds >= 0) || !Number.isFinite(seconds))
      throw new ProfileError(`GPUHOST_SIM_LOAD_SECONDS must be a number of seconds >= 0, got '${loadSeconds}'`);
    profile = { ...profile, load: { ...profile.load, minSeconds: seconds, maxSeconds: seconds } };
  }
  const faults = (env.GPUHOST_SIM_FAULTS ?? "")
    .split(",")
    .map((f) => f.trim())
    .filter(Boolean);
  // Weights are split over the tensor-parallel GPUs; what does not fit in the static fraction of
  // one GPU's memory is SGLang's CUDA out of memory during the load.
  const perGpu = profile.model.weightsGB / args.tp_size;
  if (args.tp_size > base.hardware.count)
    throw new ServerArgsError(
      `--tp-size ${args.tp_size} needs ${args.tp_size} GPUs; this host has ${base.hardware.count}`,
    );
  if (perGpu > profile.hardware.memoryGiBPerGpu * profile.memFractionStatic && !faults.includes("oom-at-load"))
    faults.push("oom-at-load");
  return { profile, faults };
}

export async function sglangMain(argv: string[], env: StandinEnv = process.env): Promise<number> {
  let args: SglangArgs;
  try {
    args = parseSglangArgs(argv, (msg) => process.stderr.write(`WARNING ${msg}\n`));
  } catch (err) {
    if (err instanceof ArgparseError) {
      process.stderr.write(`${USAGE}\nlaunch_server.py: error: ${err.message}\n`);
      return 2;
    }
    if (err instanceof ServerArgsError) {
      process.stderr.write(`ValueError: ${err.message}\n`);
      return 1;
    }
    throw err;
  }
  let chosen: { profile: Profile; faults: string[] };
  try {
    chosen = profileFor(args, env);
  } catch (err) {
    if (err instanceof ServerArgsError || err instanceof ProfileError) {
      process.stderr.write(`ValueError: ${err.message}\n`);
      return 1;
    }
    throw err;
  }
  const timeScale = Number(env.GPUHOST_SIM_TIME_SCALE ?? "1");
  if (!(timeScale > 0) || !Number.isFinite(timeScale)) {
    process.stderr.write(`GPUHOST_SIM_TIME_SCALE must be a positive number, got '${env.GPUHOST_SIM_TIME_SCALE}'\n`);
    return 2;
  }
  const sim = await startSimulator({
    profile: chosen.profile,
    faults: chosen.faults,
    host: args.host,
    port: args.port,
    timeScale,
    apiKey: args.api_key,
    servedModelName: args.served_model_name ?? args.model_path,
    openPortAfterLoad: true,
    skipWarmup: args.skip_server_warmup,
    maxQueuedRequests: args.max_queued_requests,
    faultsFile: faultsFileOf(env),
    onExit: (code) => process.exit(code),
  });
  return new Promise<number>((resolve) => {
    const stop = (): void => {
      process.off("SIGTERM", stop);
      process.off("SIGINT", stop);
      void sim.close().then(() => resolve(0));
    };
    process.on("SIGTERM", stop);
    process.on("SIGINT", stop);
  });
}

if (require.main === module) {
  sglangMain(process.argv.slice(2)).then(
    (code) => process.exit(code),
    (err: unknown) => {
      process.stderr.write(`${(err as Error)?.stack ?? String(err)}\n`);
      process.exit(1);
    },
  );
}
