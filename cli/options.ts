/**
 * The one way a gpuhost command reads its argv: a table of flags (name, type, description, default)
 * from which both the parser (node's util.parseArgs, strict) and `--help` are made. A new flag is a
 * new row. Values are checked here, so a bad one is refused in one sentence naming the flag before
 * anything runs: numbers are plain decimals (no 0x10, 1e12, Infinity, signs), bounded, lists have
 * no empty items, and no value may be empty.
 */
import { parseArgs } from "node:util";

export class UsageError extends Error {}

/** What each flag type parses to. */
interface Parsed {
  /** Any non-empty text. */
  string: string;
  /** A non-empty file path. */
  path: string;
  boolean: boolean;
  /** A plain decimal, > 0 unless `min` says otherwise. */
  number: number;
  /** Digits only, >= 1 unless `min` says otherwise. */
  integer: number;
  /** 0 to 1, or a percentage such as 1%. */
  fraction: number;
  /** Comma-separated integers, each >= 1 unless `min` says otherwise. */
  integers: number[];
  /** Comma-separated plain decimals, each > 0. */
  numbers: number[];
}
export type FlagType = keyof Parsed;

export interface Flag {
  type: FlagType;
  description: string;
  /** The value's placeholder in --help (default: the type's). */
  value?: string;
  /** Applied when the flag is absent, and shown in --help. */
  default?: string | number | boolean | readonly number[];
  /** Shown in --help only: a default another owner applies (a zod schema, a library). */
  shownDefault?: () => string;
  required?: boolean;
  /** The flag may repeat; every value is kept, in order. */
  multiple?: boolean;
  /** Inclusive bounds of a number (of each item of a list). */
  min?: number;
  max?: number;
  /** Why `max` is the bound, said when a value exceeds it. */
  maxReason?: string;
  /** The only values a string flag takes. */
  choices?: readonly string[];
  /** Parsed, so it can be refused with a reason, but not listed in --help. */
  hidden?: boolean;
}
export type FlagTable = Readonly<Record<string, Flag>>;

type ValueOf<F extends Flag> = F extends { multiple: true } ? Parsed[F["type"]][] : Parsed[F["type"]];
/** The parsed values of a table: a flag with a default, `required` or `multiple` is always there. */
export type Values<T extends FlagTable> = {
  -readonly [K in keyof T]: T[K] extends { required: true } | { default: unknown } | { multiple: true }
    ? ValueOf<T[K]>
    : ValueOf<T[K]> | undefined;
};

/** Upper bound of any number flag without its own: beyond it a double no longer counts units. */
const MAX_NUMBER = Number.MAX_SAFE_INTEGER;
const DECIMAL = /^(\d+(\.\d*)?|\.\d+)$/;
const INTEGER = /^\d+$/;

const PLACEHOLDER: Record<FlagType, string> = {
  string: "TEXT",
  path: "FILE",
  boolean: "",
  number: "N",
  integer: "N",
  fraction: "F",
  integers: "N,N,...",
  numbers: "X,X,...",
};

function show(v: unknown): string {
  return JSON.stringify(v);
}

function lowest(f: Flag): number | undefined {
  return f.min ?? (f.type === "number" || f.type === "numbers" ? undefined : 1);
}

function range(f: Flag): string {
  const min = lowest(f);
  return min === undefined ? "above 0" : `of at least ${min}`;
}

function decimal(name: string, f: Flag, raw: string, integer: boolean, item = ""): number {
  const what = integer ? `${item}a whole number` : `${item}a plain decimal number`;
  // A sign is refused by the pattern; say what the flag takes rather than what the pattern is.
  if (raw.startsWith("-")) throw new UsageError(`--${name} takes ${what} ${range(f)}, got ${show(raw)}`);
  if (!(integer ? INTEGER : DECIMAL).test(raw))
    throw new UsageError(
      `--${name} takes ${what} (${integer ? "digits only" : "digits and a decimal point only"}), got ${show(raw)}`,
    );
  const n = Number(raw);
  const min = lowest(f);
  if (min === undefined ? n <= 0 : n < min)
    throw new UsageError(`--${name} takes ${what} ${range(f)}, got ${show(raw)}`);
  const max = f.max ?? MAX_NUMBER;
  if (n > max)
    throw new UsageError(
      `--${name} takes ${what} of at most ${max.toLocaleString("en-US")}, got ${show(raw)}${f.maxReason ? ` (${f.maxReason})` : ""}`,
    );
  return n;
}

function convert(name: string, f: Flag, raw: string): unknown {
  if (raw === "")
    throw new UsageError(`--${name} needs ${f.type === "path" ? "a file path" : "a value"}, not an empty string`);
  switch (f.type) {
    case "string":
    case "path":
      if (f.choices && !f.choices.includes(raw))
        throw new UsageError(`--${name} takes ${f.choices.join(" or ")}, got ${show(raw)}`);
      return raw;
    case "number":
      return decimal(name, f, raw, false);
    case "integer":
      return decimal(name, f, raw, true);
    case "fraction": {
      const percent = raw.endsWith("%");
      const digits = percent ? raw.slice(0, -1) : raw;
      const n = DECIMAL.test(digits) ? Number(digits) / (percent ? 100 : 1) : NaN;
      if (!(n >= 0 && n <= 1))
        throw new UsageError(`--${name} takes a fraction from 0 to 1 (or a percentage like 1%), got ${show(raw)}`);
      return n;
    }
    case "integers":
    case "numbers": {
      const items = raw.split(",").map((s) => s.trim());
      if (items.some((s) => s === ""))
        throw new UsageError(`--${name} takes a comma-separated list with no empty item, got ${show(raw)}`);
      return items.map((s) => decimal(name, f, s, f.type === "integers", "a list of "));
    }
    case "boolean":
      return raw;
  }
}

/** A value that reads as a negative number is a value, not an option (util.parseArgs would call it "ambiguous"). */
function joinNegativeValues(table: FlagTable, argv: readonly string[]): string[] {
  const out: string[] = [];
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    const f = a.startsWith("--") && !a.includes("=") ? table[a.slice(2)] : undefined;
    const next = argv[i + 1];
    if (f && f.type !== "boolean") {
      if (next === undefined || (next.startsWith("-") && !/^-[\d.]/.test(next)))
        throw new UsageError(`${a} needs a value`);
      out.push(`${a}=${next}`);
      i++;
    } else out.push(a);
  }
  return out;
}

/** util.parseArgs' errors, as one sentence in the commands' words. */
function parseError(err: { code?: string; message: string }): UsageError {
  const quoted = /'([^']*)'/.exec(err.message)?.[1] ?? "";
  switch (err.code) {
    case "ERR_PARSE_ARGS_UNKNOWN_OPTION":
      return new UsageError(`unknown argument '${quoted.split(" ")[0]}'`);
    case "ERR_PARSE_ARGS_UNEXPECTED_POSITIONAL":
      return new UsageError(`unexpected argument '${quoted}'`);
    case "ERR_PARSE_ARGS_INVALID_OPTION_VALUE":
      return /does not take an argument/.test(err.message)
        ? new UsageError(`${quoted.split(" ")[0]} takes no value`)
        : new UsageError(`${quoted.split(" ")[0]} needs a value`);
    default:
      return new UsageError(err.message);
  }
}

/** Parses argv by the table; throws UsageError naming the flag. */
export function parseFlags<T extends FlagTable>(table: T, argv: readonly string[]): Values<T> {
  const options: Record<string, { type: "string" | "boolean"; multiple?: boolean }> = {};
  for (const [name, f] of Object.entries(table))
    options[name] = { type: f.type === "boolean" ? "boolean" : "string", ...(f.multiple ? { multiple: true } : {}) };
  let values: Record<string, string | boolean | (string | boolean)[] | undefined>;
  try {
    ({ values } = parseArgs({ args: joinNegativeValues(table, argv), options, strict: true, allowPositionals: false }));
  } catch (err) {
    if (err instanceof UsageError) throw err;
    if ((err as { code?: string }).code?.startsWith("ERR_PARSE_ARGS")) throw parseError(err as Error);
    throw err;
  }
  const out: Record<string, unknown> = {};
  for (const [name, f] of Object.entries(table)) {
    const v = values[name];
    if (v === undefined) {
      if (f.required) throw new UsageError(`--${name} is required`);
      out[name] = f.default ?? (f.multiple ? [] : undefined);
    } else if (f.type === "boolean") out[name] = v;
    else if (Array.isArray(v)) out[name] = v.map((x) => convert(name, f, String(x)));
    else out[name] = convert(name, f, String(v));
  }
  return out as Values<T>;
}

/** One command: its table, what it does, and what its exit statuses mean. */
export interface CommandSpec<T extends FlagTable = FlagTable> {
  name: string;
  /** How it is typed, when not `gpuhost NAME` (`npm run demo --`). */
  invocation?: string;
  /** The usage line's tail after the required flags (default "[options]"). */
  synopsis?: string;
  /** More usage lines, e.g. "gpuhost sim --list". */
  alsoUsage?: readonly string[];
  about: string;
  flags: T;
  /** Exit statuses this command uses, in its own words (codes: cli/README.md). */
  exits: readonly (readonly [number, string])[];
}

function defaultText(f: Flag): string | undefined {
  if (f.shownDefault) return f.shownDefault();
  if (f.default === undefined || f.default === false) return undefined;
  return Array.isArray(f.default) ? f.default.join(",") : String(f.default);
}

export function exitText(spec: Pick<CommandSpec, "exits">): string {
  return `exit status: ${spec.exits.map(([code, meaning]) => `${code} ${meaning}`).join("; ")}`;
}

export function usageLine(spec: CommandSpec): string {
  const required = Object.entries(spec.flags)
    .filter(([, f]) => f.required)
    .map(([name, f]) => `--${name} ${f.value ?? PLACEHOLDER[f.type]}`);
  return `usage: ${[spec.invocation ?? `gpuhost ${spec.name}`, ...required, spec.synopsis ?? "[options]"].join(" ")}`;
}

/** --help, generated from the table. */
export function helpText(spec: CommandSpec): string {
  const rows = Object.entries(spec.flags)
    .filter(([, f]) => !f.hidden)
    .map(([name, f]) => {
      const head = `--${name}${f.type === "boolean" ? "" : ` ${f.value ?? PLACEHOLDER[f.type]}`}`;
      const notes = [
        f.required ? "required" : undefined,
        f.multiple ? "may repeat" : undefined,
        defaultText(f) === undefined ? undefined : `default ${defaultText(f)}`,
      ].filter(Boolean);
      return [head, `${f.description}${notes.length ? ` (${notes.join("; ")})` : ""}`] as const;
    });
  rows.push(["-h, --help", "this text"]);
  const width = Math.min(30, Math.max(...rows.map(([h]) => h.length)));
  const lines = rows.map(([h, d]) =>
    h.length > width ? `  ${h}\n  ${"".padEnd(width)}  ${d}` : `  ${h.padEnd(width)}  ${d}`,
  );
  const also = (spec.alsoUsage ?? []).map((u) => `       ${u}`);
  return [usageLine(spec), ...also, "", spec.about, "", "options:", ...lines, "", exitText(spec)].join("\n");
}
