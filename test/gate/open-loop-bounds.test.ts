/**
 * The open loop keeps its bounds at any rate (issue 25.4), against small servers written here
 * (test/gate/load-servers.ts) with no capacity limit: the deadline and one abort stop `--rate 10000`
 * within seconds and leave nothing running; more streams in flight than the old fixed pool of 256
 * connections are not read as the server's capacity; a level the client itself fell behind on is
 * client-limited, never capacity; and a rate run the server kept up with is healthy (exit 0).
 */
import { spawn, type ChildProcess } from "node:child_process";
import { mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import * as path from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { benchMain, benchStatus } from "../../cli/bench";
import { bench, type BenchProgress, type BenchResult } from "../../gate/run/bench";
import { io } from "./cli-fixture";
import { loadServersClosedAfterEach, type LoadServer } from "./load-servers";

const repo = path.resolve(__dirname, "../..");
const start = loadServersClosedAfterEach();
const children: ChildProcess[] = [];
afterEach(() => {
  for (const c of children.splice(0)) if (c.exitCode === null && c.signalCode === null) c.kill("SIGKILL");
});
const tmp = () => mkdtempSync(path.join(tmpdir(), "gpuhost-open-bounds-"));

/** A plan of one short sweep: no single requests, a 4-token warmup. */
const plan = (rate: [number, ...number[]], extra: Record<string, unknown> = {}) => ({
  rate,
  requestsPerConcurrency: 1,
  singleRequestMaxTokens: [],
  warmupMaxTokens: 4,
  sweepMaxTokens: 4,
  ...extra,
});

/** `gpuhost bench` as a child process; `stageAt` is when its run began (its models line), `exitAt` when it ended. */
function benchChild(server: LoadServer, args: string[]) {
  return new Promise<{ code: number | null; err: string; stageAt: number; exitAt: number }>((resolve) => {
    const child = spawn(
      process.execPath,
      [
        "--import",
        "tsx",
        path.join(repo, "cli/gpuhost.ts"),
        "bench",
        "--endpoint",
        server.url,
        "--model",
        "m",
        ...args,
      ],
      { cwd: repo, stdio: ["ignore", "pipe", "pipe"] },
    );
    children.push(child);
    let err = "";
    let stageAt = 0;
    child.stderr.on("data", (d) => {
      err += d;
      if (stageAt === 0 && err.includes("[bench] models")) stageAt = performance.now();
    });
    child.on("exit", (code) => resolve({ code, err, stageAt, exitAt: performance.now() }));
  });
}

/** The most requests in flight at once, from the samples' start and end times. */
function peakInFlight(samples: { startedAtSeconds: number; e2eSeconds: number }[]): number {
  const edges = samples
    .flatMap((s): [number, number][] => [
      [s.startedAtSeconds, 1],
      [s.startedAtSeconds + s.e2eSeconds, -1],
    ])
    .sort((a, b) => a[0] - b[0] || a[1] - b[1]);
  let now = 0;
  let peak = 0;
  for (const [, step] of edges) peak = Math.max(peak, (now += step));
  return peak;
}

describe("the deadline and one abort stop any rate within seconds", () => {
  it("gpuhost bench --rate 10000 --deadline 2 ends within seconds of its deadline, exit 4, and the process ends on its own", async () => {
    const server = await start({ tokens: 2, chunkMs: 1 });
    const file = path.join(tmp(), "b.json");
    const r = await benchChild(server, [
      ...["--rate", "10000", "--requests-per-concurrency", "1", "--max-tokens", "4", "--prompts", "1"],
      ...["--deadline", "2", "--json", file],
    ]);
    // Exit 4 is set as process.exitCode (130 alone calls process.exit): the process ended because
    // nothing was left running, no timer and no socket.
    expect(r.code, r.err).toBe(4);
    expect(r.stageAt).toBeGreaterThan(0);
    // The deadline counts from the models line; a few seconds past it at most (the machine is busy).
    expect((r.exitAt - r.stageAt) / 1000, r.err).toBeLessThan(2 + 6);
    const json = JSON.parse(readFileSync(file, "utf8")) as BenchResult;
    expect(json).toMatchObject({ complete: false, deadlinePassed: true });
    expect(json.stopReason).toMatch(/benchmark deadline of 2 s passed/);
    expect(server.received).toBeGreaterThan(0);
  }, 90_000);

  it("one abort stops bench() at 10,000 req/s within seconds, and leaves no timer or socket behind", async () => {
    const server = await start({ tokens: 2, chunkMs: 1 });
    const count = (kind: string) => process.getActiveResourcesInfo().filter((k) => k === kind).length;
    const before = { timers: count("Timeout"), sockets: count("TCPSocketWrap") };
    const stop = new AbortController();
    let abortedAt = 0;
    const onProgress = (e: BenchProgress) => {
      if (e.kind !== "stage" || e.stage !== "sweep") return;
      setTimeout(() => {
        abortedAt = performance.now();
        stop.abort(new Error("interrupted by the test"));
      }, 1_000);
    };
    const r = await bench({ url: server.url, model: "m" }, plan([10_000]), { signal: stop.signal, onProgress });
    const returnedAfter = (performance.now() - abortedAt) / 1000;
    expect(abortedAt).toBeGreaterThan(0);
    expect(returnedAfter).toBeLessThan(3);
    expect(r).toMatchObject({ complete: false, deadlinePassed: false, stopReason: "interrupted by the test" });
    expect(server.received).toBeGreaterThan(0);
    await server.close();
    // Every timer of the run cleared, every connection closed (the pool is destroyed as it returns).
    const deadline = performance.now() + 3_000;
    while (
      (count("Timeout") > before.timers || count("TCPSocketWrap") > before.sockets) &&
      performance.now() < deadline
    )
      await new Promise((resolve) => setTimeout(resolve, 50));
    expect(count("Timeout")).toBeLessThanOrEqual(before.timers);
    expect(count("TCPSocketWrap")).toBeLessThanOrEqual(before.sockets);
  }, 90_000);
});

describe("the client's own lag is never the server's capacity", () => {
  it("about 300 streams in flight at once (more than the old pool of 256) against a server with no limit: it kept up, healthy, exit 0", async () => {
    // Every answer streams for about 2.5 s whatever the load; 30 host req/s at time scale 5 is 150
    // per wall second for 2 s, so some 300 are in flight at the end. Queued in the client, they read
    // as a server that began answering more slowly than it was sent to: "saturation", its "capacity".
    const server = await start({ tokens: 6, chunkMs: 500 });
    // the 6 tokens the server streams, asked for: usage beyond max_tokens is never certified
    const r = await bench({ url: server.url, model: "m" }, plan([30], { sweepMaxTokens: 6 }), { timeScale: 5 });
    const level = r.sweep[0];
    expect(level.errors, level.errorExamples.join("; ")).toBe(0);
    expect(peakInFlight(r.samples.sweep[0].requests)).toBeGreaterThan(256);
    expect(level.clientLimited).toBe(false);
    expect(level.keptUp).toBe(true);
    expect(level.certificate, JSON.stringify(level.certificate)).toMatchObject({ certified: true });
    expect(r).toMatchObject({ saturated: false, sustainedOutputTokensPerSecond: 0, keptUpWithEveryRate: true });
    expect(r.saturationVerdict).toMatch(
      /^not saturated up to 30 req\/s offered: the server kept up with every rate tried/,
    );
    expect(r.saturationVerdict).not.toMatch(/is its capacity/);
    expect(benchStatus(r)).toBe(0);
  }, 60_000);

  it("a level the client fell behind on (its event loop blocked half a second) is client-limited, never saturation; exit 1", async () => {
    const server = await start({ tokens: 4, chunkMs: 5 });
    let blocked = false;
    // The client's own stall, as a busy machine or a long GC gives it: requests due meanwhile leave late.
    const onProgress = (e: BenchProgress) => {
      if (blocked || e.kind !== "request" || e.stage !== "sweep" || e.done < 20) return;
      blocked = true;
      const until = performance.now() + 500;
      while (performance.now() < until);
    };
    const r = await bench({ url: server.url, model: "m" }, plan([30]), { timeScale: 10, onProgress });
    const level = r.sweep[0];
    expect(blocked).toBe(true);
    expect(level.clientLimited).toBe(true);
    expect(level.dispatchLagP99Seconds!).toBeGreaterThan(1);
    expect(r).toMatchObject({
      saturated: false,
      sustainedOutputTokensPerSecond: 0,
      sustainedLevel: null,
      keptUpWithEveryRate: false,
      clientLimitedLevels: [30],
    });
    expect(r.saturationVerdict).toMatch(
      /30 req\/s offered the client fell behind its schedule \(sent [\d.]+ of [\d.]+ req\/s planned, dispatch lag p99 [\d.]+ s\): the client's lag, not the server's capacity/,
    );
    expect(r.saturationVerdict).not.toMatch(/is its capacity/);
    expect(benchStatus(r)).toBe(1);
  }, 60_000);

  it("gpuhost bench --rate against a server that kept up: exit 0, saying so, with no capacity figure", async () => {
    const server = await start({ tokens: 4, chunkMs: 5 });
    const dir = tmp();
    const o = io();
    const code = await benchMain(
      [
        ...["--endpoint", server.url, "--model", "m", "--rate", "0.5", "--requests-per-concurrency", "1"],
        ...["--max-tokens", "4", "--prompts", "1", "--json", path.join(dir, "b.json")],
      ],
      o,
    );
    expect(code, o.err()).toBe(0);
    expect(o.out()).toMatch(/not saturated up to 0\.5 req\/s offered: the server kept up with every rate tried/);
    expect(o.out()).toContain("no sustained figure");
    expect(o.out()).toMatch(/\(kept up\)/);
  }, 60_000);
});
