import * as fs from "node:fs";
import * as path from "node:path";
import { parse as parseYaml } from "yaml";
import { FAULTS } from "../simulator/faults";
import { startSimulator, UnknownFaultError } from "../simulator/index";
import { listProfiles, ProfileError } from "../simulator/profile";
import { defaultIo, EXIT, Interrupted, runCommand, type CliIo } from "./common";
import { type CommandSpec, parseFlags, usageLine, UsageError, type Values } from "./options";

export const SIM = {
  name: "sim",
  alsoUsage: ["gpuhost sim --list"],
  about: `An SGLang-faithful simulated server; it serves until SIGTERM or SIGINT, then exits 0.
--config FILE.yaml (or .yml/.json) takes flags from a file, as SGLang's launch_server does: a flat
mapping such as \`api-key: "..."\`; flags on the command line win. That keeps the API key out of argv.`,
  flags: {
    profile: {
      type: "string",
      value: "NAME|PATH",
      description: "a profile (--list names them) or a profile file",
      default: "tiny",
    },
    fault: {
      type: "string",
      value: "NAME[,NAME]",
      multiple: true,
      description: "inject a fault (--list names them); a comma-separated list works too",
    },
    port: { type: "integer", min: 0, max: 65535, description: "port to listen on (0: any free one)", default: 30000 },
    host: { type: "string", value: "H", description: "address to listen on", default: "127.0.0.1" },
    "time-scale": {
      type: "number",
      value: "X",
      description: "simulated seconds per wall second; reported durations are simulated",
      default: 1,
    },
    "api-key": {
      type: "string",
      value: "K",
      description: "require this key (SGLang's flag; --config keeps it off argv)",
    },
    "served-model-name": { type: "string", value: "ID", description: "the model id served (default: the profile's)" },
    "max-queued-requests": {
      type: "integer",
      min: 0,
      description: "refuse requests beyond this queue (SGLang's flag)",
    },
    config: { type: "path", value: "FILE.yaml", description: "flags from a file (merged before parsing)" },
    list: { type: "boolean", description: "list the profiles and faults, and exit" },
  },
  exits: [
    [EXIT.ok, "stopped by SIGTERM/SIGINT, or --list"],
    [EXIT.failed, "an unexpected error (a fault that ends the process exits with its own status)"],
    [EXIT.usage, "usage, an unknown profile or fault, or a port that cannot be used"],
  ],
} as const satisfies CommandSpec;

interface SimArgs {
  list: boolean;
  profile: string;
  faults: string[];
  port: number;
  host: string;
  timeScale: number;
  apiKey?: string;
  servedModelName?: string;
  maxQueuedRequests?: number;
}

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

function simArgs(values: Values<typeof SIM.flags>): SimArgs {
  return {
    list: values.list ?? false,
    profile: values.profile,
    faults: values.fault,
    port: values.port,
    host: values.host,
    timeScale: values["time-scale"],
    apiKey: values["api-key"],
    servedModelName: values["served-model-name"],
    maxQueuedRequests: values["max-queued-requests"],
  };
}

/** The command line (after --config's flags are merged in) as the simulator's options. */
export function parseSimArgs(argv: string[]): SimArgs {
  return simArgs(parseFlags(SIM.flags, mergeConfigFile(argv)));
}

function printList(io: CliIo): void {
  const profiles = listProfiles();
  const width = Math.max(...profiles.map((p) => p.name.length), ...Object.keys(FAULTS).map((f) => f.length));
  const lines = ["profiles:"];
  for (const p of profiles) lines.push(`  ${p.name.padEnd(width)}  ${p.description}`);
  lines.push("faults:");
  for (const [name, description] of Object.entries(FAULTS)) lines.push(`  ${name.padEnd(width)}  ${description}`);
  io.stdout.write(`${lines.join("\n")}\n`);
}

/**
 * `gpuhost sim`: serve until SIGTERM or SIGINT, then close cleanly and return 0. Faults that end
 * the process (jit-crash, oom-at-load) exit through process.exit with their own non-zero status.
 */
export function simMain(argv: string[], io: CliIo = defaultIo()): Promise<number> {
  // --config is merged first, as SGLang does; its errors are usage errors like any other.
  let merged: string[];
  try {
    merged = argv.includes("--help") || argv.includes("-h") ? argv : mergeConfigFile(argv);
  } catch (err) {
    io.stderr.write(`gpuhost sim: ${(err as Error).message}\n${usageLine(SIM)}\n`);
    return Promise.resolve(EXIT.usage);
  }
  return runCommand(SIM, merged, io, (values, signal) => serve(simArgs(values), io, signal), { interruptIsStop: true });
}

async function serve(args: SimArgs, io: CliIo, signal: AbortSignal): Promise<number> {
  if (args.list) {
    printList(io);
    return EXIT.ok;
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
      io.stderr.write(`gpuhost sim: port ${args.port} on ${args.host} ${why}; choose another with --port\n`);
      return EXIT.usage;
    }
    const known = err instanceof ProfileError || err instanceof UnknownFaultError;
    io.stderr.write(`gpuhost sim: ${known ? err.message : ((err as Error).stack ?? String(err))}\n`);
    return known ? EXIT.usage : EXIT.failed;
  }
  // Served until the signal: SIGTERM/SIGINT (runCommand), logged as uvicorn does.
  await new Promise<void>((resolve) => signal.addEventListener("abort", () => resolve(), { once: true }));
  const reason: unknown = signal.reason;
  const name = reason instanceof Interrupted ? reason.signalName : "a stop";
  io.stderr.write(`[${new Date().toISOString().replace("T", " ").slice(0, 19)}] Received ${name}, shutting down.\n`);
  await sim.close();
  return EXIT.ok;
}
