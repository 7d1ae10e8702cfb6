import { describe, expect, it } from "vitest";
import { benchChart } from "../../gate/reports/chart";
import { compareServices } from "../../gate/plan/compare";
import { compareChart } from "../../gate/reports/chart";
import { compareCsv } from "../../gate/reports/csv";
import { compareText } from "../../gate/reports/compare-report";
import type { CompareResult } from "../../gate/plan/compare-run";
import type { SweepLevel } from "../../gate/judge/levels";

const level = (l: number, tokps: number, ttft: number): SweepLevel =>
  ({
    mode: "closed",
    level: l,
    runs: [],
    throughput: { mean: tokps, halfWidth: 10, low: tokps - 10, high: tokps + 10, n: 3 },
    goodput: { mean: tokps, halfWidth: null, low: null, high: null, n: 3 },
    ttftP50Seconds: ttft,
    ttftP95Seconds: ttft * 2,
    ttftP99Seconds: ttft * 3,
    ttfaP50Seconds: ttft,
    ttfaP95Seconds: ttft * 2,
    ttfaP99Seconds: ttft * 3,
    itlP50Seconds: 0.03,
    itlP95Seconds: 0.05,
    itlP99Seconds: 0.06,
    e2eP50Seconds: 60,
    e2eP95Seconds: 70,
    e2eP99Seconds: 80,
    itlPerTokenP50Seconds: 0.03,
    itlPerTokenP95Seconds: 0.04,
    meetsSlo: true,
    requests: l,
    errors: 0,
    acceptanceLength: null,
  }) as unknown as SweepLevel;

function result(): CompareResult {
  const ar = [level(1, 42, 0.2), level(16, 384, 0.5), level(64, 832, 2)];
  const ea = [level(1, 100, 0.2), level(16, 490, 0.4), level(64, 674, 1.5)];
  const outcomes = [
    { service: "autoregressive" as const, measured: true, failure: null, acceptanceLength: null, sweep: ar },
    { service: "eagle3" as const, measured: false, failure: null, acceptanceLength: 3.2, sweep: ea },
  ];
  return {
    outcomes,
    comparison: compareServices(outcomes, { purpose: "batch" }),
    activeAfter: "autoregressive",
    measuredNow: 1,
    timeScale: 40,
  };
}

describe("comparison report", () => {
  it("text: per-service table, crossover, plan per service, recommendation, time scale said", () => {
    const text = compareText(result());
    expect(text).toContain("time scale 40, durations multiplied and rates divided by 40");
    expect(text).toContain("EAGLE-3 (unchanged, from the last comparison), acceptance 3.20 tokens/step");
    expect(text).toMatch(/Crossover: EAGLE-3 stops beating autoregressive at 64 concurrent \(estimated \d+\)/);
    expect(text).toMatch(/autoregressive\s+832\s+64\s+25\.0\s+4/);
    expect(text).toContain("Run autoregressive:");
    expect(text).toContain("Active now: autoregressive.");
  });

  it("text with the host's roofline: each level's share of the roofline at its concurrency (issue 28)", () => {
    // A roofline of 10 tok/s per concurrent stream: 832 at 64 is 832 / 640 = 130 %, 42 at 1 is 420 %.
    const text = compareText(result(), (c) => 10 * c);
    expect(text).toMatch(/accept\s+roofline\s+errors/);
    // each line ends with the level's certificate: none was gathered for these levels built by hand
    expect(text).toMatch(/^\s+64\s+832 .* 130 %\s+0\/64 {2}not certified: no evidence was gathered$/m);
    expect(text).toMatch(/^\s+1\s+42 .* 420 %\s+0\/1 {2}not certified: no evidence was gathered$/m);
    expect(compareText(result())).not.toContain("roofline");
  });

  it("CSV: one row per service and level with the interval and the time scale", () => {
    const rows = compareCsv(result()).trim().split("\n");
    expect(rows).toHaveLength(1 + 6);
    expect(rows[0]).toMatch(/^service,mode,level,output_tok_s_mean,output_tok_s_ci95_low,output_tok_s_ci95_high,/);
    expect(rows[3]).toMatch(/^autoregressive,closed,64,832,822,842,/);
    // the time scale, then the certificate's cells: none gathered for a level built by hand
    expect(rows[3].endsWith(",40,,no evidence was gathered")).toBe(true);
    expect(rows[0].endsWith(",time_scale,certified,certificate_failures")).toBe(true);
  });

  it("charts: one line per service and the crossover marked; the bench chart gives TTFT its own axis", () => {
    const svg = compareChart(result(), "kimi-k2.6");
    expect(svg.match(/<path /g)).toHaveLength(4); // 2 services x (throughput, TTFT)
    expect(svg).toMatch(/EAGLE-3 = AR at ~\d+/);
    expect(svg).toContain("stroke-dasharray");
    const bench = benchChart({
      model: "m",
      sweep: [8, 64].map((c) => ({ ...level(c, c * 10, 0.5), concurrency: c, outputTokensPerSecond: c * 10 }) as never),
      saturationConcurrency: 64,
      sustainedOutputTokensPerSecond: 640,
    });
    // Four panels, each with its own title: TTFT no longer shares E2E's axis.
    for (const t of ["aggregate output tokens/s", "time to first token", "inter-token latency", "end-to-end latency"])
      expect(bench).toContain(t);
    // The last x label sits inside the panel, not on the frame's edge (it was clipped at x = width).
    const labels = [...bench.matchAll(/<text x="([\d.]+)" y="[\d.]+" text-anchor="middle">64<\/text>/g)].map((m) =>
      Number(m[1]),
    );
    expect(labels.length).toBeGreaterThan(0);
    for (const x of labels) expect(x).toBeLessThan(880 - 20);
  });
});
