/**
 * SGLang's launch flags, parsed the way `python -m sglang.launch_server` parses them (argparse over
 * ServerArgs, sgl-project/sglang python/sglang/srt/server_args.py): the flag names and aliases
 * below are SGLang's; an unknown flag, a missing value or a value of the wrong type is argparse's
 * error on stderr and exit status 2; the speculative checks SGLang makes after parsing are
 * ValueErrors (exit 1). Only the flags a gpuhost unit renders, and the common ones around them,
 * are known: anything else is refused, so a unit the simulator accepts is one SGLang parses too.
 */
import * as fs from "node:fs";
import { parse as parseYaml } from "yaml";
import {
  ATTENTION_BACKENDS,
  DTYPES,
  KV_CACHE_DTYPES,
  QUANTIZATIONS,
  REASONING_PARSERS,
  TOOL_CALL_PARSERS,
} from "../components/services/sglang-choices";
import { ALGORITHMS, type Algorithm } from "./speculative";

/** SGLang's argparse types; human_int is its human_readable_int (digits, or 32k, 1Mi ...). */
type Kind = "str" | "int" | "human_int" | "float" | "bool";

export interface FlagSpec {
  dest: string;
  kind: Kind;
  /** SGLang's other option strings for the same dest. */
  aliases?: string[];
  /** Spellings argparse reaches only as unambiguous prefixes (`--tp` of `--tp-size`). */
  abbreviations?: string[];
  choices?: readonly string[];
}

/**
 * dest -> spec; the primary flag is `--` + dest with '_' as '-', as SGLang derives it. Types and
 * choices are the pinned SGLang's (test/sglang/server-args.test.ts checks them against its parser).
 */
export const FLAGS: readonly FlagSpec[] = [
  { dest: "model_path", kind: "str", aliases: ["--model"] },
  { dest: "tokenizer_path", kind: "str" },
  { dest: "served_model_name", kind: "str" },
  { dest: "trust_remote_code", kind: "bool" },
  { dest: "context_length", kind: "human_int" },
  { dest: "host", kind: "str" },
  { dest: "port", kind: "int" },
  // `--tp` is how SGLang's docs spell it: argparse accepts the unambiguous prefix of --tp-size.
  { dest: "tp_size", kind: "int", aliases: ["--tensor-parallel-size"], abbreviations: ["--tp"] },
  { dest: "dp_size", kind: "int", aliases: ["--data-parallel-size"], abbreviations: ["--dp"] },
  { dest: "mem_fraction_static", kind: "float" },
  { dest: "max_running_requests", kind: "int" },
  { dest: "max_queued_requests", kind: "int" },
  { dest: "chunked_prefill_size", kind: "int" },
  { dest: "kv_cache_dtype", kind: "str", choices: KV_CACHE_DTYPES },
  { dest: "attention_backend", kind: "str", choices: ATTENTION_BACKENDS },
  { dest: "dtype", kind: "str", choices: DTYPES },
  { dest: "quantization", kind: "str", choices: QUANTIZATIONS },
  { dest: "api_key", kind: "str" },
  { dest: "reasoning_parser", kind: "str", choices: REASONING_PARSERS },
  { dest: "tool_call_parser", kind: "str", choices: TOOL_CALL_PARSERS },
  { dest: "enable_metrics", kind: "bool" },
  { dest: "skip_server_warmup", kind: "bool" },
  { dest: "disable_cuda_graph", kind: "bool" },
  { dest: "log_level", kind: "str" },
  { dest: "speculative_algorithm", kind: "str" },
  { dest: "speculative_draft_model_path", kind: "str", aliases: ["--speculative-draft-model"] },
  { dest: "speculative_num_steps", kind: "int" },
  { dest: "speculative_eagle_topk", kind: "int" },
  { dest: "speculative_num_draft_tokens", kind: "int" },
  { dest: "speculative_dflash_block_size", kind: "int" },
];

const BY_FLAG = new Map<string, FlagSpec>();
for (const spec of FLAGS) {
  BY_FLAG.set(`--${spec.dest.replace(/_/g, "-")}`, spec);
  for (const alias of [...(spec.aliases ?? []), ...(spec.abbreviations ?? [])]) BY_FLAG.set(alias, spec);
}

/** How argparse names an argument in its errors: every option string, joined by '/'. */
const argName = (spec: FlagSpec) => [`--${spec.dest.replace(/_/g, "-")}`, ...(spec.aliases ?? [])].join("/");

/** The flags this stand-in knows, primary names first: for tests and `--help`. */
export const KNOWN_FLAGS = FLAGS.map((f) => `--${f.dest.replace(/_/g, "-")}`);

export interface SglangArgs {
  model_path: string;
  tokenizer_path?: string;
  served_model_name?: string;
  trust_remote_code: boolean;
  context_length?: number;
  host: string;
  port: number;
  tp_size: number;
  dp_size: number;
  mem_fraction_static?: number;
  max_running_requests?: number;
  max_queued_requests?: number;
  api_key?: string;
  reasoning_parser?: string;
  tool_call_parser?: string;
  enable_metrics: boolean;
  skip_server_warmup: boolean;
  speculative?: {
    algorithm: Algorithm;
    draftModelPath: string;
    numSteps?: number;
    eagleTopk?: number;
    numDraftTokens?: number;
  };
  /** Every parsed flag by dest, for the server_args log line. */
  raw: Record<string, string | number | boolean>;
}

/** argparse's failure: message for `launch_server.py: error: ...`, exit status 2. */
export class ArgparseError extends Error {
  readonly exitCode = 2;
}
/** SGLang's own checks after parsing (a ValueError in ServerArgs): exit status 1. */
export class ServerArgsError extends Error {
  readonly exitCode = 1;
}

export const USAGE =
  "usage: launch_server.py [-h] --model-path MODEL_PATH [--host HOST] [--port PORT] [--tp-size TP_SIZE] [--speculative-algorithm SPECULATIVE_ALGORITHM] ...";

/**
 * SGLang's `--config FILE` (prepare_server_args + ConfigArgumentMerger,
 * python/sglang/srt/server_args_config_parser.py): a .yaml/.yml/.json mapping whose keys (`api-key`
 * or `api_key`) become flags placed BEFORE the command line's, so the command line wins; a boolean
 * adds a store_true flag only when true; a list repeats the values; one --config at most; an option
 * SGLang does not know is warned about and ignored. gpuhost hands the API key over this way (a
 * systemd credential), so it is never in argv. Failures are SGLang's ValueErrors.
 */
export function mergeSglangConfig(argv: string[], warn: (msg: string) => void = () => undefined): string[] {
  const at = argv.flatMap((a, i) => (a === "--config" ? [i] : []));
  if (at.length === 0) return argv;
  if (at.length > 1) throw new ServerArgsError("Multiple config files specified! Only one allowed.");
  const file = argv[at[0] + 1];
  if (file === undefined) throw new ServerArgsError("No config file specified after --config flag!");
  const ext = (/\.[^./]*$/.exec(file)?.[0] ?? "").toLowerCase();
  if (!fs.existsSync(file)) throw new ServerArgsError(`Config file not found: ${file}`);
  if (![".yaml", ".yml", ".json"].includes(ext))
    throw new ServerArgsError(`Config file must be YAML or JSON format, got: ${ext}`);
  const text = fs.readFileSync(file, "utf8");
  const data: unknown = ext === ".json" ? JSON.parse(text) : (parseYaml(text) ?? {});
  if (typeof data !== "object" || data === null || Array.isArray(data))
    throw new ServerArgsError("Config file must contain a dictionary at root level");
  const flags: string[] = [];
  for (const [key, value] of Object.entries(data as Record<string, unknown>)) {
    const spec = BY_FLAG.get(`--${key.replace(/_/g, "-")}`);
    if (key === "config" || key === "help")
      throw new ServerArgsError(`Option '${key}' cannot be specified in config file`);
    if (!spec) {
      warn(`Unknown config option '${key}' will be ignored. Check if the option name is correct.`);
      continue;
    }
    const flag = `--${spec.dest.replace(/_/g, "-")}`;
    if (spec.kind === "bool") {
      if (typeof value !== "boolean")
        throw new ServerArgsError(`Invalid value for '${key}': ${String(value)}. Expected boolean (true/false)`);
      if (value) flags.push(flag);
    } else for (const v of Array.isArray(value) ? value : [value]) flags.push(flag, String(v));
  }
  return [...flags, ...argv.slice(0, at[0]), ...argv.slice(at[0] + 2)];
}

export function parseSglangArgs(argvIn: string[], warn?: (msg: string) => void): SglangArgs {
  const argv = mergeSglangConfig(argvIn, warn);
  const raw: Record<string, string | number | boolean> = {};
  const unknown: string[] = [];
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i];
    const eq = arg.startsWith("--") ? arg.indexOf("=") : -1;
    const flag = eq > 0 ? arg.slice(0, eq) : arg;
    const spec = BY_FLAG.get(flag);
    if (!spec) {
      unknown.push(arg);
      continue;
    }
    const name = argName(spec);
    if (spec.kind === "bool") {
      if (eq > 0) throw new ArgparseError(`argument ${name}: ignored explicit argument '${arg.slice(eq + 1)}'`);
      raw[spec.dest] = true;
      continue;
    }
    let value: string | undefined;
    if (eq > 0) value = arg.slice(eq + 1);
    else {
      value = argv[i + 1];
      // argparse treats a following option (anything starting with '--') as a missing value.
      if (value === undefined || value.startsWith("--"))
        throw new ArgparseError(`argument ${name}: expected one argument`);
      i++;
    }
    raw[spec.dest] = convert(spec, name, value);
  }
  // argparse collects every unrecognized word, then fails once with all of them.
  if (unknown.length) throw new ArgparseError(`unrecognized arguments: ${unknown.join(" ")}`);
  if (raw.model_path === undefined)
    throw new ArgparseError(`the following arguments are required: ${argName(BY_FLAG.get("--model-path")!)}`);
  const args: SglangArgs = {
    model_path: String(raw.model_path),
    tokenizer_path: optString(raw.tokenizer_path),
    served_model_name: optString(raw.served_model_name),
    trust_remote_code: raw.trust_remote_code === true,
    context_length: optNumber(raw.context_length),
    host: optString(raw.host) ?? "127.0.0.1",
    port: optNumber(raw.port) ?? 30000,
    tp_size: optNumber(raw.tp_size) ?? 1,
    dp_size: optNumber(raw.dp_size) ?? 1,
    mem_fraction_static: optNumber(raw.mem_fraction_static),
    max_running_requests: optNumber(raw.max_running_requests),
    max_queued_requests: optNumber(raw.max_queued_requests),
    api_key: optString(raw.api_key),
    reasoning_parser: optString(raw.reasoning_parser),
    tool_call_parser: optString(raw.tool_call_parser),
    enable_metrics: raw.enable_metrics === true,
    skip_server_warmup: raw.skip_server_warmup === true,
    raw,
  };
  args.speculative = speculative(raw);
  return args;
}

/**
 * SGLang's human_readable_int (sglang.srt.utils.common): digits, or a number with an SI suffix
 * (k M G T, decimals allowed, truncated) or an IEC one (Ki Mi Gi Ti, integers only). Its refusals,
 * as argparse prints an ArgumentTypeError.
 */
function humanReadableInt(name: string, value: string): number {
  const v = value.trim();
  const m = /^(\d+(?:\.\d+)?)(Ki|Mi|Gi|Ti|k|M|G|T)$/.exec(v);
  if (m) {
    const iec: Record<string, number> = { Ki: 2 ** 10, Mi: 2 ** 20, Gi: 2 ** 30, Ti: 2 ** 40 };
    const si: Record<string, number> = { k: 1e3, M: 1e6, G: 1e9, T: 1e12 };
    if (!(m[2] in iec)) return Math.trunc(Number(m[1]) * si[m[2]]);
    if (!m[1].includes(".")) return Number(m[1]) * iec[m[2]];
    throw new ArgparseError(
      `argument ${name}: Decimals are not allowed with IEC suffixes like '${m[2]}'. Use an integer IEC value such as '${Math.trunc(Number(m[1]))}${m[2]}', or an SI value such as '${m[1]}${m[2][0]}'.`,
    );
  }
  if (/^[+-]?\d+$/.test(v)) return Number(v);
  throw new ArgparseError(
    `argument ${name}: Invalid integer value: '${value}'. Use a plain integer, SI suffixes (1k, 1M), or IEC suffixes (1Ki, 1Mi). Suffixes are case-sensitive.`,
  );
}

function convert(spec: FlagSpec, name: string, value: string): string | number {
  if (spec.choices && !spec.choices.includes(value))
    throw new ArgparseError(
      `argument ${name}: invalid choice: '${value}' (choose from ${spec.choices.map((c) => `'${c}'`).join(", ")})`,
    );
  if (spec.kind === "str") return value;
  if (spec.kind === "human_int") return humanReadableInt(name, value);
  const n = Number(value);
  const ok = value.trim() !== "" && Number.isFinite(n) && (spec.kind === "float" || Number.isInteger(n));
  if (!ok) throw new ArgparseError(`argument ${name}: invalid ${spec.kind} value: '${value}'`);
  return n;
}

/** SGLang's speculative checks (ServerArgs post-init), as the errors it raises. */
function speculative(raw: Record<string, string | number | boolean>): SglangArgs["speculative"] {
  const name = optString(raw.speculative_algorithm);
  const steps = optNumber(raw.speculative_num_steps);
  const topk = optNumber(raw.speculative_eagle_topk);
  let draftTokens = optNumber(raw.speculative_num_draft_tokens);
  const block = optNumber(raw.speculative_dflash_block_size);
  if (name === undefined) {
    if ([steps, topk, draftTokens, block].some((v) => v !== undefined) || raw.speculative_draft_model_path)
      throw new ServerArgsError("speculative settings are given but --speculative-algorithm is not set");
    return undefined;
  }
  if (!(ALGORITHMS as readonly string[]).includes(name))
    throw new ServerArgsError(`Unknown speculative algorithm name: ${name}`);
  const algorithm = name as Algorithm;
  const draft = optString(raw.speculative_draft_model_path);
  if (draft === undefined && algorithm !== "NGRAM")
    throw new ServerArgsError(`--speculative-draft-model-path is required for ${algorithm}`);
  if (algorithm === "DFLASH") {
    // The block size is an alias of num-draft-tokens for DFlash; both given must agree.
    if (block !== undefined && draftTokens !== undefined && block !== draftTokens)
      throw new ServerArgsError(
        `--speculative-dflash-block-size (${block}) must equal --speculative-num-draft-tokens (${draftTokens})`,
      );
    draftTokens = draftTokens ?? block;
    if ((steps !== undefined && steps !== 1) || (topk !== undefined && topk !== 1))
      throw new ServerArgsError("DFLASH requires --speculative-num-steps 1 and --speculative-eagle-topk 1");
    return { algorithm, draftModelPath: draft!, numSteps: 1, eagleTopk: 1, numDraftTokens: draftTokens };
  }
  if (block !== undefined) throw new ServerArgsError("--speculative-dflash-block-size is for DFLASH only");
  const set = [steps, topk, draftTokens].filter((v) => v !== undefined).length;
  if (set !== 0 && set !== 3)
    throw new ServerArgsError(
      "set all three of --speculative-num-steps, --speculative-eagle-topk and --speculative-num-draft-tokens, or none",
    );
  // With topk 1 the draft is a chain: SGLang sets num-draft-tokens to num-steps + 1 (with a warning).
  if (topk === 1 && steps !== undefined) draftTokens = steps + 1;
  return { algorithm, draftModelPath: draft ?? "", numSteps: steps, eagleTopk: topk, numDraftTokens: draftTokens };
}

function optString(v: string | number | boolean | undefined): string | undefined {
  return v === undefined ? undefined : String(v);
}
function optNumber(v: unknown): number | undefined {
  return typeof v === "number" ? v : undefined;
}
