import { describe, expect, it } from "vitest";
import { goodput, meanInterval, meetsSlo, perTokenLatency } from "../../gate/judge/goodput";
import { SloSchema } from "../../gate/base/schema";
import { BENCH_PROMPTS, CHARS_PER_TOKEN, longContextPrompt } from "../../gate/base/prompts";
import type { RequestSample } from "../../gate/base/samples";
import { summarizeSweepLevel, runSummary } from "../../gate/judge/levels";
import { toHostTime } from "../../gate/run/load";
import {
  levelsOf,
  pickCategory,
  poissonArrivals,
  requestAt,
  requestsOf,
  shapedRequest,
  WorkloadShapeSchema,
} from "../../gate/base/workload";
import { BenchPlanSchema } from "../../gate/base/schema";
import { requestSample } from "./samples";
import { drawLength, seededRandom } from "../../seeded-draws";
import { classifyContent } from "../../simulator/text";

function sample(over: Partial<RequestSample>): RequestSample {
  return requestSample(101, { ttftSeconds: 1, ttfaSeconds: 1, e2eSeconds: 11, ...over });
}

describe("workload shapes", () => {
  it("categories by weight: {chat 1, code 3} is chat below 0.25, code above", () => {
    expect(pickCategory({ chat: 1, code: 3 }, 0.2)).toBe("chat");
    expect(pickCategory({ chat: 1, code: 3 }, 0.3)).toBe("code");
    expect(pickCategory({ "long-context": 1 }, 0.99)).toBe("long-context");
  });

  it("length draws: fixed is exact, uniform stays in min..max", () => {
    const r = seededRandom(3);
    expect(drawLength({ distribution: "fixed", tokens: 2000 }, r)).toBe(2000);
    const u = Array.from({ length: 500 }, () => drawLength({ distribution: "uniform", min: 10, max: 20 }, r));
    expect(Math.min(...u)).toBe(10);
    expect(Math.max(...u)).toBe(20);
  });

  it("seeded draws are pinned: a seed gives the workload (and the simulator, seeded-draws.ts) the same sequence as ever", () => {
    const r = seededRandom(1);
    expect([r(), r(), r()]).toEqual([0.6270739405881613, 0.002735721180215478, 0.5274470399599522]);
    const draws = (seed: number, dist: Parameters<typeof drawLength>[0]) => {
      const random = seededRandom(seed);
      return Array.from({ length: 8 }, () => drawLength(dist, random));
    };
    expect(draws(3, { distribution: "uniform", min: 10, max: 20 })).toEqual([17, 10, 15, 10, 18, 15, 15, 11]);
    expect(draws(5, { distribution: "lognormal", median: 900, sigma: 0.7, min: 40, max: 16000 })).toEqual([
      1048, 633, 703, 306, 1095, 838, 2509, 705,
    ]);
    const shape = WorkloadShapeSchema.parse({
      mix: { chat: 1, code: 2, "long-context": 1 },
      outputTokens: { distribution: "lognormal", median: 800, sigma: 0.9, max: 8000 },
      longContextTokens: { distribution: "uniform", min: 1000, max: 30000 },
      seed: 17,
    });
    expect([0, 1, 2, 3].map((i) => [shapedRequest(shape, i).category, shapedRequest(shape, i).maxTokens])).toEqual([
      ["chat", 1391],
      ["long-context", 2910],
      ["chat", 1781],
      ["long-context", 1133],
    ]);
    expect(poissonArrivals(3, 3, 11)).toEqual([0, 0.23886467305909675, 0.4905008616409274]);
  });

  it("Poisson arrivals: starts at 0, mean gap 1/rate, reproducible for a seed", () => {
    const a = poissonArrivals(4, 4001, 9);
    expect(a[0]).toBe(0);
    expect(a[4000] / 4000).toBeGreaterThan(0.25 * 0.95);
    expect(a[4000] / 4000).toBeLessThan(0.25 * 1.05);
    expect(poissonArrivals(4, 10, 9)).toEqual(a.slice(0, 10));
    expect(() => poissonArrivals(0, 3, 1)).toThrow(/rate/);
  });

  it("requests: the same for every service, thinking as an extra body, realistic prompts the simulator classifies", () => {
    const shape = WorkloadShapeSchema.parse({ mix: { chat: 1, code: 1, "long-context": 1 }, thinking: false });
    expect(shapedRequest(shape, 7)).toEqual(shapedRequest(shape, 7));
    const reqs = Array.from({ length: 30 }, (_, i) => shapedRequest(shape, i));
    expect(new Set(reqs.map((r) => r.category))).toEqual(new Set(["chat", "code", "long-context"]));
    for (const r of reqs) {
      expect(r.extraBody).toEqual({ chat_template_kwargs: { thinking: false }, ignore_eos: true });
      expect(r.maxTokens).toBe(2048);
      expect(classifyContent(r.prompt)).toBe(r.category === "code" ? "code" : "chat");
    }
    expect(WorkloadShapeSchema.parse({}).thinking).toBeNull();
    expect(() => WorkloadShapeSchema.parse({ mix: { chat: 0 } })).toThrow(/weight > 0/);
  });

  it("long-context prompts are about the requested length", () => {
    const text = longContextPrompt(16384, 0);
    expect(text.length / CHARS_PER_TOKEN).toBeGreaterThan(16384 * 0.98);
    expect(text.length / CHARS_PER_TOKEN).toBeLessThan(16384 * 1.02);
  });
});

describe("goodput and confidence intervals (hand-computed)", () => {
  const slo = SloSchema.parse({ ttftSeconds: 2, itlSeconds: 0.1, ttftPercentile: 50, itlPercentile: 50 });
  const a = sample({ ttftSeconds: 1, e2eSeconds: 11 }); // ITL (11 - 1) / 100 = 0.1: meets
  const b = sample({ ttftSeconds: 3, e2eSeconds: 13 }); // TTFT 3 > 2: misses
  const c = sample({ error: "HTTP 500", completionTokens: 0 }); // failed: misses
  const d = sample({ ttftSeconds: 0.5, e2eSeconds: 20.5 }); // ITL 0.2 > 0.1: misses

  it("per-token ITL is (e2e - TTFT) / (tokens - 1)", () => {
    expect(perTokenLatency(a)).toBeCloseTo(0.1, 12);
    expect(perTokenLatency(d)).toBeCloseTo(0.2, 12);
    expect(perTokenLatency(c)).toBeNull();
    expect([a, b, c, d].map((s) => meetsSlo(s, slo))).toEqual([true, false, false, false]);
  });

  it("goodput counts only the requests that met the SLO: 101 tokens over 10 s = 10.1 tok/s", () => {
    const g = goodput([a, b, c, d], 10, slo);
    expect(g.goodputTokensPerSecond).toBeCloseTo(10.1, 12);
    expect(g.goodRequests).toBe(1);
    // TTFT median of the three successful (0.5, 1, 3) is 1; ITL median of (0.1, 0.1, 0.2) is 0.1.
    expect(g.ttftAtPercentileSeconds).toBe(1);
    expect(g.itlAtPercentileSeconds).toBeCloseTo(0.1, 12);
    expect(g.levelMeetsSlo).toBe(false); // a request failed
    expect(goodput([a, a], 10, slo).levelMeetsSlo).toBe(true);
    // [a, d]: TTFT median 0.75 s is within 2 s, but the ITL median (0.1 + 0.2) / 2 = 0.15 exceeds 0.1.
    expect(goodput([a, d], 10, slo).levelMeetsSlo).toBe(false);
  });

  it("95 % interval of 10, 12, 14: mean 12, half-width t(2) x s / sqrt(3) = 4.303 x 2 / 1.732", () => {
    const m = meanInterval([10, 12, 14]);
    expect(m.mean).toBe(12);
    expect(m.halfWidth).toBeCloseTo((4.303 * 2) / Math.sqrt(3), 9);
    expect(meanInterval([5]).halfWidth).toBeNull();
  });

  it("levels: throughput per run, interval across runs; wall-clock samples converted to host time", () => {
    const run1 = runSummary([a, a], 10, slo);
    const run2 = runSummary([a, a], 20, slo);
    expect(run1.outputTokensPerSecond).toBeCloseTo(20.2, 12);
    const level = summarizeSweepLevel("closed", 2, [run1, run2], slo, null);
    expect(level.throughput.mean).toBeCloseTo((20.2 + 10.1) / 2, 12);
    expect(level.requests).toBe(4);
    const host = toHostTime(sample({ ttftSeconds: 0.01, e2eSeconds: 0.11, itlSeconds: [0.001] }), 100);
    expect([host.ttftSeconds, host.e2eSeconds, host.itlSeconds[0]]).toEqual([1, 11, 0.1]);
  });
});

describe("a plan's sweep: one reading for bench() and the comparison", () => {
  it("levelsOf: the rates (open loop) where the plan has any, else the concurrencies", () => {
    expect(levelsOf(BenchPlanSchema.parse({ concurrency: [1, 4] }))).toEqual({ mode: "closed", levels: [1, 4] });
    expect(levelsOf(BenchPlanSchema.parse({ concurrency: [1, 4], rate: [2, 8] }))).toEqual({
      mode: "open",
      levels: [2, 8],
    });
  });

  it("requestsOf: without a mix the long-answer prompts, exactly max_tokens, thinking as the plan says", () => {
    const r = requestsOf(BenchPlanSchema.parse({ sweepMaxTokens: 64, thinking: false }));
    expect(r).toEqual({
      kind: "prompts",
      prompts: BENCH_PROMPTS,
      maxTokens: 64,
      extraBody: { ignore_eos: true, chat_template_kwargs: { thinking: false } },
    });
    expect(requestAt(r, BENCH_PROMPTS.length + 1).prompt).toBe(BENCH_PROMPTS[1]);
  });

  it("requestsOf: with a mix the shape's draws, the plan's length on every request", () => {
    const r = requestsOf(BenchPlanSchema.parse({ sweepMaxTokens: 64, mix: { code: 1 }, ignoreEos: false }));
    expect(r.kind).toBe("shape");
    const first = requestAt(r, 0);
    expect(first.maxTokens).toBe(64);
    expect(first.extraBody).toEqual({});
    expect(BENCH_PROMPTS).not.toContain(first.prompt);
  });
});
