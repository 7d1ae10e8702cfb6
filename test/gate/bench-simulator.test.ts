/** The benchmark against the real simulator: faults become errors, throughput agrees with ground truth. */
import { afterEach, describe, expect, it } from "vitest";
import { bench, verify } from "../../gate/index";
import type { FailureReason } from "../../simulator/state";
import type { Truth } from "../simulator/helpers";
import { startSim, tinyVariant, type SimHandle } from "./sim-fixture";

let sim: SimHandle | null = null;
afterEach(async () => {
  await sim?.close();
  sim = null;
});

async function truth(url: string, query = ""): Promise<Truth> {
  return (await (await fetch(`${url}/sim/truth${query}`)).json()) as Truth;
}

describe("bench against the simulator", () => {
  it("mid-stream resets and HTTP 500s: the run completes, reports them as errors, counts no tokens for them", async () => {
    sim = await startSim({
      profile: tinyVariant({
        faultSettings: { resetMidStream: { afterTokens: 40, everyNth: 3 }, overload500: { threshold: 12 } },
      }),
      faults: ["reset-mid-stream", "overload-500"],
    });
    expect((await verify({ url: sim.url }, { deadlineSeconds: 10, thinkingToggle: true })).ready).toBe(true);
    const before = await truth(sim.url);
    const r = await bench(
      { url: sim.url },
      {
        singleRequestMaxTokens: [256],
        singleRequestPrompts: 3,
        concurrency: [8, 24],
        sweepMaxTokens: 256,
        requestsPerConcurrency: 2,
      },
    );
    const after = await truth(sim.url);
    expect(r.complete).toBe(true);
    expect(r.sweep.map((l) => l.concurrency)).toEqual([8, 24]);
    const errors =
      r.sweep.reduce((a, l) => a + l.errors, 0) +
      r.singleRequest.reduce((a, s) => a + s.errors, 0) +
      (r.warmupError ? 1 : 0);
    const failedBy = (k: FailureReason) => after.requests.failedBy[k] - before.requests.failedBy[k];
    expect(failedBy("reset-mid-stream")).toBeGreaterThan(0);
    expect(failedBy("overload-500")).toBeGreaterThan(0);
    // Every failure the simulator booked is an error in the report, and nothing else is.
    expect(errors).toBe(failedBy("reset-mid-stream") + failedBy("overload-500"));
    const examples = r.sweep.flatMap((l) => l.errorExamples).join("\n");
    expect(examples).toContain("HTTP 500");
    expect(examples).toMatch(/without \[DONE\]|socket|terminated|reset/i);
    // Tokens come from usage of the requests that completed: exactly the simulator's completed books.
    const counted =
      r.sweep.reduce((a, l) => a + l.completionTokens, 0) +
      r.singleRequest.reduce((a, s) => a + s.completionTokens, 0) +
      (r.samples.warmup?.completionTokens ?? 0);
    expect(counted).toBe(after.completed.completionTokens - before.completed.completionTokens);
    for (const level of r.samples.sweep)
      for (const s of level.requests) if (s.error !== null) expect(s.completionTokens).toBe(0);
  });

  it("throughput matches the simulator's ground truth, sweep, saturation and single requests are consistent", async () => {
    sim = await startSim({ timeScale: 1 });
    expect((await verify({ url: sim.url }, { deadlineSeconds: 10 })).ready).toBe(true);
    const r = await bench(
      { url: sim.url },
      {
        singleRequestMaxTokens: [512, 1024],
        singleRequestPrompts: 2,
        concurrency: [8, 32, 64],
        sweepMaxTokens: 1024,
        requestsPerConcurrency: 2,
      },
    );
    for (const level of r.sweep) {
      const t = await truth(sim.url, `?concurrency=${level.concurrency}&output_tokens=1024&prompt_tokens=20`);
      const expected = t.expected!.aggregateOutputTokensPerSecond * t.timeScale;
      expect(level.errors).toBe(0);
      expect(level.completionTokens).toBe(level.concurrency * 2 * 1024);
      // Loose here (the bench script measures the 1% target on a long run); this catches gross errors.
      console.log(level.concurrency, level.outputTokensPerSecond, expected);
      expect(Math.abs(level.outputTokensPerSecond - expected) / expected).toBeLessThan(0.1);
    }
    // tiny caps running requests at 32: 64 queues and gains nothing, so saturation is at 32 at most.
    expect(r.saturationConcurrency).not.toBeNull();
    expect(r.saturationConcurrency!).toBeLessThanOrEqual(32);
    expect(r.sustainedOutputTokensPerSecond).toBe(
      r.sweep.find((l) => l.concurrency === r.saturationConcurrency)!.outputTokensPerSecond,
    );
    expect(r.singleRequest.map((s) => s.maxTokens)).toEqual([512, 1024]);
    expect(r.singleRequest[1].completionTokens).toBe(2 * 1024);
    expect(r.samples.singleRequest[1].requests).toHaveLength(2);
    expect(r.acceptanceLength).toBeNull();
    // TTFT grows when requests queue beyond the running cap.
    expect(r.sweep[2].ttftP99Seconds!).toBeGreaterThan(r.sweep[0].ttftP99Seconds!);
  });

  it("a speculative service reports its acceptance length, higher at low concurrency", async () => {
    sim = await startSim({ profile: "kimi-k2.6-8x-rtx-pro-6000-eagle3", timeScale: 2000 });
    expect((await verify({ url: sim.url }, { deadlineSeconds: 20, thinkingToggle: true })).ready).toBe(true);
    const r = await bench(
      { url: sim.url },
      {
        singleRequestMaxTokens: [256],
        singleRequestPrompts: 2,
        concurrency: [2, 32],
        sweepMaxTokens: 256,
        requestsPerConcurrency: 1,
      },
    );
    expect(r.acceptanceLength).not.toBeNull();
    expect(r.acceptanceLength!).toBeGreaterThan(1);
    // Speculative decoding sends several tokens per chunk: usage, not chunks, is the count.
    const s = r.samples.singleRequest[0].requests[0];
    expect(s.completionTokens).toBe(256);
    expect(s.outputChunks).toBeLessThan(256);
    expect(r.sweep.every((l) => l.acceptanceLength !== null)).toBe(true);
  });
});
