/**
 * What `gpuhost verify | bench | plan` share: output streams, option parsing, exit codes and the
 * interrupt. One Ctrl-C aborts the running gate or benchmark through its signal (the result says
 * "interrupted" and the command exits 130 within about a second); a second Ctrl-C exits at once.
 */
import * as fs from "node:fs";
import { EndpointError } from "./transport/http";

export interface CliIo {
  stdout: { write(s: string): unknown; isTTY?: boolean };
  stderr: { write(s: string): unknown; isTTY?: boolean };
  /** Aborts the command (tests); the real CLI wires SIGINT and SIGTERM to it. */
  signal?: AbortSignal;
}

export const defaultIo = (): CliIo => ({ stdout: process.stdout, stderr: process.stderr });

/** Exit statuses, documented in gate/README.md and printed by --help. */
export const EXIT = {
  ok: 0,
  /** Not ready, no throughput could be claimed, or an error. */
  failed: 1,
  usage: 2,
  /** bench: at least one sweep level broke the error budget (its figures are excluded). */
  errorBudget: 3,
  /** bench: the deadline stopped the run before every level ran. */
  incomplete: 4,
  /** Ctrl-C or SIGTERM. */
  interrupted: 130,
} as const;

export const EXIT_CODES_TEXT = `exit status: 0 ok; 1 not ready / nothing measured / error; 2 usage; 3 a sweep level broke the error budget; 4 the deadline cut the run; 130 interrupted`;

export class UsageError extends Error {}

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

export function numberOption(name: string, value: string | undefined): number | undefined {
  if (value === undefined) return undefined;
  const n = Number(value);
  if (value.trim() === "" || !Number.isFinite(n) || n <= 0)
    throw new UsageError(`--${name} must be a positive number, got ${JSON.stringify(value)}`);
  return n;
}

export function fractionOption(name: string, value: string | undefined): number | undefined {
  if (value === undefined) return undefined;
  const percent = value.trim().endsWith("%");
  const n = Number(percent ? value.trim().slice(0, -1) : value);
  const f = percent ? n / 100 : n;
  if (value.trim() === "" || !Number.isFinite(f) || f < 0 || f > 1)
    throw new UsageError(
      `--${name} must be a fraction from 0 to 1 (or a percentage like 1%), got ${JSON.stringify(value)}`,
    );
  return f;
}

/** "chat=1,code=2" -> { chat: 1, code: 2 }; the schema then checks the names and weights. */
export function mixOption(name: string, value: string | undefined): Record<string, number> | undefined {
  if (value === undefined) return undefined;
  return Object.fromEntries(
    value.split(",").map((pair) => {
      const [key, weight, ...rest] = pair.split("=");
      if (weight === undefined || rest.length > 0 || key.trim() === "")
        throw new UsageError(`--${name} takes CATEGORY=WEIGHT pairs like chat=1,code=1, got ${JSON.stringify(value)}`);
      return [key.trim(), Number(weight)];
    }),
  );
}

/** "on" | "off" -> true | false. */
export function onOffOption(name: string, value: string | undefined): boolean | undefined {
  if (value === undefined) return undefined;
  if (value !== "on" && value !== "off")
    throw new UsageError(`--${name} takes on or off, got ${JSON.stringify(value)}`);
  return value === "on";
}

export function listOption(
  name: string,
  value: string | undefined,
  kind: "integers" | "numbers" = "integers",
): number[] | undefined {
  if (value === undefined) return undefined;
  const list = value
    .split(",")
    .map((v) => v.trim())
    .filter((v) => v !== "");
  const nums = list.map(Number);
  const ok = (n: number) => (kind === "integers" ? Number.isInteger(n) : Number.isFinite(n)) && n > 0;
  if (nums.length === 0 || !nums.every(ok)) {
    throw new UsageError(`--${name} must be a comma-separated list of positive ${kind}, got ${JSON.stringify(value)}`);
  }
  return nums;
}

/** Schema issues as one line naming each option's path. */
export function schemaIssues(error: { issues: { path: PropertyKey[]; message: string }[] }): string {
  return error.issues.map((i) => `${i.path.map(String).join(".")}: ${i.message}`).join("; ");
}

/**
 * Runs a command body with usage errors mapped to exit 2 and the interrupt wired: the body gets a
 * signal that SIGINT/SIGTERM abort (only when io is the real process streams and no signal is given).
 */
export async function runCommand(
  io: CliIo,
  usage: string,
  argv: string[],
  body: (signal: AbortSignal) => Promise<number>,
): Promise<number> {
  if (argv.includes("--help") || argv.includes("-h")) {
    io.stdout.write(`${usage}\n`);
    return EXIT.ok;
  }
  const controller = new AbortController();
  const parent = io.signal;
  const onParent = () => controller.abort(new Error("interrupted"));
  parent?.addEventListener("abort", onParent, { once: true });
  let interrupts = 0;
  const onSignal = (name: string) => () => {
    interrupts++;
    if (interrupts > 1) process.exit(EXIT.interrupted);
    io.stderr.write(`\n${name}: stopping (again to quit at once)\n`);
    controller.abort(new Error(`interrupted by ${name}`));
  };
  const real = io.stdout === process.stdout && parent === undefined;
  const onInt = onSignal("SIGINT");
  const onTerm = onSignal("SIGTERM");
  if (real) {
    process.on("SIGINT", onInt);
    process.on("SIGTERM", onTerm);
  }
  try {
    const code = await body(controller.signal);
    return controller.signal.aborted ? EXIT.interrupted : code;
  } catch (err) {
    if (
      err instanceof UsageError ||
      err instanceof EndpointError ||
      (err as { code?: string }).code?.startsWith("ERR_PARSE_ARGS")
    ) {
      io.stderr.write(`${(err as Error).message}\n${usage.split("\n")[0]}\n`);
      return EXIT.usage;
    }
    if (controller.signal.aborted) {
      io.stderr.write(`interrupted: ${(err as Error).message}\n`);
      return EXIT.interrupted;
    }
    io.stderr.write(`error: ${(err as Error).message}\n`);
    return EXIT.failed;
  } finally {
    parent?.removeEventListener("abort", onParent);
    if (real) {
      process.off("SIGINT", onInt);
      process.off("SIGTERM", onTerm);
    }
  }
}
