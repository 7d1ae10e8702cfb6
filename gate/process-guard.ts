/**
 * The dynamic provider's process must not outlive `pulumi up`. The engine starts it and reads its
 * stderr; after `kill -9` of pulumi nothing tells it to stop: every write to stderr then fails with
 * EPIPE, and @pulumi/pulumi's dynamic-provider host logs each uncaught error to that same stderr,
 * a loop that burned most of a core and grew by tens of MB/s. This guard, installed once per
 * process by the VerifiedGeneration provider:
 * - answers EPIPE on stdout/stderr by going silent and leaving;
 * - notices the engine is gone (its gRPC port, argv's last host:port, refuses; or the parent
 *   changed) and leaves;
 * - turns SIGINT (Ctrl-C reaches the whole foreground process group) into an abort of the running
 *   gate and benchmark, so `pulumi up` stops within about a second instead of finishing the run;
 * - on leaving, aborts, awaits the registered cleanups (tunnels, key folders) for a bounded time,
 *   then exits.
 */
import * as net from "node:net";

export interface ProcessGuard {
  /** Aborted on SIGINT/SIGTERM or when the engine is gone: pass it to verify() and bench(). */
  readonly signal: AbortSignal;
  /** Registers a cleanup run before the process leaves; returns its unregistration. */
  onLeave(fn: () => unknown): () => void;
}

const KEY = Symbol.for("gpuhost.processGuard");
const CLEANUP_BOUND_MS = 3_000;

/** The engine's gRPC address the dynamic-provider host was started with (its last host:port argument). */
export function engineAddress(argv: readonly string[]): { host: string; port: number } | null {
  for (let i = argv.length - 1; i >= 2; i--) {
    const m = /^(127\.0\.0\.1|localhost|\[::1\]|::1):(\d{1,5})$/.exec(argv[i]);
    if (m) return { host: m[1].replace(/^\[|\]$/g, ""), port: Number(m[2]) };
  }
  return null;
}

function refuses(addr: { host: string; port: number }): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = net.connect({ host: addr.host, port: addr.port });
    const done = (refused: boolean) => {
      clearTimeout(timer);
      socket.destroy();
      resolve(refused);
    };
    const timer = setTimeout(() => done(false), 1_000);
    socket.once("connect", () => done(false));
    socket.once("error", (e: NodeJS.ErrnoException) => done(e.code === "ECONNREFUSED"));
  });
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
    void Promise.race([Promise.all(all), bound]).then(() => process.exit(code));
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

  const ppid = process.ppid;
  const engine = engineAddress(opts.argv ?? process.argv);
  let refusedInARow = 0;
  let checking = false;
  const watchdog = setInterval(() => {
    if (process.ppid !== ppid) return leave("the engine process is gone (parent changed)", 1);
    if (engine === null || checking) return;
    checking = true;
    void refuses(engine).then((refused) => {
      checking = false;
      refusedInARow = refused ? refusedInARow + 1 : 0;
      if (refusedInARow >= 2) leave(`the engine is gone (${engine.host}:${engine.port} refuses connections)`, 1);
    });
  }, opts.pollMs ?? 1_000);
  watchdog.unref();

  process.on("SIGINT", () => controller.abort(new Error("interrupted (SIGINT)")));
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
