/**
 * Open-loop runs keep the error budget and speak in rates, against small servers written here
 * (test/gate/load-servers.ts): one that fails a share of its requests, one that serves one request
 * at a time and so cannot keep up with a fast rate. Through the library (bench()), `gpuhost bench`
 * and `gpuhost compare`, which share the one load generator (gate/run/load.ts).
 */
import { mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import * as path from "node:path";
import { describe, expect, it } from "vitest";
import { benchMain } from "../../cli/bench";
import { compareMain } from "../../cli/compare";
import { bench } from "../../gate/index";
import { io } from "./cli-fixture";
import { loadServersClosedAfterEach } from "./load-servers";

const start = loadServersClosedAfterEach();
const tmp = () => mkdtempSync(path.join(tmpdir(), "gpuhost-open-loop-"));

describe("an open-loop level over the error budget is not capacity", () => {
  it("gpuhost bench --rate: the fast rate shed most requests, so it counts for nothing; exit 3, only the slow rate measured", async () => {
    // 150 ms per answer; a request arriving while 2 are in flight gets HTTP 500. 0.5 req/s never
    // overlaps; 20 req/s keeps about 3 in flight, so most of its requests fail.
    const server = await start({ busyLimit: 2, tokens: 4, chunkMs: 50 });
    const dir = tmp();
    const o = io();
    const code = await benchMain(
      [
        ...["--endpoint", server.url, "--model", "m", "--rate", "0.5,20", "--requests-per-concurrency", "1"],
        ...["--max-tokens", "4", "--prompts", "1", "--json", path.join(dir, "b.json")],
      ],
      o,
    );
    expect(code).toBe(3);
    const json = JSON.parse(readFileSync(path.join(dir, "b.json"), "utf8")) as {
      mode: string;
      failedLevels: number[];
      sustainedOutputTokensPerSecond: number;
      saturationVerdict: string;
      sweep: { mode: string; level: number; withinErrorBudget: boolean; errors: number; requests: number }[];
    };
    expect(json.mode).toBe("open");
    expect(json.sweep.map((l) => [l.mode, l.level, l.withinErrorBudget])).toEqual([
      ["open", 0.5, true],
      ["open", 20, false],
    ]);
    expect(json.sweep[1].errors / json.sweep[1].requests).toBeGreaterThan(0.2);
    expect(json.failedLevels).toEqual([20]);
    // The level that kept the budget was kept up with: the offered load's, no capacity either.
    expect(json.sustainedOutputTokensPerSecond).toBe(0);
    expect(json.saturationVerdict).toMatch(/20 req\/s offered broke the error budget of 1 %/);
    expect(o.out()).toMatch(/^req\/s offered/m);
    expect(o.out()).toContain("no sustained figure");
    expect(o.out()).not.toMatch(/sustained \d/);
    expect(o.out()).not.toContain("concurren");
  }, 90_000);

  it("gpuhost compare --rate: the same level is no capacity, the recommendation says so, and the run exits 3 as bench does", async () => {
    const server = await start({ failEvery: 3 });
    const dir = tmp();
    const o = io();
    const code = await compareMain(
      [
        ...["--endpoint", server.url, "--model", "m", "--services", "autoregressive", "--activate-command", "true"],
        ...[
          "--rate",
          "2",
          "--requests-per-concurrency",
          "1",
          "--repeats",
          "1",
          "--max-tokens",
          "4",
          "--time-scale",
          "10",
        ],
        ...["--cache", path.join(dir, "cache.json"), "--chart", path.join(dir, "c.svg")],
        // This server answers filler: the subject is the sweep's error budget (answers: test/gate/answers.test.ts).
        ...["--answers", "none"],
      ],
      o,
    );
    expect(code).toBe(3);
    expect(o.out()).toContain("FAILED (error budget)");
    expect(o.out()).toContain("Run autoregressive: no capacity was measured");
    expect(o.out()).not.toContain("sustaining");
    expect(o.out()).not.toContain("concurrent");
    expect(readFileSync(path.join(dir, "c.svg"), "utf8")).toContain("request rate offered");
  }, 60_000);
});

describe("an open-loop level speaks in rates: kept up is no capacity, fallen behind is saturated", () => {
  // One request at a time, about 50 ms each: some 20 requests per wall second, 2 per host second at
  // time scale 10. 0.5 host req/s (5 per wall second) it keeps up with; 4 (40 per wall second) it cannot.
  const slow = { serial: true, tokens: 6, chunkMs: 10 };
  // Ten host seconds of arrivals per level (a second of wall time): 5 requests at 0.5, 40 at 4.
  const plan = (rate: [number, ...number[]]) => ({
    rate,
    requestsPerConcurrency: 1,
    singleRequestMaxTokens: [],
    warmupMaxTokens: 4,
    sweepMaxTokens: 6,
  });

  it("a rate the server cannot keep up with is saturated: its achieved rate is below the offered one, and it is the capacity", async () => {
    const server = await start(slow);
    const r = await bench({ url: server.url, model: "m" }, plan([0.5, 4]), { timeScale: 10 });
    expect(r.sweep.map((l) => [l.mode, l.level, l.errors])).toEqual([
      ["open", 0.5, 0],
      ["open", 4, 0],
    ]);
    expect(r.sweep[0].keptUp).toBe(true);
    expect(r.sweep[1].keptUp).toBe(false);
    expect(r.sweep[1].achievedRequestsPerSecond!).toBeLessThan(4 * 0.9);
    expect(r).toMatchObject({ mode: "open", saturated: true, sustainedLevel: 4, saturationConcurrency: null });
    expect(r.sustainedOutputTokensPerSecond).toBe(r.sweep[1].outputTokensPerSecond);
    expect(r.saturationVerdict).toMatch(/^saturation at 4 req\/s offered: the server began only [\d.]+ req\/s/);
  }, 60_000);

  it("a rate the server merely keeps up with is no capacity figure: nothing sustained, the verdict says to offer more", async () => {
    const server = await start(slow);
    const r = await bench({ url: server.url, model: "m" }, plan([0.5]), { timeScale: 10 });
    expect(r.sweep[0].keptUp).toBe(true);
    expect(r).toMatchObject({ saturated: false, sustainedOutputTokensPerSecond: 0, sustainedLevel: null });
    expect(r.saturationVerdict).toMatch(/^not saturated up to 0\.5 req\/s offered: .* not a capacity figure/);
  }, 60_000);
});
