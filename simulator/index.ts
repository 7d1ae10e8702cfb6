import * as net from "node:net";
import { freeLocalPort } from "../ports";
import { FAULT_NAMES, type FaultName } from "./faults";
import { drawLoadSeconds } from "./perf-model";
import { loadProfile, type Profile } from "./profile";
import { SimRequest } from "./scheduler";
import { createHttpServer } from "./server";
import { SimState } from "./state";

export { FAULTS, FAULT_NAMES, type FaultName } from "./faults";
export { listProfiles, loadProfile, parseProfile, ProfileError, type Profile } from "./profile";
export { expectedRun, theoreticalLevel } from "./perf-model";

export interface SimulatorOptions {
  /** A shipped profile (simulator/profiles/<name>.yaml), a path to a YAML profile, or a loaded one. */
  profile: string | Profile;
  /** Faults added to the profile's own. */
  faults?: string[];
  /** 0: an ephemeral port. Default 30000, SGLang's. */
  port?: number;
  /** Default 127.0.0.1. */
  host?: string;
  /** Simulated seconds per wall second (default 1). See simulator/README.md. */
  timeScale?: number;
  /** Require `Authorization: Bearer <apiKey>` as SGLang's --api-key does. */
  apiKey?: string;
  /** --served-model-name; default the profile's. */
  servedModelName?: string;
  /**
   * Open the port only once the weights are loaded, as SGLang's server does (the stand-in `sglang`
   * entry sets it). Default false: the port opens at once and answers 503 while loading.
   */
  openPortAfterLoad?: boolean;
  /** A connection must send its request headers within this (default 10 s); idle ones are closed. */
  headersTimeoutMs?: number;
  /** --max-queued-requests: requests waiting beyond this are answered 503 (default 4096). */
  /** A file naming faults switched on while the server runs (SimStateOptions.faultsFile). */
  faultsFile?: string;
  maxQueuedRequests?: number;
  /** --skip-server-warmup: ready right after the load, without the warmup generation. */
  skipWarmup?: boolean;
  /** Called when a fault ends the simulated process (jit-crash, oom-at-load). Default: process.exit. */
  onExit?: (code: number) => void;
  /** One server log line (stderr in the CLI). Default: process.stderr. */
  log?: (line: string) => void;
}

export interface RunningSimulator {
  url: string;
  port: number;
  close(): Promise<void>;
}

export class UnknownFaultError extends Error {}

/** uvicorn's status when it cannot bind (Server.startup: logger.error, then sys.exit(1)). */
export const BIND_FAILURE_EXIT = 1;

/** asyncio's bind error as uvicorn logs it: errno, address, strerror ("address already in use"). */
export function bindErrorText(err: NodeJS.ErrnoException, host: string, port: number): string {
  const known: Record<string, [number, string]> = {
    EADDRINUSE: [98, "address already in use"],
    EACCES: [13, "permission denied"],
    EADDRNOTAVAIL: [99, "cannot assign requested address"],
  };
  const [errno, text] = known[err.code ?? ""] ?? [err.errno ?? 0, err.message];
  return `[Errno ${Math.abs(errno)}] error while attempting to bind on address ('${host}', ${port}): ${text} (${err.code ?? "listen"})`;
}

export function parseFaults(names: string[]): FaultName[] {
  const out: FaultName[] = [];
  for (const name of names
    .flatMap((n) => n.split(","))
    .map((n) => n.trim())
    .filter(Boolean)) {
    if (!(FAULT_NAMES as string[]).includes(name))
      throw new UnknownFaultError(`unknown fault '${name}'; known: ${FAULT_NAMES.join(", ")}`);
    out.push(name as FaultName);
  }
  return out;
}

export async function startSimulator(opts: SimulatorOptions): Promise<RunningSimulator> {
  const profile = typeof opts.profile === "string" ? loadProfile(opts.profile) : opts.profile;
  const faults = new Set<FaultName>([...profile.faults, ...parseFaults(opts.faults ?? [])]);
  const host = opts.host ?? "127.0.0.1";
  const log = opts.log ?? ((line: string) => process.stderr.write(`${line}\n`));
  const onExit = opts.onExit ?? ((code: number) => process.exit(code));
  const state = new SimState({
    profile,
    faults,
    timeScale: opts.timeScale ?? 1,
    apiKey: opts.apiKey ?? null,
    servedModelName: opts.servedModelName ?? profile.model.servedModelName ?? profile.model.path,
    host,
    log,
    maxQueuedRequests: opts.maxQueuedRequests,
    faultsFile: opts.faultsFile,
  });
  const { server, sockets } = createHttpServer(state, { headersTimeoutMs: opts.headersTimeoutMs });
  const timers: NodeJS.Timeout[] = [];
  let closed: Promise<void> | null = null;

  const shutdown = (): Promise<void> => {
    if (!closed) {
      closed = new Promise<void>((resolve) => {
        for (const t of timers) clearTimeout(t);
        state.clock.stop();
        state.scheduler.stop();
        for (const s of sockets) s.destroy();
        if (server.listening) server.close(() => resolve());
        else resolve();
      });
    }
    return closed;
  };
  state.die = (code: number) => {
    if (state.status === "dead" || state.status === "closed") return;
    state.status = "dead";
    state.truth.failed.crashed +=
      state.scheduler.running.filter((r) => !r.plan.internal).length + state.scheduler.queue.length;
    void shutdown().then(() => onExit(code));
  };

  const listen = (port: number): Promise<number> =>
    new Promise((resolve, reject) => {
      server.once("error", reject);
      server.listen(port, host, () => {
        server.off("error", reject);
        resolve((server.address() as net.AddressInfo).port);
      });
    });

  const lateSettings = profile.faultSettings.latePort;
  const late = faults.has("late-port") || opts.openPortAfterLoad === true;
  const requested = opts.port ?? 30000;
  const port = late ? (requested === 0 ? await freeLocalPort(host) : requested) : await listen(requested);
  state.port = port;
  const url = `http://${host.includes(":") ? `[${host}]` : host}:${port}`;

  const openLatePort = (): void => {
    if (state.status === "dead" || state.status === "closed" || server.listening) return;
    listen(port).then(
      () => state.log(`Uvicorn running on ${url} (Press CTRL+C to quit)`),
      (err: NodeJS.ErrnoException) => {
        // uvicorn logs the bind error and exits 1: a server that cannot serve does not linger, and
        // systemd sees a failed unit (a process that returned 0 here would leave it inactive).
        state.raw(`ERROR:    ${bindErrorText(err, host, port)}`);
        state.die(BIND_FAILURE_EXIT);
      },
    );
  };

  // The load: SGLang prints the server args, loads weights, captures graphs, then warms up.
  state.loadSeconds = drawLoadSeconds(profile);
  const sp = profile.speculative;
  const spec = sp
    ? ` speculative_algorithm='${sp.algorithm}', speculative_draft_model_path='${sp.draftModelPath}', speculative_num_steps=${sp.numSteps}, speculative_eagle_topk=${sp.eagleTopk}, speculative_num_draft_tokens=${sp.numDraftTokens},`
    : "";
  state.log(
    `server_args=ServerArgs(model_path='${profile.model.path}', tp_size=${profile.hardware.count}, host='${host}', port=${port},${spec} time_scale=${state.timeScale}, faults=[${[...faults].join(",")}])`,
  );
  state.log(
    `Load weight begin. avail mem=${(profile.hardware.memoryGiBPerGpu - 1.2).toFixed(2)} GB (expected load ${state.loadSeconds.toFixed(1)} s)`,
  );
  if (!late) state.log(`Uvicorn running on ${url} (Press CTRL+C to quit)`);
  else if (lateSettings.delaySeconds !== null) timers.push(state.clock.after(lateSettings.delaySeconds, openLatePort));

  if (faults.has("oom-at-load")) {
    const { atLoadFraction, exitCode } = profile.faultSettings.oomAtLoad;
    timers.push(
      state.clock.after(state.loadSeconds * atLoadFraction, () => {
        const total = profile.hardware.memoryGiBPerGpu;
        state.raw("Traceback (most recent call last):");
        state.raw(
          '  File "/opt/sglang/lib/python3.12/site-packages/sglang/srt/model_executor/model_runner.py", line 812, in load_model',
        );
        state.raw(
          `torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 3 has a total capacity of ${total.toFixed(2)} GiB of which 1.06 GiB is free. Including non-PyTorch memory, this process has ${(total - 1.5).toFixed(2)} GiB memory in use. Of the allocated memory ${(total - 3).toFixed(2)} GiB is allocated by PyTorch.`,
        );
        state.log("Received sigquit from a child process. It usually means the child failed.");
        state.die(exitCode);
      }),
    );
  } else {
    timers.push(
      state.clock.after(state.loadSeconds, () => {
        if (state.status !== "loading") return;
        state.log(
          `Load weight end. type=${profile.model.path.split("/").pop()}, mem usage=${(profile.model.weightsGB / profile.hardware.count).toFixed(2)} GB.`,
        );
        state.status = "warmup";
        state.loaded();
        if (late && lateSettings.delaySeconds === null) openLatePort();
        if (opts.skipWarmup) {
          // --skip-server-warmup: SGLang marks itself up with no generation at all.
          state.status = "ready";
          state.log("The server is fired up and ready to roll!");
        } else timers.push(state.clock.after(profile.load.warmupSeconds, () => warmup()));
      }),
    );
  }

  // SGLang's startup warmup: one 8-token /generate; the server is "fired up" when it returns.
  const warmup = (): void => {
    if (state.status !== "warmup") return;
    state.submit(
      new SimRequest(
        { promptTokens: 8, limit: 8, internal: true },
        () => {},
        () => {
          if (state.status !== "warmup") return;
          state.status = "ready";
          state.log("The server is fired up and ready to roll!");
        },
      ),
    );
  };

  return {
    url,
    port,
    close: async () => {
      if (state.status !== "dead") state.status = "closed";
      await shutdown();
    },
  };
}
