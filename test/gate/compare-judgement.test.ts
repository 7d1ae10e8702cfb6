/**
 * The comparison is judged by the stack's (or the command line's) benchmark settings, the same
 * error budget and knee as VerifiedGeneration's, not the schema's defaults: settings that differ
 * from the defaults flip its verdict. Hand-made sweeps for the arithmetic; a small server written
 * here (test/gate/load-servers.ts) that fails one request in ten for the command line.
 */
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import * as path from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { compareMain } from "../../cli/compare";
import { compareServices, DEFAULT_KNEE, planService } from "../../gate/plan/compare";
import type { SweepLevel } from "../../gate/judge/levels";
import { compareChart } from "../../gate/reports/chart";
import { io } from "./cli-fixture";
import { loadServer, type LoadServer } from "./load-servers";

const level = (
  l: number,
  tokps: number,
  errors = 0,
  mode: "closed" | "open" = "closed",
  keptUp: boolean | null = null,
) =>
  ({
    mode,
    level: l,
    throughput: { mean: tokps, halfWidth: null, low: null, high: null, n: 1 },
    goodput: { mean: tokps, halfWidth: null, low: null, high: null, n: 1 },
    requests: 100,
    errors,
    withinErrorBudget: true,
    achievedRequestsPerSecond: mode === "open" ? l : null,
    keptUp,
    ttftP95Seconds: 1,
  }) as SweepLevel;

const job = { purpose: "batch" as const, completions: 1000, outputTokensPerCompletion: 1000, deadlineDays: 7 };

describe("the comparison's verdict follows the benchmark settings it is given", () => {
  it("errorBudget: 3 % errors at C=16 exclude it at the default 1 %, and count at a stack's 5 %", () => {
    const sweep = [level(8, 1000), level(16, 1800, 3)];
    const m = { service: "autoregressive" as const, sweep, acceptanceLength: null };
    const strict = planService(m, { ...job, gpusPerHost: 8 }, DEFAULT_KNEE);
    expect(strict.knee?.failedLevels).toEqual([16]);
    expect([strict.sustainedOutputTokensPerSecond, strict.atLevel]).toEqual([1000, 8]);
    const stack = { ...DEFAULT_KNEE, errorBudget: 0.05 };
    const lenient = planService(m, { ...job, gpusPerHost: 8 }, stack);
    expect(lenient.knee?.failedLevels).toEqual([]);
    expect([lenient.sustainedOutputTokensPerSecond, lenient.atLevel]).toEqual([1800, 16]);
    // The same through compareServices, down to the sentence.
    expect(compareServices([m], job).sentence).toContain("sustaining 1,000 tok/s at 8 concurrent");
    expect(compareServices([m], job, stack).sentence).toContain("sustaining 1,800 tok/s at 16 concurrent");
  });

  it("noisy means (issue 18.4): C=1 41 ± 19, C=2 41 ± 9, C=4 48 ± 10 is no knee at C=1; the plan says undetermined", () => {
    const noisy = (l: number, mean: number, halfWidth: number) =>
      ({
        ...level(l, mean),
        throughput: { mean, halfWidth, low: mean - halfWidth, high: mean + halfWidth, n: 3 },
      }) as SweepLevel;
    const m = {
      service: "autoregressive" as const,
      sweep: [noisy(1, 41, 19), noisy(2, 41, 9), noisy(4, 48, 10)],
      acceptanceLength: null,
    };
    const c = compareServices([m], job);
    expect(c.plans[0]).toMatchObject({ sustainedOutputTokensPerSecond: 48, atLevel: 4 });
    expect(c.plans[0].knee?.undetermined).toBe(true);
    expect(c.sentence).not.toContain("at 1 concurrent");
    expect(c.sentence).toContain("the knee is undetermined (run more repeats)");
  });

  it("kneeMinGain: +15 % per doubling is still rising at the default 10 %, and the knee at a stack's 20 %", () => {
    const m = { service: "autoregressive" as const, sweep: [level(8, 1000), level(16, 1150)], acceptanceLength: null };
    const rising = compareServices([m], job);
    expect(rising.plans[0].knee).toMatchObject({ saturated: false, sustainedOutputTokensPerSecond: 1150 });
    const knee = compareServices([m], job, { ...DEFAULT_KNEE, minGain: 0.2 });
    expect(knee.plans[0].knee).toMatchObject({ saturated: true, saturationConcurrency: 8 });
    expect(knee.plans[0].sustainedOutputTokensPerSecond).toBe(1000);
    expect(knee.sentence).toContain("at 8 concurrent");
  });

  it("rates speak in rates: the recommendation and the chart say req/s offered, never concurrent", () => {
    const ar = [level(1, 400, 0, "open", true), level(4, 900, 0, "open", false)];
    const spec = [level(1, 600, 0, "open", true), level(4, 700, 0, "open", false)];
    const c = compareServices(
      [
        { service: "autoregressive", sweep: ar, acceptanceLength: null },
        { service: "eagle3", sweep: spec, acceptanceLength: 3 },
      ],
      job,
    );
    expect(c.mode).toBe("open");
    // Only the levels each service fell behind at are capacity: 900 vs 700, at 4 req/s offered.
    expect(c.plans.map((p) => [p.service, p.sustainedOutputTokensPerSecond, p.atLevel])).toEqual([
      ["autoregressive", 900, 4],
      ["eagle3", 700, 4],
    ]);
    expect(c.sentence).toMatch(/sustaining 900 tok\/s at 4 req\/s offered/);
    expect(c.sentence).toMatch(/EAGLE-3 stops beating autoregressive near \d+ req\/s offered/);
    expect(c.sentence).not.toContain("concurrent");
    const svg = compareChart(
      {
        outcomes: [
          { service: "autoregressive", measured: true, failure: null, acceptanceLength: null, sweep: ar },
          { service: "eagle3", measured: true, failure: null, acceptanceLength: 3, sweep: spec },
        ],
        comparison: c,
        activeAfter: "autoregressive",
        measuredNow: 2,
        timeScale: 1,
      },
      "m",
    );
    expect(svg).toContain("request rate offered, req/s");
    expect(svg).not.toContain("concurrent");
  });
});

describe("gpuhost compare --error-budget reaches the verdict (against a server that fails one request in ten)", () => {
  let server: LoadServer | undefined;
  afterEach(async () => server?.close());

  const run = async (extra: string[]) => {
    const o = io();
    const dir = mkdtempSync(path.join(tmpdir(), "gpuhost-judgement-"));
    const code = await compareMain(
      [
        ...["--endpoint", server!.url, "--model", "m", "--services", "autoregressive", "--activate-command", "true"],
        ...["--concurrency", "2", "--requests-per-concurrency", "10", "--repeats", "1", "--max-tokens", "4"],
        ...["--cache", path.join(dir, "cache.json"), ...extra],
        // This server answers filler: the subject is the error budget (answers: test/gate/answers.test.ts).
        ...["--answers", "none"],
      ],
      o,
    );
    return { code, out: o.out() };
  };

  it("10 % errors: no capacity and exit 3 at the default 1 %; counted at --error-budget 20 %", async () => {
    server = await loadServer({ failEvery: 10 });
    const strict = await run([]);
    expect(strict.code).toBe(3);
    expect(strict.out).toContain("Run autoregressive: no capacity was measured");
    expect(strict.out).toContain("no level kept the error budget of 1 %");
    const lenient = await run(["--error-budget", "20%"]);
    expect(lenient.code).toBe(0);
    expect(lenient.out).toMatch(/Run autoregressive: it finishes .* sustaining [\d,]+ tok\/s at 2 concurrent/);
  }, 60_000);
});
