import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { parse, stringify } from "yaml";
import { startSimulator, type SimulatorOptions } from "../../simulator/index";
import type { ExpectedRun, TheoreticalLevel } from "../../simulator/perf-model";
import type { profileSchema } from "../../simulator/profile";
import type { FailureReason, RequestRecord, ServerStatus } from "../../simulator/state";
import type { z } from "zod";

export interface TestSim {
  url: string;
  logs: string[];
  exits: number[];
  close(): Promise<void>;
}

const open: TestSim[] = [];

/** A simulator on an ephemeral loopback port, its log lines and exit calls captured. */
export async function startTestSim(opts: Partial<SimulatorOptions> = {}): Promise<TestSim> {
  const logs: string[] = [];
  const exits: number[] = [];
  const sim = await startSimulator({
    profile: "tiny",
    port: 0,
    log: (line) => logs.push(line),
    onExit: (code) => exits.push(code),
    ...opts,
  });
  const handle = { url: sim.url, logs, exits, close: () => sim.close() };
  open.push(handle);
  return handle;
}

export async function closeAll(): Promise<void> {
  await Promise.all(open.splice(0).map((s) => s.close()));
}

/** A profile as its YAML file spells it: the schema's input, before defaults. */
export type ProfileFile = z.input<typeof profileSchema>;

/** A copy of a shipped profile with some fields replaced, written to a temporary YAML file. */
export function derivedProfile(base: string, patch: (p: ProfileFile) => void): string {
  const raw = parse(
    fs.readFileSync(path.join(__dirname, "..", "..", "simulator", "profiles", `${base}.yaml`), "utf8"),
  ) as ProfileFile;
  patch(raw);
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "gpuhost-sim-"));
  const file = path.join(dir, `${base}-test.yaml`);
  fs.writeFileSync(file, stringify(raw));
  return file;
}

// The simulator's HTTP answers, as far as the tests read them. A test names the shape it expects
// (json<Truth>(...)); the body is not checked against it, so a different one fails the assertions.

/** An OpenAI-style error answer (4xx/5xx). */
export interface ApiError {
  error: { message: string; type: string; code: number };
}

/** POST /v1/chat/completions, non-streaming. */
export interface ChatCompletion {
  model: string;
  choices: { message: { content: string | null; reasoning_content?: string | null }; finish_reason: string }[];
  /** reasoning_tokens: SGLang's addition, always present (0 under reportReasoningTokens: false). */
  usage: { prompt_tokens: number; completion_tokens: number; reasoning_tokens: number };
}

/** GET /v1/models. */
export interface ModelList {
  data: { id: string }[];
}

/** POST /generate (SGLang's native endpoint). */
export interface Generated {
  meta_info: {
    completion_tokens: number;
    finish_reason: unknown;
    e2e_latency: number;
    spec_accept_length?: number;
    spec_verify_ct?: number;
  };
}

/** POST /generate on a speculative profile: SGLang adds the verify count and the acceptance length. */
export interface SpeculativeGenerated {
  meta_info: Required<Generated["meta_info"]>;
}

/** GET /get_server_info. */
export interface ServerInfo {
  speculative_algorithm: string | null;
  max_running_requests: number;
  internal_states: { avg_spec_accept_length?: number }[];
}

/** GET /sim/truth; `expected` with concurrency, prompt_tokens and output_tokens, `records` with requests=1. */
export interface Truth {
  status: ServerStatus;
  timeScale: number;
  simulatedSeconds: number;
  wallSeconds: number;
  tokensEmitted: number;
  requests: {
    received: number;
    completed: number;
    failed: number;
    failedBy: Record<FailureReason, number>;
    aborted: number;
    running: number;
    queued: number;
  };
  completed: { completionTokens: number; reasoningTokens: number; promptTokens: number };
  theoretical: (TheoreticalLevel & { wallAggregateTokensPerSecond: number })[];
  expected?: ExpectedRun;
  records?: RequestRecord[];
}

export async function json<T = unknown>(url: string, init?: RequestInit): Promise<{ status: number; body: T }> {
  const res = await fetch(url, init);
  const text = await res.text();
  let body: unknown = text;
  try {
    body = JSON.parse(text);
  } catch {
    // not JSON: keep the text
  }
  return { status: res.status, body: body as T };
}

export function post<T = unknown>(
  url: string,
  body: unknown,
  headers: Record<string, string> = {},
): Promise<{ status: number; body: T }> {
  return json<T>(url, {
    method: "POST",
    headers: { "content-type": "application/json", ...headers },
    body: JSON.stringify(body),
  });
}

/** Poll until /health answers 200 (the simulator loaded and warmed up). */
export async function waitHealthy(url: string, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    try {
      const res = await fetch(`${url}/health`);
      await res.arrayBuffer();
      if (res.status === 200) return;
    } catch {
      // not listening yet
    }
    if (Date.now() > deadline) throw new Error(`${url} not healthy within ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
