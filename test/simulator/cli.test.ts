import { spawn, type ChildProcess } from "node:child_process";
import * as path from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { parseSimArgs } from "../../cli/sim";
import { FAULT_NAMES } from "../../simulator/faults";
import { type ChatCompletion, post, waitHealthy } from "./helpers";

const ROOT = path.join(__dirname, "..", "..");
const children: ChildProcess[] = [];

afterEach(() => {
  for (const c of children.splice(0)) if (c.exitCode === null && c.signalCode === null) c.kill("SIGKILL");
});

interface Run {
  child: ChildProcess;
  stdout: () => string;
  stderr: () => string;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

/**
 * `npx tsx cli/sim-server.ts ARGS` as a real child process. For signal tests the server runs in one
 * node process with tsx as its loader (`node --import tsx`), so the signal reaches the server itself:
 * npx dies on SIGTERM without passing it on, and the tsx wrapper, relaying it, reports its own exit
 * status (143) on Node 24 whatever the server returned.
 */
function run(args: string[], via: "npx" | "node" = "npx"): Run {
  const [cmd, pre] = via === "npx" ? ["npx", ["tsx"]] : [process.execPath, ["--import", "tsx"]];
  const child = spawn(cmd, [...pre, "cli/sim-server.ts", ...args], { cwd: ROOT, stdio: ["ignore", "pipe", "pipe"] });
  children.push(child);
  let out = "";
  let err = "";
  child.stdout.on("data", (d: Buffer) => (out += d.toString()));
  child.stderr.on("data", (d: Buffer) => (err += d.toString()));
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.on("close", (code, signal) => resolve({ code, signal })),
  );
  return { child, stdout: () => out, stderr: () => err, exited };
}

/** The server logs its URL to stderr, as uvicorn does. */
async function urlOf(r: Run): Promise<string> {
  for (let i = 0; i < 300; i++) {
    const m = /Uvicorn running on (http:\/\/\S+)/.exec(r.stderr());
    if (m) return m[1];
    if (r.child.exitCode !== null) break;
    await new Promise((res) => setTimeout(res, 50));
  }
  throw new Error(`no URL in stderr:\n${r.stderr()}`);
}

describe("gpuhost sim command line (real child processes)", () => {
  it("--list prints every profile and every fault with a description", async () => {
    const r = run(["--list"]);
    expect((await r.exited).code).toBe(0);
    for (const name of [
      "tiny",
      "kimi-k2.6-8x-rtx-pro-6000",
      "kimi-k2.6-8x-rtx-pro-6000-eagle3",
      "kimi-k2.6-8x-rtx-pro-6000-dflash",
      "kimi-k2.6-8x-h200",
    ]) {
      expect(r.stdout()).toMatch(new RegExp(`^  ${name.replace(/\./g, "\\.")} +\\S`, "m"));
    }
    for (const fault of FAULT_NAMES) expect(r.stdout()).toMatch(new RegExp(`^  ${fault} +\\S`, "m"));
  });

  it("serves, logs to stderr like a server, and exits 0 on SIGTERM", async () => {
    const r = run(["--profile", "tiny", "--port", "0", "--time-scale", "10", "--served-model-name", "kimi"], "node");
    const url = await urlOf(r);
    expect(url).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    await waitHealthy(url);
    const res = await post<ChatCompletion>(`${url}/v1/chat/completions`, {
      messages: [{ role: "user", content: "Say just 'OK'" }],
      max_tokens: 300,
    });
    expect(res.body.model).toBe("kimi");
    expect(res.body.choices[0].message.content).toBe("OK");
    r.child.kill("SIGTERM");
    expect(await r.exited).toEqual({ code: 0, signal: null });
    expect(r.stderr()).toContain('"POST /v1/chat/completions HTTP/1.1" 200');
    expect(r.stderr()).toContain("Received SIGTERM, shutting down.");
  });

  it("jit-crash: the first chat prints the curand.h line to stderr and the process exits non-zero", async () => {
    const r = run(["--fault", "jit-crash", "--port", "0", "--time-scale", "10"]);
    const url = await urlOf(r);
    await waitHealthy(url);
    await expect(
      post(`${url}/v1/chat/completions`, { messages: [{ role: "user", content: "hi" }], max_tokens: 8 }),
    ).rejects.toThrow();
    const { code } = await r.exited;
    expect(code).not.toBe(0);
    expect(code).toBe(1);
    expect(r.stderr()).toContain("fatal error: curand.h: No such file or directory");
  });

  it("an unknown profile or fault exits 2 with a message naming it", async () => {
    const r = run(["--profile", "no-such-profile", "--port", "0"]);
    expect((await r.exited).code).toBe(2);
    expect(r.stderr()).toContain("unknown simulator profile 'no-such-profile'");
  });
});

describe("argument parsing", () => {
  it("takes repeated and comma-separated faults, --flag=value, and defaults", () => {
    expect(parseSimArgs([])).toMatchObject({
      profile: "tiny",
      port: 30000,
      host: "127.0.0.1",
      timeScale: 1,
      faults: [],
    });
    const a = parseSimArgs([
      "--fault",
      "silent",
      "--fault=late-port,jit-crash",
      "--port=0",
      "--time-scale",
      "50",
      "--api-key",
      "k",
    ]);
    expect(a).toMatchObject({ faults: ["silent", "late-port,jit-crash"], port: 0, timeScale: 50, apiKey: "k" });
  });

  it("rejects bad values", () => {
    expect(() => parseSimArgs(["--port", "70000"])).toThrow(/--port/);
    expect(() => parseSimArgs(["--time-scale", "0"])).toThrow(/--time-scale/);
    expect(() => parseSimArgs(["--bogus"])).toThrow(/unknown argument/);
    expect(() => parseSimArgs(["--profile"])).toThrow(/needs a value/);
  });
});
