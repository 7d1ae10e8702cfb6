/** Pure parts of the gate: SSE parsing, statistics, saturation, capacity, schemas. No network. */
import { describe, expect, it } from "vitest";
import {
  BenchPlanSchema,
  capacity,
  parseServiceState,
  parseSpecAcceptLength,
  findKnee,
  MAX_TIMER_SECONDS,
  percentile,
  summarizeLevel,
  VerifyPolicySchema,
  WorkloadSchema,
  type RequestSample,
} from "../../gate/index";
import { SseParser } from "../../gate/transport/sse";
import { requestSample } from "./samples";
import { benchChart } from "../../gate/reports/chart";

function feed(chunks: Buffer[]): string[] {
  const out: string[] = [];
  const p = new SseParser();
  for (const c of chunks) p.push(c, (d) => out.push(d));
  p.end((d) => out.push(d));
  return out;
}

describe("SseParser", () => {
  const stream =
    'data: {"a":"é€😀"}\n\n: comment\nevent: x\ndata: {"b":2}\r\n\r\ndata: line1\ndata: line2\n\ndata:[DONE]\n\n';
  const expected = ['{"a":"é€😀"}', '{"b":2}', "line1\nline2", "[DONE]"];

  it("parses a whole stream: comments and event lines skipped, CRLF, multi-line data, no space after colon", () => {
    expect(feed([Buffer.from(stream)])).toEqual(expected);
  });

  it("gives the same events however the bytes are split (every byte, multi-byte UTF-8 split)", () => {
    const bytes = Buffer.from(stream);
    expect(feed([...bytes].map((b) => Buffer.from([b])))).toEqual(expected);
    for (let cut = 1; cut < bytes.length; cut++)
      expect(feed([bytes.subarray(0, cut), bytes.subarray(cut)])).toEqual(expected);
  });

  it("flushes a last event the server ended without a blank line", () => {
    expect(feed([Buffer.from("data: 1\n\ndata: 2")])).toEqual(["1", "2"]);
  });
});

const sample = (over: Partial<RequestSample>): RequestSample =>
  requestSample(100, { itlSeconds: [0.01, 0.02], outputChunks: 3, answerChunks: 3, outputCharacters: 12, ...over });

describe("statistics", () => {
  it("percentile interpolates linearly (numpy's default) and is null on no data", () => {
    const xs = Float64Array.from([1, 2, 3, 4]);
    expect(percentile(xs, 50)).toBe(2.5);
    expect(percentile(xs, 0)).toBe(1);
    expect(percentile(xs, 100)).toBe(4);
    expect(percentile(xs, 95)).toBeCloseTo(3.85);
    expect(percentile([], 50)).toBeNull();
  });

  it("a level counts tokens and latencies of successful requests only; errors are counted and quoted", () => {
    const level = summarizeLevel(
      {
        concurrency: 2,
        startedAtSeconds: 10,
        finishedAtSeconds: 12,
        acceptanceLength: null,
        requests: [
          sample({}),
          sample({ ttftSeconds: 0.3, e2eSeconds: 2 }),
          sample({ completionTokens: 0, error: "HTTP 500 overloaded", e2eSeconds: 50, ttftSeconds: 40 }),
        ],
      },
      0.01,
    );
    expect(level.requests).toBe(3);
    expect(level.errors).toBe(1);
    expect(level.errorExamples).toEqual(["HTTP 500 overloaded"]);
    expect(level.completionTokens).toBe(200);
    expect(level.outputTokensPerSecond).toBe(100);
    expect(level.requestsPerSecond).toBe(1);
    expect(level.ttftP50Seconds).toBeCloseTo(0.2);
    expect(level.e2eP99Seconds).toBeCloseTo(1.99);
    expect(level.itlP50Seconds).toBeCloseTo(0.015);
    expect(level.errorRate).toBeCloseTo(1 / 3);
    expect(level.withinErrorBudget).toBe(false);
  });

  it("reasoning and answer apart: answer tokens from usage, answerless requests counted, TTFA beside TTFT", () => {
    const level = summarizeLevel(
      {
        concurrency: 2,
        startedAtSeconds: 0,
        finishedAtSeconds: 1,
        acceptanceLength: null,
        requests: [
          sample({ reasoningTokens: 60, ttftSeconds: 0.1, ttfaSeconds: 0.7 }),
          sample({ reasoningTokens: 100, ttfaSeconds: null, answerChunks: 0, reasoningChunks: 3 }),
        ],
      },
      0.01,
    );
    expect(level.reasoningTokens).toBe(160);
    expect(level.answerTokens).toBe(40);
    expect(level.answerlessRequests).toBe(1);
    expect(level.ttftP50Seconds).toBeCloseTo(0.1);
    expect(level.ttfaP50Seconds).toBeCloseTo(0.7);
  });

  const lvl = (concurrency: number, tps: number, errors = 0, requests = 128, ttftP95Seconds: number | null = 0.2) => ({
    concurrency,
    requests,
    errors,
    outputTokensPerSecond: tps,
    ttftP95Seconds,
  });
  const opts = { errorBudget: 0.01, minGain: 0.1 };

  it("knee: the first level where doubling concurrency adds less than minGain; gains normalised per doubling", () => {
    const k = findKnee([lvl(8, 500), lvl(16, 900), lvl(32, 960), lvl(64, 1000)], opts);
    expect(k).toMatchObject({ saturated: true, saturationConcurrency: 16, sustainedOutputTokensPerSecond: 900 });
    expect(k.verdict).toMatch(/^saturation at C=16: going to C=32 adds 6\.7 %/);
    // 32 -> 48 (+12 %) is 0.585 doublings: 21 % per doubling, still rising.
    expect(findKnee([lvl(32, 1000), lvl(48, 1120), lvl(64, 1130)], opts).saturationConcurrency).toBe(48);
    // A drop is a knee too.
    expect(findKnee([lvl(8, 990), lvl(64, 700)], opts).saturationConcurrency).toBe(8);
  });

  it("noisy means (issue 18.4): a step whose interval holds the threshold leaves the knee undetermined; the best level is the figure", () => {
    const noisy = (c: number, mean: number, halfWidth: number) => ({ ...lvl(c, mean), throughput: { halfWidth } });
    const k = findKnee([noisy(1, 41, 19), noisy(2, 41, 9), noisy(4, 48, 10)], opts);
    expect(k).toMatchObject({
      undetermined: true,
      saturated: false,
      saturationConcurrency: null,
      sustainedOutputTokensPerSecond: 48,
      sustainedLevel: 4,
    });
    expect(k.verdict).toMatch(
      /^knee undetermined, run more repeats: from C=1 \(41\.0 ± 19\.0 tok\/s\) to C=2 \(41\.0 ± 9\.0 tok\/s\) the gain per doubling lies between -47 % and \+127 %/,
    );
    // The same means from single runs are judged by the means, as before: a knee at C=1.
    expect(findKnee([lvl(1, 41), lvl(2, 41), lvl(4, 48)], opts)).toMatchObject({ saturationConcurrency: 1 });
    // Tight intervals: the knee is claimed where the step is clearly under the threshold.
    expect(findKnee([noisy(1, 100, 2), noisy(2, 190, 5), noisy(4, 195, 5)], opts)).toMatchObject({
      saturated: true,
      saturationConcurrency: 2,
    });
  });

  it("a later level clearly higher is never discarded for an earlier knee", () => {
    const noisy = (c: number, mean: number, halfWidth: number) => ({ ...lvl(c, mean), throughput: { halfWidth } });
    // C=1 -> C=2 adds under 10 %, but C=4 is clearly higher than C=1: no knee at C=1.
    const k = findKnee([noisy(1, 100, 2), noisy(2, 104, 2), noisy(4, 150, 3)], opts);
    expect(k).toMatchObject({ saturated: false, sustainedOutputTokensPerSecond: 150 });
    expect(k.verdict).toMatch(/^not saturated up to C=4/);
    expect(findKnee([lvl(8, 100), lvl(16, 105), lvl(32, 200)], opts)).toMatchObject({
      saturated: false,
      sustainedLevel: 32,
    });
  });

  it("throughput still rising at the last level: not saturated up to C=N, never the last level as saturation", () => {
    const k = findKnee([lvl(8, 500), lvl(16, 900), lvl(32, 1500)], opts);
    expect(k).toMatchObject({ saturated: false, saturationConcurrency: null, sustainedOutputTokensPerSecond: 1500 });
    expect(k.verdict).toMatch(/^not saturated up to C=32/);
  });

  it("a TTFT p95 bound: the knee is the last level before TTFT p95 crosses it", () => {
    const levels = [lvl(8, 500, 0, 16, 0.5), lvl(16, 900, 0, 32, 0.9), lvl(32, 1500, 0, 64, 4.0)];
    const k = findKnee(levels, { ...opts, maxTtftP95Seconds: 2 });
    expect(k).toMatchObject({ saturated: true, saturationConcurrency: 16, sustainedOutputTokensPerSecond: 900 });
    expect(k.verdict).toMatch(/TTFT p95 crosses 2 s at C=32/);
  });

  it("failure is never capacity: a level over the error budget is excluded from the knee and the sustained figure", () => {
    // The issue's case: 48 of 64 requests failed (HTTP 500) at C=32.
    const k = findKnee([lvl(8, 400, 0, 16), lvl(16, 700, 0, 32), lvl(32, 2967.3, 48, 64)], opts);
    expect(k.failedLevels).toEqual([32]);
    expect(k.saturationConcurrency).not.toBe(32);
    expect(k.sustainedOutputTokensPerSecond).toBe(700);
    expect(k.verdict).toMatch(/C=32 broke the error budget of 1 %/);
    const none = findKnee([lvl(8, 400, 16, 16)], opts);
    expect(none).toMatchObject({ sustainedOutputTokensPerSecond: 0, saturationConcurrency: null, failedLevels: [8] });
    expect(findKnee([lvl(8, 400, 1, 128)], opts).failedLevels).toEqual([]); // 0.8 % <= 1 %
  });
});

describe("capacity", () => {
  it("the story: 900,000 x 2,000 tokens at 800 tok/s is 26 days on one host", () => {
    const plan = capacity(800, {});
    expect(plan.totalOutputTokens).toBe(1.8e9);
    expect(plan.daysOnOneHost).toBeCloseTo(26.04, 2);
    expect(plan.hostsForDeadline).toBe(4); // 26.04 / 7 -> 3.7
    expect(plan.rawStorageBytes).toBe(7.2e9);
  });

  it("domain figures: 1.8 B tokens at 5,000 tok/s is 4.2 days, at 2,000 tok/s 10.4 days; N hosts divide", () => {
    expect(capacity(5000, {}).daysOnOneHost).toBeCloseTo(4.17, 2);
    const p = capacity(2000, { hosts: 4, deadlineDays: 3, bytesPerToken: 6 });
    expect(p.daysOnOneHost).toBeCloseTo(10.42, 2);
    expect(p.daysOnHosts).toBeCloseTo(2.6, 2);
    expect(p.hostsForDeadline).toBe(4);
    expect(p.rawStorageGigabytes).toBeCloseTo(10.8);
  });

  it("an exact fit needs no extra host; zero throughput gives null days, not Infinity; negative is rejected", () => {
    expect(capacity(1.8e9 / (7 * 86400), {}).hostsForDeadline).toBe(1);
    const zero = capacity(0, {});
    expect(zero.daysOnOneHost).toBeNull();
    expect(zero.hostsForDeadline).toBeNull();
    expect(() => capacity(-1, {})).toThrow(/>= 0/);
    expect(() => capacity(1, { completions: -5 })).toThrow();
  });
});

describe("schemas", () => {
  it("defaults are the documented ones", () => {
    expect(VerifyPolicySchema.parse({}).deadlineSeconds).toBe(1800);
    expect(BenchPlanSchema.parse({}).concurrency).toEqual([8, 16, 32, 48, 64]);
    expect(BenchPlanSchema.parse({}).singleRequestMaxTokens).toEqual([2048, 4096]);
    expect(WorkloadSchema.parse({})).toMatchObject({ completions: 900_000, outputTokensPerCompletion: 2000 });
  });

  it("every field carries a description", () => {
    for (const schema of [VerifyPolicySchema, BenchPlanSchema, WorkloadSchema]) {
      for (const [key, field] of Object.entries(schema.shape))
        expect((field as { description?: string }).description, key).toBeTruthy();
    }
  });

  it("unknown keys are rejected (a misspelt knob is never silently ignored)", () => {
    const r = VerifyPolicySchema.safeParse({ deadlineSecond: 5 });
    expect(r.success).toBe(false);
    expect(JSON.stringify(r.error!.issues)).toContain("deadlineSecond");
    expect(BenchPlanSchema.safeParse({ concurency: [8] }).success).toBe(false);
    expect(WorkloadSchema.safeParse({ completion: 5 }).success).toBe(false);
  });

  it("timer knobs are bounded below Node's 2^31-1 ms timer limit", () => {
    expect(MAX_TIMER_SECONDS).toBe(2147483);
    expect(VerifyPolicySchema.safeParse({ deadlineSeconds: 2147484 }).success).toBe(false);
    expect(VerifyPolicySchema.safeParse({ deadlineSeconds: 2147483 }).success).toBe(true);
    expect(BenchPlanSchema.safeParse({ requestTimeoutSeconds: 4294968 }).success).toBe(false);
    expect(VerifyPolicySchema.safeParse({ retryMaxIntervalMs: 2 ** 31 }).success).toBe(false);
  });

  it("the error budget defaults to 1 % and is bounded to [0, 1]", () => {
    expect(BenchPlanSchema.parse({}).errorBudget).toBe(0.01);
    expect(BenchPlanSchema.safeParse({ errorBudget: 1.5 }).success).toBe(false);
  });

  it("bad values are rejected with the field's path", () => {
    const r = BenchPlanSchema.safeParse({ concurrency: [] });
    expect(r.success).toBe(false);
    expect(r.error!.issues[0].path).toEqual(["concurrency"]);
  });
});

describe("service state and metrics parsing", () => {
  it("reads systemctl show output in any order", () => {
    expect(parseServiceState("ActiveState=active\nNRestarts=2\n")).toEqual({ activeState: "active", restarts: 2 });
    expect(parseServiceState("NRestarts=0\nActiveState=failed")).toEqual({ activeState: "failed", restarts: 0 });
    expect(() => parseServiceState("ssh: connect to host refused")).toThrow(/ActiveState/);
  });

  it("reads sglang:spec_accept_length with or without labels and timestamps; null when absent", () => {
    expect(
      parseSpecAcceptLength('# TYPE sglang:spec_accept_length gauge\nsglang:spec_accept_length{model_name="k"} 3.25\n'),
    ).toBe(3.25);
    expect(parseSpecAcceptLength("sglang:spec_accept_length 2.5 1712345678000\n")).toBe(2.5);
    expect(parseSpecAcceptLength("sglang:spec_accept_length_sum 9\nsglang:num_running_reqs 3\n")).toBeNull();
  });
});

describe("chart", () => {
  it("draws throughput and latency against concurrency, with the saturation mark, as escaped SVG", () => {
    const lvl = (c: number, tps: number) => ({
      ...summarizeLevel(
        {
          concurrency: c,
          startedAtSeconds: 0,
          finishedAtSeconds: 1,
          acceptanceLength: null,
          requests: [sample({})],
        },
        0.01,
      ),
      outputTokensPerSecond: tps,
    });
    const svg = benchChart({
      model: "a<b>&c",
      sweep: [lvl(8, 100), lvl(16, 200)],
      saturationConcurrency: 16,
      sustainedOutputTokensPerSecond: 200,
    });
    expect(svg.startsWith("<svg")).toBe(true);
    expect(svg).toContain("a&lt;b&gt;&amp;c");
    expect(svg).not.toContain("a<b>");
    expect(svg.match(/<path /g)!.length).toBeGreaterThanOrEqual(2);
    expect(svg).toContain("stroke-dasharray");
    expect(svg.trim().endsWith("</svg>")).toBe(true);
  });
});
