/**
 * llama.cpp's llama-server serving SmolLM2-135M-Instruct on the CPU, as .ci/real-server-prereqs.sh
 * builds and caches them (docs/real-server.md): a real OpenAI-compatible inference server that this
 * project did not write, with a real model. The tests start it on free loopback ports and kill it.
 */
import { execFileSync, spawn, type ChildProcess } from "node:child_process";
import * as fs from "node:fs";
import * as net from "node:net";
import * as os from "node:os";
import * as path from "node:path";
import { afterAll, afterEach, beforeAll } from "vitest";
import { DEFAULT_ANSWER_ITEMS } from "../../gate/base/answer-set";

/** The id the server lists and answers with (--alias), in the form SGLang's --served-model-name takes. */
export const MODEL_ALIAS = "HuggingFaceTB/SmolLM2-135M-Instruct";

export interface RealServerManifest {
  server: { package: string; version: string; sha256: string; downloadBytes: number; llamaServerVersion: string };
  model: { package: string; version: string; sha256: string; downloadBytes: number; file: string; fileSha256: string };
  seconds: { download: number; build: number; total: number };
}

export interface RealServerInstall {
  dir: string;
  serverBin: string;
  model: string;
  manifest: RealServerManifest;
}

const PREREQS = path.resolve(__dirname, "../../.ci/real-server-prereqs.sh");

/**
 * The cached install; the script returns at once when it is there (npm test runs it before any test
 * through engine/test-prereqs.sh) and builds it otherwise.
 */
export function realServerInstall(): RealServerInstall {
  let dir: string;
  try {
    dir = execFileSync("bash", [PREREQS], {
      encoding: "utf8",
      stdio: ["ignore", "pipe", "inherit"],
      timeout: 3_600_000,
    }).trim();
  } catch (err) {
    throw new Error(
      `the real server could not be set up (bash .ci/real-server-prereqs.sh): ${(err as Error).message}`,
      {
        cause: err,
      },
    );
  }
  const manifest = JSON.parse(fs.readFileSync(path.join(dir, "manifest.json"), "utf8")) as RealServerManifest;
  return { dir, serverBin: path.join(dir, "bin/llama-server"), model: path.join(dir, manifest.model.file), manifest };
}

export async function freePort(): Promise<number> {
  const server = net.createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const port = (server.address() as net.AddressInfo).port;
  await new Promise((resolve) => server.close(resolve));
  return port;
}

export interface LlamaServerOptions {
  port?: number;
  /** Total context (tokens), shared by the slots. */
  contextTokens?: number;
  /** Slots: requests generated at once (continuous batching). */
  parallel?: number;
  /** Extra llama-server arguments. */
  args?: string[];
}

export interface LlamaServer {
  url: string;
  port: number;
  child: ChildProcess;
  /** Everything the server wrote so far (it logs to stderr). */
  log(): string;
  /** Resolves when the log from offset `from` on matches `re` (checked on every write); rejects after `timeoutMs`. */
  waitForLog(re: RegExp, timeoutMs: number, from?: number): Promise<void>;
  /** Resolves once the process has exited. */
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  /** SIGTERM, then SIGKILL after 5 s; resolves when it is gone. */
  stop(): Promise<void>;
}

export async function startLlamaServer(
  install: RealServerInstall,
  opts: LlamaServerOptions = {},
): Promise<LlamaServer> {
  const port = opts.port ?? (await freePort());
  // Half the cores (vitest runs two files at once), at most 4. Two threads on a loaded two-core machine
  // wait on each other at every token: a 128-token answer then took over 300 s (one thread: seconds).
  const threads = Math.max(1, Math.min(Math.floor(os.availableParallelism() / 2), 4));
  const child = spawn(
    install.serverBin,
    [
      "--model",
      install.model,
      "--alias",
      MODEL_ALIAS,
      "--host",
      "127.0.0.1",
      "--port",
      String(port),
      "--threads",
      String(threads),
      "--ctx-size",
      String(opts.contextTokens ?? 4096),
      "--parallel",
      String(opts.parallel ?? 2),
      "--metrics",
      "--jinja",
      ...(opts.args ?? []),
    ],
    { stdio: ["ignore", "pipe", "pipe"] },
  );
  let text = "";
  const waiters = new Set<() => void>();
  const onData = (b: Buffer) => {
    text += b.toString("utf8");
    for (const w of waiters) w();
  };
  child.stdout.on("data", onData);
  child.stderr.on("data", onData);
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.once("exit", (code, signal) => resolve({ code, signal })),
  );
  let gone = false;
  // A test runner that dies (Ctrl-C, a crash) must not leave the server behind.
  const reap = () => child.kill("SIGKILL");
  process.once("exit", reap);
  void exited.then(() => {
    gone = true;
    process.removeListener("exit", reap);
  });
  return {
    url: `http://127.0.0.1:${port}`,
    port,
    child,
    log: () => text,
    exited,
    waitForLog: (re, timeoutMs, from = 0) =>
      new Promise<void>((resolve, reject) => {
        const check = () => {
          if (!re.test(text.slice(from))) return;
          cleanup();
          resolve();
        };
        const timer = setTimeout(() => {
          cleanup();
          reject(
            new Error(`llama-server did not log ${String(re)} within ${timeoutMs} ms; its log:\n${text.slice(-3000)}`),
          );
        }, timeoutMs);
        const cleanup = () => {
          clearTimeout(timer);
          waiters.delete(check);
        };
        waiters.add(check);
        check();
      }),
    stop: async () => {
      if (gone) return;
      child.kill("SIGTERM");
      const timer = setTimeout(() => child.kill("SIGKILL"), 5_000);
      await exited;
      clearTimeout(timer);
    },
  };
}

/**
 * Facts SmolLM2-135M answers right (docs/answers.md), taken from the shipped set: an answer file for the
 * tests whose subject is the gate's phases or the comparison, not the model's score. The shipped set
 * itself is scored against this server in answers.test.ts; 24 answers on two loaded CPU cores took
 * minutes of each test's time.
 */
const KNOWN_RIGHT = [/capital of France/, /symbol for gold/, /Red Planet/, /days are in a week/];

/** Writes KNOWN_RIGHT's items as a JSONL answer file (--answers) in DIR; returns its path. */
export function smollm2AnswerFile(dir: string): string {
  const items = KNOWN_RIGHT.map((re) => DEFAULT_ANSWER_ITEMS.find((i) => re.test(i.prompt))!);
  const file = path.join(dir, "answers.jsonl");
  fs.writeFileSync(file, items.map(({ prompt, expect }) => JSON.stringify({ prompt, expect })).join("\n") + "\n");
  return file;
}

/** Polls /health until the server says it can generate (200; 503 while the model loads). Test setup, not the gate. */
export async function waitHealthy(server: LlamaServer, timeoutMs = 120_000): Promise<void> {
  const until = performance.now() + timeoutMs;
  while (performance.now() < until) {
    if (server.child.exitCode !== null || server.child.signalCode !== null)
      throw new Error(`llama-server exited while starting; its log:\n${server.log().slice(-3000)}`);
    try {
      if ((await fetch(`${server.url}/health`)).status === 200) return;
    } catch {
      // not listening yet
    }
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  throw new Error(`llama-server was not healthy within ${timeoutMs} ms; its log:\n${server.log().slice(-3000)}`);
}

/** One Prometheus counter or gauge of llama-server's /metrics (`llamacpp:NAME`). */
export async function metric(url: string, name: string): Promise<number> {
  const text = await (await fetch(`${url}/metrics`)).text();
  const line = text.split("\n").find((l) => l.startsWith(`llamacpp:${name} `));
  if (line === undefined) throw new Error(`llama-server's /metrics has no llamacpp:${name}:\n${text.slice(0, 2000)}`);
  return Number(line.split(/\s+/)[1]);
}

/**
 * The counter once it has passed `floor`, polled for up to `timeoutMs`. llama-server adds a request's
 * generated tokens to tokens_predicted_total only when its slot is released, and a client that hangs
 * up early (the gate's probe stops reading at the first visible answer token) has its slot released
 * when the server's loop gets to the cancel, while a /metrics scrape is posted ahead of it (a
 * high-priority task, served even during a decode). So the books settle a moment after the answer.
 * A counter that never passes `floor` (nothing was generated) still fails, after the bound.
 */
export async function metricAbove(url: string, name: string, floor: number, timeoutMs = 10_000): Promise<number> {
  const deadline = performance.now() + timeoutMs;
  for (;;) {
    const value = await metric(url, name);
    if (value > floor || performance.now() >= deadline) return value;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

/**
 * What every real-server suite sets up, at the top level of its file: the cached install (built
 * before any test by npm test; GPUHOST_SKIP_REAL_SERVER=1 skips the suites knowingly), and cleanups
 * run after each test, last registered first (servers stopped, folders removed).
 */
export function realServerSuite(): {
  skip: boolean;
  install: () => RealServerInstall;
  onCleanup: (cleanup: () => Promise<void>) => void;
  /** A server on a free port, stopped after the test (not yet waited for: see waitHealthy). */
  server: (opts?: LlamaServerOptions) => Promise<LlamaServer>;
  /**
   * A healthy server started once per file for these options and stopped after the file: for the
   * tests that neither kill it nor read its absolute counters (a model load is seconds of two cores).
   */
  shared: (opts?: LlamaServerOptions) => Promise<LlamaServer>;
} {
  const skip = process.env.GPUHOST_SKIP_REAL_SERVER === "1";
  let installed: RealServerInstall | undefined;
  const cleanups: (() => Promise<void>)[] = [];
  beforeAll(() => {
    if (!skip) installed = realServerInstall();
  }, 3_600_000);
  afterEach(async () => {
    for (const c of cleanups.splice(0).reverse()) await c();
  });
  const shared = new Map<string, Promise<LlamaServer>>();
  afterAll(async () => {
    // One that failed to start has nothing to stop.
    for (const s of shared.values()) await (await s.catch(() => undefined))?.stop();
  });
  const install = (): RealServerInstall => {
    if (!installed)
      throw new Error("the real server is not installed (GPUHOST_SKIP_REAL_SERVER=1, or beforeAll failed)");
    return installed;
  };
  return {
    skip,
    install,
    onCleanup: (cleanup) => cleanups.push(cleanup),
    server: async (opts = {}) => {
      const s = await startLlamaServer(install(), opts);
      cleanups.push(() => s.stop());
      return s;
    },
    shared: (opts = {}) => {
      const key = JSON.stringify(opts);
      if (!shared.has(key))
        shared.set(
          key,
          startLlamaServer(install(), opts).then(async (s) => {
            await waitHealthy(s).catch(async (err: unknown) => {
              await s.stop();
              throw err;
            });
            return s;
          }),
        );
      return shared.get(key)!;
    },
  };
}
