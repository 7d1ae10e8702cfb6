/**
 * SGLang's launch flags as one typed structure (after sglang's ServerArgs), and the argv rendered
 * from it. The unit's ExecStart is built from this argv word by word; nothing here joins strings.
 */
import type { ExecWord } from "./systemd-syntax";
import type { ServiceKind, ServicesConfig } from "./schema";

export interface SpeculativeArgs {
  algorithm: "EAGLE3" | "DFLASH";
  draftModelPath: string;
  numSteps?: number;
  eagleTopk?: number;
  numDraftTokens?: number;
  /** DFLASH only. */
  dflashBlockSize?: number;
}

export interface SglangServerArgs {
  modelPath: string;
  servedModelName?: string;
  tp: number;
  host: string;
  port: number;
  reasoningParser?: string;
  toolCallParser?: string;
  trustRemoteCode: boolean;
  memFractionStatic?: number;
  contextLength?: number;
  attentionBackend?: string;
  enableMetrics: boolean;
  /**
   * The credential (LoadCredential= id) holding `api-key: "..."`: the server reads it with --config,
   * so the key never appears in any process's argv or environment.
   */
  apiKeyCredential?: string;
  speculative?: SpeculativeArgs;
}

/**
 * The credential id the API key reaches the server through. SGLang's `--config` (ConfigArgumentMerger,
 * python/sglang/srt/server_args_config_parser.py) reads flags from a .yaml/.yml/.json file, so the
 * name must keep the .yaml suffix. ServerArgs reads no environment variable for the key.
 */
export const API_KEY_CREDENTIAL = "sglang-server-args.yaml";

/** The typed args of one service kind, from the services config. */
export function serverArgsFor(
  kind: ServiceKind,
  services: ServicesConfig,
  opts: { apiKey: boolean },
): SglangServerArgs {
  const base: SglangServerArgs = {
    modelPath: services.modelPath,
    servedModelName: services.servedModelName,
    tp: services.tp,
    host: services.host,
    port: services.port,
    reasoningParser: services.reasoningParser,
    toolCallParser: services.toolCallParser,
    trustRemoteCode: services.trustRemoteCode,
    memFractionStatic: services.memFractionStatic,
    contextLength: services.contextLength,
    attentionBackend: services.attentionBackend,
    enableMetrics: services.enableMetrics,
    apiKeyCredential: opts.apiKey ? API_KEY_CREDENTIAL : undefined,
  };
  if (kind === "autoregressive") return base;
  const spec = kind === "eagle3" ? services.eagle3 : services.dflash;
  if (!spec) throw new Error(`services.${kind} is not configured`);
  return {
    ...base,
    memFractionStatic: spec.memFractionStatic ?? services.memFractionStatic,
    speculative: {
      algorithm: kind === "eagle3" ? "EAGLE3" : "DFLASH",
      draftModelPath: spec.draftModelPath,
      numSteps: spec.numSteps,
      eagleTopk: spec.eagleTopk,
      numDraftTokens: spec.numDraftTokens,
      dflashBlockSize: kind === "dflash" ? services.dflash?.blockSize : undefined,
    },
  };
}

/** The flags, in ServerArgs order; each value is its own word. */
export function sglangArgv(a: SglangServerArgs): ExecWord[] {
  const argv: ExecWord[] = [];
  const opt = (flag: string, value: string | number | undefined) => {
    if (value !== undefined) argv.push(flag, String(value));
  };
  opt("--model-path", a.modelPath);
  opt("--served-model-name", a.servedModelName);
  if (a.trustRemoteCode) argv.push("--trust-remote-code");
  opt("--context-length", a.contextLength);
  opt("--host", a.host);
  opt("--port", a.port);
  opt("--tp", a.tp);
  opt("--mem-fraction-static", a.memFractionStatic);
  if (a.apiKeyCredential) argv.push("--config", { credential: a.apiKeyCredential });
  opt("--reasoning-parser", a.reasoningParser);
  opt("--tool-call-parser", a.toolCallParser);
  if (a.enableMetrics) argv.push("--enable-metrics");
  opt("--attention-backend", a.attentionBackend);
  const s = a.speculative;
  if (s) {
    opt("--speculative-algorithm", s.algorithm);
    opt("--speculative-draft-model-path", s.draftModelPath);
    opt("--speculative-num-steps", s.numSteps);
    opt("--speculative-eagle-topk", s.eagleTopk);
    opt("--speculative-num-draft-tokens", s.numDraftTokens);
    if (s.algorithm === "DFLASH") opt("--speculative-dflash-block-size", s.dflashBlockSize);
  }
  return argv;
}

/**
 * What ExecStart runs in place of SGLang from the venv: a program that takes SGLang's own flags
 * (the platform hands it over, ready; components/platform.ts).
 */
export interface ServerProgram {
  /** The words before SGLang's flags: the program and its own arguments. */
  command: string[];
  /** Environment= entries each service's unit adds, by kind: what SGLang's flags cannot say. */
  environment: Partial<Record<ServiceKind, Array<[string, string]>>>;
  /** The platform the unit's header comment names (e.g. "simulated"). */
  platform: string;
}

/** SGLang's own server, run by the venv's Python. */
export function sglangCommand(venvPath: string): string[] {
  return [`${venvPath}/bin/python3`, "-m", "sglang.launch_server"];
}

/** The full ExecStart argv: the program's words, then SGLang's flags. */
export function execStartArgv(command: readonly string[], args: SglangServerArgs): ExecWord[] {
  return [...command, ...sglangArgv(args)];
}
