/**
 * The one verdict on a benchmark result (gate/judge/verdict.ts) and the one translation of a
 * host's plan for N workers (gate/run/for-workers.ts): pure functions, judged on results
 * built from summarizeBench, the function bench() ends with, so every field is the real one.
 */
import { describe, expect, it } from "vitest";
import { BenchPlanSchema, forWorkers, summarizeBench, verdictOf } from "../../gate/index";
import type { LevelSamples } from "../../gate/judge/levels";
import type { RequestSample } from "../../gate/base/samples";

/** One request sent at `sentAt`, answered from `firstToken` for 1 s with `tokens` (or failed with `error`). */
function sample(sentAt: number, firstToken: number, tokens: number, error: string | null): RequestSample {
  return {
    maxTokens: tokens,
    startedAtSeconds: sentAt,
    ttftSeconds: error === null ? firstToken - sentAt : null,
    ttfaSeconds: error === null ? firstToken - sentAt : null,
    itlSeconds: [],
    e2eSeconds: firstToken - sentAt + 1,
    completionTokens: error === null ? tokens : 0,
    promptTokens: 10,
    reasoningTokens: null,
    finishReason: error === null ? "length" : null,
    outputChunks: error === null ? tokens : 0,
    reasoningChunks: 0,
    answerChunks: error === null ? tokens : 0,
    outputCharacters: error === null ? tokens * 3 : 0,
    error,
    servedModel: "m",
  };
}

/** A rate level of `n` requests sent `1 / offered` s apart and begun `1 / achieved` s apart; the first `failed` fail. */
function rateLevel(offered: number, achieved: number, n = 20, failed = 0): LevelSamples {
  const requests = Array.from({ length: n }, (_, i) =>
    sample(i / offered, i / Math.min(offered, achieved), 64, i < failed ? "HTTP 500 overloaded" : null),
  );
  const finished = n / Math.min(offered, achieved) + 1;
  return {
    mode: "open",
    requestRate: offered,
    startedAtSeconds: 0,
    finishedAtSeconds: finished,
    acceptanceLength: null,
    requests,
    runs: [{ startedAtSeconds: 0, finishedAtSeconds: finished, firstRequest: 0, requestCount: n }],
  };
}

const judged = (sweep: LevelSamples[], plan: Record<string, unknown>, meta: Record<string, unknown> = {}) =>
  summarizeBench(
    { warmup: null, singleRequest: [], sweep },
    {
      model: "m",
      startedAt: "t",
      complete: true,
      acceptanceLength: null,
      plan: BenchPlanSchema.parse(plan),
      ...meta,
    },
  );

describe("verdictOf", () => {
  it("every rate kept up with, no error: healthy, no capacity figure (not 'measured no throughput')", () => {
    const r = judged([rateLevel(2, 2), rateLevel(4, 4)], { rate: [2, 4] });
    expect(r.sweep.map((l) => l.keptUp)).toEqual([true, true]);
    expect(r.sustainedOutputTokensPerSecond).toBe(0);
    expect(verdictOf(r)).toMatchObject({ ok: true, kind: "offered-load", capacity: false, complete: true });
  });

  it("a rate the server fell behind at is its capacity", () => {
    const r = judged([rateLevel(2, 2), rateLevel(8, 3)], { rate: [2, 8] });
    expect(verdictOf(r)).toMatchObject({ ok: true, kind: "capacity", capacity: true });
  });

  it("a level over the error budget fails, naming the level, its errors and the budget", () => {
    const r = judged([rateLevel(2, 2), rateLevel(8, 3, 20, 5)], { rate: [2, 8] });
    const v = verdictOf(r);
    expect(v).toMatchObject({ ok: false, kind: "error-budget", usable: true });
    expect(!v.ok && v.failure).toMatch(
      /^broke its error budget of 1\.00 % at 8 req\/s offered: 5\/20 failed \(HTTP 500 overloaded\)/,
    );
  });

  it("the server gone mid-run fails first, whatever the levels say; nothing of the run is usable", () => {
    const r = judged(
      [rateLevel(2, 2)],
      { rate: [2, 8] },
      { serverGone: "the server went away during 8 req/s offered" },
    );
    expect(verdictOf(r)).toEqual({
      ok: false,
      kind: "server-gone",
      usable: false,
      failure: "stopped: the server went away during 8 req/s offered",
    });
  });

  it("a run that stopped before measuring fails with its stop reason", () => {
    const r = judged([], {}, { complete: false, stopReason: "the warmup failed (HTTP 503)" });
    expect(verdictOf(r)).toMatchObject({
      ok: false,
      kind: "stopped",
      failure: "stopped: the warmup failed (HTTP 503)",
    });
  });

  it("a deadline that cut a run which measured: healthy, incomplete", () => {
    const r = judged(
      [rateLevel(8, 3)],
      { rate: [8, 16] },
      { complete: false, stopReason: "benchmark deadline passed" },
    );
    expect(verdictOf(r)).toMatchObject({ ok: true, kind: "capacity", complete: false });
  });

  it("no throughput otherwise (no level ran, not stopped) fails with the saturation verdict", () => {
    const v = verdictOf(judged([], {}));
    expect(v).toMatchObject({ ok: false, kind: "no-throughput" });
    expect(!v.ok && v.failure).toMatch(/^measured no throughput after the gate passed \(complete: true; no level kept/);
  });
});

describe("forWorkers", () => {
  it("scales concurrency levels and rates by the workers, keeps every judging setting the host's", () => {
    const host = { concurrency: [4, 8] as [number, number], rate: [1.5, 3] as [number, number], errorBudget: 0.02 };
    const fleet = forWorkers(host, 3);
    expect(fleet.concurrency).toEqual([12, 24]);
    expect(fleet.rate).toEqual([4.5, 9]);
    const { concurrency: _c, rate: _r, ...rest } = fleet;
    const { concurrency: _hc, rate: _hr, ...hostRest } = BenchPlanSchema.parse(host);
    expect(rest).toEqual(hostRest);
  });

  it("runs each level at least minRepeats times; a host's larger repeats win", () => {
    expect(forWorkers({}, 2, { minRepeats: 3 }).repeats).toBe(3);
    expect(forWorkers({ repeats: 5 }, 2, { minRepeats: 3 }).repeats).toBe(5);
    expect(forWorkers(undefined, 2).rate).toBeUndefined();
  });

  it("a scaled plan past the load generator's bounds is one sentence naming the setting", () => {
    expect(() => forWorkers({ concurrency: [2048] }, 3)).toThrow(
      /^benchmark\.concurrency\.0 times 3 workers is past a bound of the fleet benchmark: at most 4096/,
    );
    expect(() => forWorkers({}, 0)).toThrow(/at least 1 \(got 0\)/);
  });
});
