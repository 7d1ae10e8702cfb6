/**
 * Issue 44 item 4: the client judged by what it did. A server in its own process states its own
 * timing of each request (a Server-Timing trailer: when it wrote the first and the last token), so
 * the client check measures how late the client read them. The honest client is certified; the
 * same client made late on purpose (its event loop pinned busy most of the time, the way a
 * saturated client thread reads late) is not, and the check says which delay and by how much, even
 * with the event-loop and CPU checks switched off: the lag alone refuses it.
 */
import { spawn, type ChildProcess } from "node:child_process";
import * as path from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { bench } from "../../gate/index";
import type { BenchResult } from "../../gate/run/bench";
import { parseServerTiming } from "../../gate/run/stream";

const children: ChildProcess[] = [];
afterEach(() => {
  for (const c of children.splice(0)) c.kill("SIGKILL");
});

/** The timed server (fixtures/timed-server.ts) at RATE tokens a second per stream; its URL. */
async function timedServer(rate: number): Promise<string> {
  const child = spawn(
    process.execPath,
    ["--import", "tsx", path.join(__dirname, "fixtures/timed-server.ts"), "--rate", `${rate}`],
    {
      stdio: ["ignore", "pipe", "inherit"],
    },
  );
  children.push(child);
  const port = await new Promise<string>((resolve, reject) => {
    child.stdout.once("data", (d: Buffer) => resolve(d.toString().trim()));
    child.once("exit", (code) => reject(new Error(`the timed server exited (${code})`)));
  });
  return `http://127.0.0.1:${port}`;
}

/**
 * Pins this thread's event loop busy BUSY_MS of every EVERY_MS until the returned function is called:
 * the client reads each token late by up to BUSY_MS.
 */
function pinBusy(busyMs: number, everyMs: number): () => void {
  const timer = setInterval(() => {
    const end = performance.now() + busyMs;
    while (performance.now() < end) {
      // busy on purpose
    }
  }, everyMs);
  return () => clearInterval(timer);
}

/**
 * One closed-loop level of 4 slots, 2 requests each, of 50 tokens at 50 a second (1 s a request).
 * The event loop's own checks are off (stall and CPU shares of 1), so only the client's measured
 * delays can refuse a level; their fraction is 10 %, well above what an honest client's lag on the
 * loaded shared machine costs a 1 s request (20-70 ms seen at load 15-23), well below what the late
 * one's costs (a read waits out a 400 ms block nine times in ten: about 180 ms).
 */
async function level(url: string): Promise<BenchResult["sweep"][number]> {
  const r = await bench(
    { url, model: "m" },
    {
      singleRequestMaxTokens: [],
      concurrency: [4],
      sweepMaxTokens: 50,
      requestsPerConcurrency: 2,
      clientThreads: 1,
      certification: { maxClientStallShare: 1, maxClientCpuShare: 1, maxClientDelayShare: 0.1 },
    },
  );
  expect(r.sweep).toHaveLength(1);
  return r.sweep[0];
}

const clientCheckOf = (l: BenchResult["sweep"][number]) => l.certificate!.checks.find((c) => c.name === "client")!;

describe("client: the lag behind a server that states its own timing", () => {
  it("reads Server-Timing's first-token and last-token durations, in any order beside other metrics; nothing else is a timing", () => {
    expect(parseServerTiming('db;dur=3, last-token;dur=2003.5;desc="x", first-token;dur=1.25')).toEqual({
      firstTokenSeconds: 0.00125,
      lastTokenSeconds: 2.0035,
    });
    expect(parseServerTiming(undefined)).toBeNull();
    expect(parseServerTiming("first-token;dur=1")).toBeNull();
    expect(parseServerTiming("first-token;dur=abc, last-token;dur=2")).toBeNull();
    expect(parseServerTiming("first-token, last-token")).toBeNull();
  });

  it("the honest client is certified, its token lags measured and named", async () => {
    const l = await level(await timedServer(50));
    const client = clientCheckOf(l);
    expect(l.certificate!.certified, JSON.stringify(l.certificate)).toBe(true);
    expect(client.detail).toMatch(
      /; the first token read \d+ ms after the server wrote it \([\d.]+ % of its request time\), the last \d+ ms \([\d.]+ %; means of \d+ requests the server timed\)$/,
    );
  }, 120_000);

  it("a client made late (its event loop busy 400 ms of every 450) is not certified: the last token's lag, by how much (the honest one's within the fraction)", async () => {
    const url = await timedServer(50);
    const release = pinBusy(400, 450);
    let l: BenchResult["sweep"][number];
    try {
      l = await level(url);
    } finally {
      release();
    }
    const client = clientCheckOf(l);
    expect(l.certificate!.certified).toBe(false);
    expect(client.ok).toBe(false);
    expect(client.detail).toMatch(
      /they made the figure [\d.]+ % late \(.*the last token's lag [\d.]+ %\).*, over 10\.0 %: the figure measured the client's own delays$/,
    );
    // the event loop's own checks were off: the measured lag is what refused it
    expect(client.detail).not.toMatch(/the benchmark (process|client) was the limit/);
  }, 120_000);
});
