import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { parse, stringify } from "yaml";
import { startSimulator, type SimulatorOptions } from "../../simulator/index";

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

/** A copy of a shipped profile with some fields replaced, written to a temporary YAML file. */
export function derivedProfile(base: string, patch: (p: Record<string, any>) => void): string {
  const raw = parse(fs.readFileSync(path.join(__dirname, "..", "..", "simulator", "profiles", `${base}.yaml`), "utf8"));
  patch(raw);
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "gpuhost-sim-"));
  const file = path.join(dir, `${base}-test.yaml`);
  fs.writeFileSync(file, stringify(raw));
  return file;
}

export async function json(url: string, init?: RequestInit): Promise<{ status: number; body: any }> {
  const res = await fetch(url, init);
  const text = await res.text();
  let body: unknown = text;
  try {
    body = JSON.parse(text);
  } catch {
    // not JSON: keep the text
  }
  return { status: res.status, body };
}

export function post(
  url: string,
  body: unknown,
  headers: Record<string, string> = {},
): Promise<{ status: number; body: any }> {
  return json(url, {
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
