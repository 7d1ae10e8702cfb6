/**
 * The dynamic provider's process must not outlive `pulumi up`. The engine starts it and reads its
 * stderr; after `kill -9` of pulumi nothing tells it to stop: every write to stderr then fails with
 * EPIPE, and @pulumi/pulumi's dynamic-provider host logs each uncaught error to that same stderr,
 * a loop that burned most of a core and grew by tens of MB/s. This guard, installed once per
 * process by the VerifiedGeneration provider:
 * - answers EPIPE on stdout/stderr by going silent and leaving;
 * - notices the engine is gone (its gRPC port, argv's last host:port, refuses; or the parent
 *   changed) and leaves;
 * - turns the engine's Cancel call (the first Ctrl-C to `pulumi up`, see hookEngineCancel) and SIGINT
 *   into an abort of the running gate and benchmark, so `pulumi up` stops within about a second
 *   instead of finishing the run;
 * - on leaving, aborts, awaits the registered cleanups (tunnels, key folders) for a bounded time,
 *   then exits.
 */
import { openTcp } from "../../ports";

export interface ProcessGuard {
  /** Aborted on SIGINT/SIGTERM or when the engine is gone: pass it to verify() and bench(). */
  readonly signal: AbortSignal;
  /** Registers a cleanup run before the process leaves; returns its unregistration. */
  onLeave(fn: () => unknown): () => void;
}

const KEY = Symbol.for("gpuhost.processGuard");
const CLEANUP_BOUND_MS = 3_000;
const ANSWER_GRACE_MS = 200;

/** The engine's gRPC address the dynamic-provider host was started with (its last host:port argument). */
export function engineAddress(argv: readonly string[]): { host: string; port: number } | null {
  for (let i = argv.length - 1; i >= 2; i--) {
    const m = /^(127\.0\.0\.1|localhost|\[::1\]|::1):(\d{1,5})$/.exec(argv[i]);
    if (m) return { host: m[1].replace(/^\[|\]$/g, ""), port: Number(m[2]) };
  }
  return null;
}

/** Whether nothing listens on ADDR (refused, or a self-connection: openTcp); a timeout is no answer. */
async function refuses(addr: { host: string; port: number }): Promise<boolean> {
  try {
    (await openTcp(addr.host, addr.port, { timeoutMs: 1_000 })).destroy();
    return false;
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    return code === "ECONNREFUSED" || code === "ESELFCONNECT";
  }
}

/**
 * Calls ON_GONE once when the engine that started this plugin process is gone: the parent changed
 * (the engine was killed and the process re-parented), or the engine's gRPC address (argv's last
 * host:port) refuses connections twice in a row. A plugin process the engine can no longer reach
 * must leave on its own: nobody else will stop it. The poll does not keep the process alive.
 */
export function watchEngine(
  opts: { pollMs?: number; argv?: readonly string[] },
  onGone: (why: string) => void,
): () => void {
  const ppid = process.ppid;
  const engine = engineAddress(opts.argv ?? process.argv);
  let refusedInARow = 0;
  let checking = false;
  let gone = false;
  const fire = (why: string) => {
    if (gone) return;
    gone = true;
    clearInterval(watchdog);
    onGone(why);
  };
  const watchdog = setInterval(() => {
    if (process.ppid !== ppid) return fire("the engine process is gone (parent changed)");
    if (engine === null || checking) return;
    checking = true;
    void refuses(engine).then((refused) => {
      checking = false;
      refusedInARow = refused ? refusedInARow + 1 : 0;
      if (refusedInARow >= 2) fire(`the engine is gone (${engine.host}:${engine.port} refuses connections)`);
    });
  }, opts.pollMs ?? 1_000);
  watchdog.unref();
  return () => clearInterval(watchdog);
}

/**
 * Calls ON_CANCEL when the engine sends this provider process the ResourceProvider Cancel call.
 *
 * Why: a terminal's Ctrl-C reaches the pulumi CLI alone, since the engine starts every plugin in a
 * process group of its own. On the first Ctrl-C the engine cancels gracefully: it waits for the
 * operations in flight and sends each provider Cancel. @pulumi/pulumi's dynamic-provider host answers
 * Cancel and does nothing else, so a create waiting in the gate would run on to its deadline (measured:
 * over 60 s, with gpuhost's plugins and with upstream's). The host serves gRPC with grpc-js, and every
 * incoming call passes through its server's handler lookup (Server.prototype._retrieveHandler), which
 * is wrapped here to notice Cancel and then defer to the original. grpc-js is resolved from the host's
 * main module, so it is the instance the host's server runs on. Returns false where that lookup is not
 * there (another host, another grpc-js): test/engine/interrupt.test.ts fails then.
 */
export function hookEngineCancel(onCancel: () => void): boolean {
  let grpc: { Server?: { prototype: Record<string, unknown> } };
  try {
    const main = require.main;
    if (!main) return false;
    grpc = main.require("@grpc/grpc-js") as typeof grpc;
  } catch {
    return false;
  }
  const proto = grpc.Server?.prototype;
  const original = proto?._retrieveHandler;
  if (!proto || typeof original !== "function") return false;
  proto._retrieveHandler = function (this: unknown, path: unknown, ...rest: unknown[]): unknown {
    if (path === "/pulumirpc.ResourceProvider/Cancel") onCancel();
    return (original as (...a: unknown[]) => unknown).call(this, path, ...rest);
  };
  return true;
}

/**
 * Registers FN to run when this process's guard leaves, where a guard is installed (a dynamic-provider
 * host); elsewhere (the CLI, tests) it does nothing. Returns the unregistration. For what a provider
 * starts in a process group of its own (a host command's ssh): leaving with the provider would not stop it.
 */
export function onGuardLeave(fn: () => unknown): () => void {
  const existing = (globalThis as unknown as Record<symbol, ProcessGuard | undefined>)[KEY];
  return existing ? existing.onLeave(fn) : () => undefined;
}

export function installProcessGuard(opts: { pollMs?: number; argv?: readonly string[] } = {}): ProcessGuard {
  const g = globalThis as unknown as Record<symbol, ProcessGuard | undefined>;
  const existing = g[KEY];
  if (existing) return existing;
  const controller = new AbortController();
  const cleanups = new Set<() => unknown>();
  let leaving = false;

  const silence = () => {
    for (const stream of [process.stdout, process.stderr]) {
      (stream as unknown as { write: (...a: unknown[]) => boolean }).write = () => true;
    }
  };
  const leave = (why: string, code: number) => {
    if (leaving) return;
    leaving = true;
    controller.abort(new Error(why));
    const all = [...cleanups].map((fn) =>
      Promise.resolve()
        .then(fn)
        .catch(() => undefined),
    );
    const bound = new Promise((r) => setTimeout(r, CLEANUP_BOUND_MS));
    // A moment for the aborted operation to answer the engine before the process goes.
    const answer = new Promise((r) => setTimeout(r, ANSWER_GRACE_MS));
    void Promise.all([Promise.race([Promise.all(all), bound]), answer]).then(() => process.exit(code));
  };

  for (const stream of [process.stdout, process.stderr]) {
    stream.on("error", (err: NodeJS.ErrnoException) => {
      if (err.code === "EPIPE" || err.code === "ERR_STREAM_DESTROYED" || err.code === "ECONNRESET") {
        // The reader (the engine) is gone: writing again would only raise the same error.
        silence();
        leave("the engine stopped reading the provider's output", 1);
      }
    });
  }

  watchEngine(opts, (why) => leave(why, 1));

  // The engine starts plugins in process groups of their own, so SIGINT is not a terminal's Ctrl-C:
  // it is the engine closing its plugins (after SIGINT it waits a few seconds, then kills). Leave.
  process.on("SIGINT", () => leave("interrupted (SIGINT)", 130));
  hookEngineCancel(() => controller.abort(new Error("interrupted (pulumi is cancelling the update)")));
  process.on("SIGTERM", () => leave("terminated (SIGTERM)", 143));

  const guard: ProcessGuard = {
    signal: controller.signal,
    onLeave(fn) {
      cleanups.add(fn);
      return () => cleanups.delete(fn);
    },
  };
  g[KEY] = guard;
  return guard;
}
