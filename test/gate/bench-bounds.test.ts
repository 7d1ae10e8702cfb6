/**
 * Bounded inputs, responsive always (issue 18.10): concurrency and request counts are bounded where
 * they are parsed, with the reason; at the bound, against a small server written in the test that
 * answers the warmup and the single request and never the sweep's 4096 requests in flight, Ctrl-C
 * and --deadline still end `gpuhost bench` (a child process), and its JSON says why.
 */
import { spawn } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import * as path from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { benchMain } from "../../cli/bench";
import type { BenchResult } from "../../gate/run/bench";
import { BenchPlanSchema, MAX_CONCURRENCY } from "../../gate/base/schema";
import { io } from "./cli-fixture";
import { loadServer, type LoadServer } from "./load-servers";

const repo = path.resolve(__dirname, "../..");
const servers: LoadServer[] = [];
afterEach(async () => {
  for (const s of servers.splice(0)) await s.close();
});

describe("bounds, with the reason, where they are parsed", () => {
  it("the schema refuses a concurrency over the bound and a level of too many requests", () => {
    const big = BenchPlanSchema.safeParse({ concurrency: [30000] });
    expect(big.success).toBe(false);
    expect(big.error?.issues[0]).toMatchObject({ path: ["concurrency", 0] });
    expect(big.error?.issues[0].message).toMatch(/^at most 4096: .*starve its event loop/);
    const many = BenchPlanSchema.safeParse({ concurrency: [4096], requestsPerConcurrency: 100 });
    expect(many.success).toBe(false);
    expect(many.error?.issues[0].message).toMatch(/409,600 requests in one run, more than 100,000/);
    expect(BenchPlanSchema.safeParse({ concurrency: [MAX_CONCURRENCY] }).success).toBe(true);
  });

  it("gpuhost bench refuses --concurrency 100000 as usage, saying why, before any request", async () => {
    const o = io();
    expect(await benchMain(["--endpoint", "http://127.0.0.1:9", "--concurrency", "8,100000"], o)).toBe(2);
    expect(o.err()).toMatch(
      /--concurrency takes a list of a whole number of at most 4,096, got "100000" \(each request in flight holds a connection/,
    );
  });
});

/** `gpuhost bench` at the bound; with `interrupt`, SIGINT once most of the sweep's requests are waiting. */
function runAtBound(server: LoadServer, file: string, extra: string[], interrupt: boolean) {
  const url = server.url;
  return new Promise<{ code: number | null; err: string; afterSweep: number }>((resolve) => {
    const args = [
      ...["bench", "--endpoint", url, "--model", "m", "--concurrency", String(MAX_CONCURRENCY)],
      ...["--requests-per-concurrency", "1", "--max-tokens", "4", "--prompts", "1", "--json", file, ...extra],
    ];
    const child = spawn(process.execPath, ["--import", "tsx", path.join(repo, "cli/gpuhost.ts"), ...args], {
      cwd: repo,
      stdio: ["ignore", "pipe", "pipe"],
    });
    let err = "";
    let sweepAt = 0;
    child.stderr.on("data", (d) => {
      err += d;
      if (sweepAt === 0 && /\[bench\] sweep:/.test(err)) {
        sweepAt = performance.now();
        if (!interrupt) return;
        const poll = setInterval(() => {
          if (server.received <= MAX_CONCURRENCY / 2 && performance.now() - sweepAt < 20_000) return;
          clearInterval(poll);
          child.kill("SIGINT");
        }, 100);
      }
    });
    child.on("exit", (code) => resolve({ code, err, afterSweep: (performance.now() - sweepAt) / 1000 }));
  });
}

describe("responsive at the bound: 4096 requests in flight that never answer", () => {
  it("Ctrl-C ends the run (exit 130) and the JSON says it was interrupted", async () => {
    const server = await loadServer({ hangBenchmarkAfter: 1 });
    servers.push(server);
    const file = path.join(mkdtempSync(path.join(tmpdir(), "gpuhost-bound-")), "b.json");
    const r = await runAtBound(server, file, ["--deadline", "600"], true);
    expect(r.code, r.err).toBe(130);
    // Seconds, not the 900 s request timeout (a generous bound: the machine may be busy).
    expect(r.afterSweep).toBeLessThan(30);
    expect(server.received).toBeGreaterThan(MAX_CONCURRENCY / 2);
    expect(existsSync(file)).toBe(true);
    const json = JSON.parse(readFileSync(file, "utf8")) as BenchResult;
    expect(json.complete).toBe(false);
    expect(json.stopReason).toMatch(/SIGINT|interrupt/i);
  }, 120_000);

  it("--deadline ends the run with its reason in the JSON", async () => {
    const server = await loadServer({ hangBenchmarkAfter: 1 });
    servers.push(server);
    const file = path.join(mkdtempSync(path.join(tmpdir(), "gpuhost-bound-")), "b.json");
    const r = await runAtBound(server, file, ["--deadline", "8"], false);
    expect(r.code, r.err).not.toBe(0);
    expect(r.code, r.err).not.toBe(130);
    expect(r.afterSweep).toBeLessThan(30);
    const json = JSON.parse(readFileSync(file, "utf8")) as BenchResult;
    expect(json.complete).toBe(false);
    expect(json.stopReason).toMatch(/benchmark deadline of 8 s passed/);
  }, 120_000);
});
