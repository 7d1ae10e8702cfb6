import * as fs from "node:fs";
import * as path from "node:path";
import { parse as parseYaml } from "yaml";
import { FAULTS } from "../simulator/faults";
import { startSimulator, UnknownFaultError } from "../simulator/index";
import { listProfiles, ProfileError } from "../simulator/profile";

const USAGE = `usage: gpuhost sim [--profile NAME|PATH] [--fault NAME]... [--port N] [--host H] [--time-scale X]
                  [--api-key K] [--served-model-name ID] [--max-queued-requests N] [--config FILE.yaml]
       gpuhost sim --list

An SGLang-faithful simulated server. --fault may repeat or take a comma-separated list.
Defaults: --profile tiny --port 30000 --host 127.0.0.1 --time-scale 1.
--config FILE.yaml (or .yml/.json) takes flags from a file, as SGLang's launch_server does: a flat
mapping such as \`api-key: "..."\`; flags on the command line win. That keeps the API key out of argv.
--time-scale X runs X simulated seconds per wall second; reported durations are simulated.`;

interface SimArgs {
  list: boolean;
  help: boolean;
  profile: string;
  faults: string[];
  port: number;
  host: string;
  timeScale: number;
  apiKey?: string;
  servedModelName?: string;
  maxQueuedRequests?: number;
}

class UsageError extends Error {}

/** Flags a --config file may set: what this simulator takes on its command line, minus the meta flags. */
const CONFIG_FLAGS = new Set([
  "--max-queued-requests",
  "--profile",
  "--fault",
  "--port",
  "--host",
  "--time-scale",
  "--api-key",
  "--served-model-name",
]);

/**
 * SGLang's --config (python/sglang/srt/server_args_config_parser.py, ConfigArgumentMerger): the file's
 * keys become flags (`api_key` and `api-key` alike), placed BEFORE the command line's own flags so
 * those win; only .yaml/.yml/.json; one --config at most; the root must be a mapping.
 */
export function mergeConfigFile(argv: string[]): string[] {
  const at = argv.flatMap((a, i) => (a === "--config" ? [i] : []));
  if (at.length === 0) return argv;
  if (at.length > 1) throw new UsageError("Multiple config files specified! Only one allowed.");
  const file = argv[at[0] + 1];
  if (file === undefined) throw new UsageError("No config file specified after --config flag!");
  const ext = path.extname(file).toLowerCase();
  if (![".yaml", ".yml", ".json"].includes(ext))
    throw new UsageError(`Config file must be YAML or JSON format, got: ${ext || "(no suffix)"}`);
  let text: string;
  try {
    text = fs.readFileSync(file, "utf8");
  } catch (err) {
    throw new UsageError(`cannot read config file ${file}: ${(err as Error).message}`);
  }
  const data: unknown = ext === ".json" ? JSON.parse(text) : (parseYaml(text) ?? {});
  if (typeof data !== "object" || data === null || Array.isArray(data))
    throw new UsageError("Config file must contain a dictionary at root level");
  const flags: string[] = [];
  for (const [key, value] of Object.entries(data as Record<string, unknown>)) {
    const flag = `--${key.replace(/_/g, "-")}`;
    if (!CONFIG_FLAGS.has(flag)) throw new UsageError(`Option '${key}' cannot be specified in config file`);
    for (const v of Array.isArray(value) ? value : [value]) flags.push(flag, String(v));
  }
  return [...flags, ...argv.slice(0, at[0]), ...argv.slice(at[0] + 2)];
}

export function parseSimArgs(argvIn: string[]): SimArgs {
  const argv = mergeConfigFile(argvIn);
  const args: SimArgs = {
    list: false,
    help: false,
    profile: "tiny",
    faults: [],
    port: 30000,
    host: "127.0.0.1",
    timeScale: 1,
  };
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i];
    const eq = arg.indexOf("=");
    const flag = arg.startsWith("--") && eq > 0 ? arg.slice(0, eq) : arg;
    const value = (): string => {
      if (arg.startsWith("--") && eq > 0) return arg.slice(eq + 1);
      const v = argv[++i];
      if (v === undefined) throw new UsageError(`${flag} needs a value`);
      return v;
    };
    const number = (name: string, v: string, ok: (n: number) => boolean): number => {
      const n = Number(v);
      if (v.trim() === "" || !Number.isFinite(n) || !ok(n)) throw new UsageError(`${name}: invalid value '${v}'`);
      return n;
    };
    switch (flag) {
      case "--list":
        args.list = true;
        break;
      case "-h":
      case "--help":
        args.help = true;
        break;
      case "--profile":
        args.profile = value();
        break;
      case "--fault":
        args.faults.push(value());
        break;
      case "--port":
        args.port = number("--port", value(), (n) => Number.isInteger(n) && n >= 0 && n <= 65535);
        break;
      case "--host":
        args.host = value();
        break;
      case "--time-scale":
        args.timeScale = number("--time-scale", value(), (n) => n > 0);
        break;
      case "--api-key":
        args.apiKey = value();
        break;
      case "--served-model-name":
        args.servedModelName = value();
        break;
      case "--max-queued-requests":
        args.maxQueuedRequests = number("--max-queued-requests", value(), (n) => Number.isInteger(n) && n >= 0);
        break;
      default:
        throw new UsageError(`unknown argument '${arg}'`);
    }
  }
  return args;
}

function printList(): void {
  const profiles = listProfiles();
  const width = Math.max(...profiles.map((p) => p.name.length), ...Object.keys(FAULTS).map((f) => f.length));
  const lines = ["profiles:"];
  for (const p of profiles) lines.push(`  ${p.name.padEnd(width)}  ${p.description}`);
  lines.push("faults:");
  for (const [name, description] of Object.entries(FAULTS)) lines.push(`  ${name.padEnd(width)}  ${description}`);
  process.stdout.write(`${lines.join("\n")}\n`);
}

/**
 * `gpuhost sim`: serve until SIGTERM or SIGINT, then close cleanly and return 0. Faults that end
 * the process (jit-crash, oom-at-load) exit through process.exit with their own non-zero status.
 */
export async function simMain(argv: string[]): Promise<number> {
  let args: SimArgs;
  try {
    args = parseSimArgs(argv);
  } catch (err) {
    process.stderr.write(`gpuhost sim: ${(err as Error).message}\n${USAGE}\n`);
    return 2;
  }
  if (args.help) {
    process.stdout.write(`${USAGE}\n`);
    return 0;
  }
  if (args.list) {
    printList();
    return 0;
  }
  let sim: Awaited<ReturnType<typeof startSimulator>>;
  try {
    sim = await startSimulator({
      profile: args.profile,
      faults: args.faults,
      port: args.port,
      host: args.host,
      timeScale: args.timeScale,
      apiKey: args.apiKey,
      servedModelName: args.servedModelName,
      maxQueuedRequests: args.maxQueuedRequests,
      onExit: (code) => process.exit(code),
    });
  } catch (err) {
    const code = (err as { code?: string }).code;
    if (code === "EADDRINUSE" || code === "EACCES") {
      const why = code === "EADDRINUSE" ? "is in use (another process listens there)" : "needs privileges";
      process.stderr.write(`gpuhost sim: port ${args.port} on ${args.host} ${why}; choose another with --port\n`);
      return 2;
    }
    const known = err instanceof ProfileError || err instanceof UnknownFaultError;
    process.stderr.write(`gpuhost sim: ${known ? err.message : ((err as Error).stack ?? String(err))}\n`);
    return known ? 2 : 1;
  }
  return new Promise<number>((resolve) => {
    const stop = (signal: string): void => {
      process.off("SIGTERM", onTerm);
      process.off("SIGINT", onInt);
      process.stderr.write(
        `[${new Date().toISOString().replace("T", " ").slice(0, 19)}] Received ${signal}, shutting down.\n`,
      );
      void sim.close().then(() => resolve(0));
    };
    const onTerm = (): void => stop("SIGTERM");
    const onInt = (): void => stop("SIGINT");
    process.on("SIGTERM", onTerm);
    process.on("SIGINT", onInt);
  });
}
