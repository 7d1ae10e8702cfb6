/**
 * The comparison's stack outputs (gate/reports/outputs.ts) from hand-made sweeps: the per-service
 * table, knee, crossover and plan land under their documented names, parse with the typed schema,
 * and the active service is the one the run left active.
 */
import { describe, expect, it } from "vitest";
import { compareServices } from "../../gate/plan/compare";
import { comparisonOutputs, ServiceComparisonOutputsSchema } from "../../gate/reports/outputs";
import type { CompareResult } from "../../gate/plan/compare-run";
import type { SweepLevel } from "../../gate/judge/levels";

const level = (l: number, tokps: number, accept: number | null = null): SweepLevel =>
  ({
    mode: "closed",
    level: l,
    runs: [],
    throughput: { mean: tokps, halfWidth: null, low: null, high: null, n: 1 },
    goodput: { mean: tokps, halfWidth: null, low: null, high: null, n: 1 },
    requests: l,
    errors: 0,
    ttftP95Seconds: 1,
    ttfaP95Seconds: 1.5,
    itlPerTokenP50Seconds: 0.02,
    itlPerTokenP95Seconds: 0.03,
    e2eP50Seconds: 40,
    acceptanceLength: accept,
    meetsSlo: true,
  }) as unknown as SweepLevel;

describe("comparisonOutputs", () => {
  it("table, knee, crossover, recommendation and the active service, typed", () => {
    const ar = [level(1, 42), level(8, 240), level(16, 384), level(64, 832)];
    const eagle = [level(1, 100, 3.2), level(8, 280, 2.9), level(16, 360, 2.7), level(64, 500, 2.2)];
    const outcomes = [
      { service: "autoregressive" as const, measured: true, failure: null, acceptanceLength: null, sweep: ar },
      { service: "eagle3" as const, measured: true, failure: null, acceptanceLength: 3.2, sweep: eagle },
    ];
    const comparison = compareServices(
      outcomes.map((o) => ({ service: o.service, sweep: o.sweep, acceptanceLength: o.acceptanceLength })),
    );
    const result: CompareResult = {
      outcomes,
      comparison,
      activeAfter: "autoregressive",
      measuredNow: 2,
      timeScale: 40,
    };
    const out = ServiceComparisonOutputsSchema.parse(comparisonOutputs(result));
    expect(out.recommended).toBe("autoregressive");
    expect(out.runnerUp).toBe("eagle3");
    expect(out.activeService).toBe("autoregressive");
    expect(out.activeUnit).toBe("sglang-autoregressive.service");
    expect(out.recommendation).toBe(comparison.sentence);
    expect(out.timeNote).toMatch(/time scale 40/);
    const [a, e] = out.services;
    expect(a.sweep.map((l) => [l.level, l.outputTokensPerSecond])).toEqual([
      [1, 42],
      [8, 240],
      [16, 384],
      [64, 832],
    ]);
    expect(a.crossoverConcurrency).toBeNull();
    // Differences +58, +40, -24: crossing between 8 and 16 at 8 + 40 / 64 x 8 = 13.
    expect(e.crossoverFirstLevel).toBe(16);
    expect(e.crossoverConcurrency).toBe(13);
    expect(e.acceptanceLength).toBe(3.2);
    expect(e.sweep[0].acceptanceLength).toBe(3.2);
    expect(e.sustainedOutputTokensPerSecond).toBe(comparison.plans[1].sustainedOutputTokensPerSecond);
  });

  it("nothing measured: no recommendation, said in words", () => {
    const result: CompareResult = {
      outcomes: [{ service: "eagle3", measured: true, failure: "not ready: x", acceptanceLength: null, sweep: [] }],
      comparison: null,
      activeAfter: "autoregressive",
      measuredNow: 1,
      timeScale: 1,
    };
    const out = ServiceComparisonOutputsSchema.parse(comparisonOutputs(result));
    expect(out.recommended).toBeNull();
    expect(out.recommendation).toMatch(/nothing to recommend/);
    expect(out.services[0].failure).toBe("not ready: x");
  });
});
