/**
 * What every `gpuhost` command shares: output streams, the run of a command from its flag table
 * (cli/options.ts), exit codes and the interrupt. One Ctrl-C aborts the running gate or benchmark through its signal (the result says
 * "interrupted" and the command exits 130, usually within a second and at most 5 s later); a second Ctrl-C exits at once.
 */
import * as fs from "node:fs";
import { EndpointError } from "../gate/transport/http";
import { type CommandSpec, type FlagTable, helpText, parseFlags, usageLine, UsageError, type Values } from "./options";

export interface CliIo {
  stdout: { write(s: string): unknown; isTTY?: boolean };
  stderr: { write(s: string): unknown; isTTY?: boolean };
  /** Aborts the command (tests); the real CLI wires SIGINT, SIGTERM and SIGHUP to it. */
  signal?: AbortSignal;
}

export const defaultIo = (): CliIo => ({ stdout: process.stdout, stderr: process.stderr });

/**
 * Exit statuses, the same for every command (cli/README.md): each command's --help says which it
 * uses and what they mean for it.
 */
export const EXIT = {
  ok: 0,
  /** The verdict is no: not ready, drift found, problems found, nothing measured; or an error. */
  failed: 1,
  /** A bad command line (drift: also a host that could not be probed, or an engine that failed). */
  usage: 2,
  /** bench: at least one sweep level broke the error budget (its figures are excluded). */
  errorBudget: 3,
  /** bench: the deadline stopped the run before every level ran. */
  incomplete: 4,
  /** bench, compare: a level's validity certificate failed (its figures are excluded; the text names the checks). */
  uncertified: 5,
  /** Ctrl-C, SIGTERM, or SIGHUP (the terminal closed). */
  interrupted: 130,
} as const;

export { UsageError };

/** What the commands' usage says about the key. */
export const API_KEY_USAGE =
  "The API key comes from GPUHOST_API_KEY or --api-key-file PATH (its first line), never argv.";

/**
 * The server's API key: from --api-key-file (its first line) or GPUHOST_API_KEY. A key given as
 * --api-key is refused: a flag's value sits in the command's argv, which any local user reads (ps,
 * /proc/PID/cmdline) while it runs; the services' units keep the key out of argv for the same reason.
 */
export function apiKeyOption(
  values: { "api-key"?: string; "api-key-file"?: string },
  env: NodeJS.ProcessEnv = process.env,
): string | undefined {
  if (values["api-key"] !== undefined)
    throw new UsageError(
      "--api-key would put the key in this command's argv, which any local user can read (ps, /proc/PID/cmdline): set GPUHOST_API_KEY or pass --api-key-file PATH",
    );
  const file = values["api-key-file"];
  if (file === undefined) return env.GPUHOST_API_KEY || undefined;
  let text: string;
  try {
    text = fs.readFileSync(file, "utf8");
  } catch (e) {
    throw new UsageError(`--api-key-file ${file} cannot be read (${(e as NodeJS.ErrnoException).code ?? String(e)})`);
  }
  const key = text.split(/\r?\n/)[0].trim();
  if (key === "") throw new UsageError(`--api-key-file ${file} holds no key on its first line`);
  return key;
}

/** Schema issues as one line naming each option's path. */
export function schemaIssues(error: { issues: { path: PropertyKey[]; message: string }[] }): string {
  return error.issues.map((i) => `${i.path.map(String).join(".")}: ${i.message}`).join("; ");
}

/** Why a command's signal was aborted: the signal's name, when it was one. */
export class Interrupted extends Error {
  constructor(readonly signalName: string) {
    super(`interrupted by ${signalName}`);
  }
}

/**
 * How long a command may take to wind down after an interrupt before it is answered 130 anyway: long
 * enough for a benchmark to abort thousands of requests in flight and write its partial result on a
 * loaded machine (2 s was not, at 4,096 in flight), short enough that one Ctrl-C still feels prompt; a
 * second Ctrl-C exits at once.
 */
const INTERRUPT_GRACE_MS = 5000;

export interface RunOptions {
  /**
   * An interrupt is this command's normal end (a server: `gpuhost sim`): no "stopping" line, and the
   * body's own status is the exit status instead of 130.
   */
  interruptIsStop?: boolean;
  /** How long the body may take to wind down after the first interrupt (default 5 s). */
  interruptGraceMs?: number;
}

/**
 * Runs a command: --help from its table, its argv parsed by the table, a usage error as one line
 * and exit 2, and the interrupt wired: the body gets a signal that SIGINT/SIGTERM/SIGHUP abort (only when io
 * is the real process streams and no signal is given); a body that has not returned 5 s (its grace)
 * after the first interrupt is answered 130 anyway, and a second interrupt exits at once.
 */
export async function runCommand<T extends FlagTable>(
  spec: CommandSpec<T>,
  argv: readonly string[],
  io: CliIo,
  body: (values: Values<T>, signal: AbortSignal) => Promise<number>,
  options: RunOptions = {},
): Promise<number> {
  if (argv.includes("--help") || argv.includes("-h")) {
    io.stdout.write(`${helpText(spec)}\n`);
    return EXIT.ok;
  }
  const controller = new AbortController();
  const parent = io.signal;
  const onParent = () => controller.abort(new Interrupted("the caller"));
  parent?.addEventListener("abort", onParent, { once: true });
  let grace: NodeJS.Timeout | undefined;
  const interrupted = new Promise<number>((resolve) =>
    controller.signal.addEventListener(
      "abort",
      () => {
        grace = setTimeout(() => resolve(EXIT.interrupted), options.interruptGraceMs ?? INTERRUPT_GRACE_MS);
        grace.unref();
      },
      { once: true },
    ),
  );
  const real = io.stdout === process.stdout && parent === undefined;
  const unlisten = real ? onProcessInterrupts(controller, io, options) : () => undefined;
  const prefix = spec.invocation ? spec.name : `gpuhost ${spec.name}`;
  try {
    const values = parseFlags(spec.flags, argv);
    const code = await Promise.race([body(values, controller.signal), interrupted]);
    return controller.signal.aborted && !options.interruptIsStop ? EXIT.interrupted : code;
  } catch (err) {
    if (err instanceof UsageError || err instanceof EndpointError) {
      io.stderr.write(`${prefix}: ${err.message}\n${usageLine(spec)}\n`);
      return EXIT.usage;
    }
    if (controller.signal.aborted) {
      io.stderr.write(`${prefix}: interrupted: ${(err as Error).message}\n`);
      return EXIT.interrupted;
    }
    io.stderr.write(`${prefix}: error: ${(err as Error).message}\n`);
    return EXIT.failed;
  } finally {
    clearTimeout(grace);
    parent?.removeEventListener("abort", onParent);
    unlisten();
  }
}

/**
 * The process's SIGINT, SIGTERM and SIGHUP, and its output going away, abort CONTROLLER (a second
 * signal quits at once); returns what removes the listeners.
 */
function onProcessInterrupts(controller: AbortController, io: CliIo, options: RunOptions): () => void {
  let interrupts = 0;
  const onSignal = (name: string) => () => {
    // The terminal may be gone (SIGHUP): a write to it then fails (EIO), and that failure must not
    // end this process before the body has wound down (it stops the engine and removes its lock).
    if (name === "SIGHUP") quietWriteErrors();
    interrupts++;
    if (interrupts > 1) process.exit(EXIT.interrupted);
    if (!options.interruptIsStop) io.stderr.write(`\n${name}: stopping (again to quit at once)\n`);
    controller.abort(new Interrupted(name));
  };
  // A write that fails because the output is gone (EIO: the terminal closed, maybe before its SIGHUP
  // is handled; EPIPE: the reader left) is a hangup too, not a crash that would leave the engine.
  const onGone = () => {
    quietWriteErrors();
    if (!controller.signal.aborted) controller.abort(new Interrupted("SIGHUP"));
  };
  // One table, walked to listen and again to stop listening: a handler cannot be left behind.
  const handlers: [NodeJS.EventEmitter, string, () => void][] = [
    [process, "SIGINT", onSignal("SIGINT")],
    [process, "SIGTERM", onSignal("SIGTERM")],
    [process, "SIGHUP", onSignal("SIGHUP")],
    [process.stdout, "error", onGone],
    [process.stderr, "error", onGone],
  ];
  for (const [emitter, event, handler] of handlers) emitter.on(event, handler);
  return () => {
    for (const [emitter, event, handler] of handlers) emitter.off(event, handler);
  };
}

const ignore = () => undefined;

/** Write errors on stdout and stderr ignored from now on (their terminal closed). */
function quietWriteErrors(): void {
  for (const stream of [process.stdout, process.stderr]) {
    stream.off("error", ignore);
    stream.on("error", ignore);
  }
}

/** The API key flags every client command shares: the file, and the refused argv form. */
export const API_KEY_FLAGS = {
  "api-key-file": {
    type: "path",
    description: "the server's API key: the file's first line (or set GPUHOST_API_KEY); never on argv",
  },
  "api-key": { type: "string", hidden: true, description: "refused: argv is readable by any local user" },
} as const satisfies FlagTable;

/** The --help default of a knob whose default its zod schema owns (the schema applies it). */
export function schemaDefault<S extends { parse(input: unknown): object }>(
  schema: S,
  key: keyof ReturnType<S["parse"]> & string,
): () => string {
  return () => {
    const v = (schema.parse({}) as Record<string, unknown>)[key];
    return Array.isArray(v) ? v.join(",") : String(v);
  };
}

/** "chat=1,code=1" -> { chat: 1, code: 1 }; each weight a plain decimal. */
export function mixOption(name: string, v: string): Record<string, number> {
  return Object.fromEntries(
    v.split(",").map((kv) => {
      const [k, w, ...more] = kv.split("=").map((x) => x.trim());
      if (!k || w === undefined || more.length > 0 || !/^(\d+(\.\d*)?|\.\d+)$/.test(w))
        throw new UsageError(
          `--${name} takes CATEGORY=WEIGHT,... with plain decimal weights, got ${JSON.stringify(v)}`,
        );
      return [k, Number(w)];
    }),
  );
}

/**
 * The plan fields WORKLOAD_FLAGS set, read once for `bench` and `compare`: the same flag is the same
 * BenchPlan knob in both (gate/base/schema.ts), and each command adds its own around them.
 */
export function workloadPlan(values: {
  rate?: number[];
  mix?: string;
  thinking?: string;
  "slo-ttft"?: number;
  "slo-itl"?: number;
  certify?: string;
  "change-tolerance"?: number;
  "client-threads"?: string;
}) {
  const threads = values["client-threads"];
  return {
    rate: values.rate,
    // "auto" or a whole number; anything else is the schema's to refuse, naming clientThreads.
    clientThreads:
      threads === undefined || threads === "auto" ? threads : /^\d+$/.test(threads) ? Number(threads) : threads,
    mix: values.mix === undefined ? undefined : mixOption("mix", values.mix),
    thinking: values.thinking === undefined ? undefined : values.thinking === "on",
    slo: { ttftSeconds: values["slo-ttft"], itlSeconds: values["slo-itl"] },
    certification:
      values.certify === undefined && values["change-tolerance"] === undefined
        ? undefined
        : {
            ...(values.certify === undefined ? {} : { require: values.certify === "require" }),
            ...(values["change-tolerance"] === undefined ? {} : { changeTolerance: values["change-tolerance"] }),
          },
  };
}

/**
 * The workload rows that `bench` and `compare` share: request rates instead of concurrencies, the
 * prompt mix, thinking, and the SLO behind goodput. Each command adds its own defaults around them.
 */
export const WORKLOAD_FLAGS = {
  rate: {
    type: "numbers",
    value: "R,R,...",
    description: "open-loop levels (requests per second), instead of --concurrency",
  },
  mix: {
    type: "string",
    value: "CAT=W,...",
    description: "prompt categories' weights, e.g. chat=1,code=1,long-context=0",
  },
  thinking: {
    type: "string",
    value: "on|off",
    choices: ["on", "off"],
    description: "thinking on or off (default: the server's)",
  },
  "slo-ttft": { type: "number", value: "SECONDS", description: "time-to-first-token objective (goodput)" },
  "slo-itl": { type: "number", value: "SECONDS", description: "inter-token latency objective (goodput)" },
  certify: {
    type: "string",
    value: "require|report",
    choices: ["require", "report"],
    description:
      "require (default): only certified levels are figures (reconciled with the server's /metrics, the load applied, the client not the limit); report: certificates are printed and uncertified levels still count (a server without /metrics, knowingly)",
  },
  "change-tolerance": {
    type: "fraction",
    description:
      "how far a concurrency sweep's first level, measured again after the last, or a level's repeats may move before the server counts as changed during the run (default 0.25)",
  },
  "client-threads": {
    type: "string",
    value: "auto|N",
    description:
      "worker threads the client spreads each level over (auto: as the projected token rate needs, at most one fewer than the cores; 1: one thread); every thread's client check is in the certificate",
  },
} as const satisfies FlagTable;
