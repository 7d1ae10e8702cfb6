/** The benchmark against the real simulator: faults become errors, throughput agrees with what the simulator served. */
import { afterEach, describe, expect, it } from "vitest";
import { bench, findKnee, verify } from "../../gate/index";
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

/** The concurrency a sweep progress event names ("concurrency 8: 16 requests, ..."). */
function levelOf(text: string): number {
  const m = /^concurrency (\d+)/.exec(text);
  if (!m) throw new Error(`no concurrency in progress text: ${text}`);
  return Number(m[1]);
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
        // Long enough (about half a second each) that 24 workers' requests overlap past the overload
        // threshold whatever the machine's load; at 256 tokens they finished so fast on a loaded
        // machine that fewer than 12 were ever in flight, and no 500 was served (2 runs in 3).
        sweepMaxTokens: 1024,
        requestsPerConcurrency: 2,
      },
    );
    const after = await truth(sim.url);
    expect(r.complete).toBe(true);
    expect(r.sweep.map((l) => l.concurrency)).toEqual([8, 24]);
    // Failed requests do not unsettle the reconciliation: the server may have generated tokens for
    // a stream it cut, and finished no request for a 500; the client counts neither.
    for (const level of r.sweep)
      expect(level.certificate?.checks[0], JSON.stringify(level.certificate)).toMatchObject({ ok: true });
    const errors =
      r.sweep.reduce((a, l) => a + l.errors, 0) +
      // the sweep's first level measured again after the last (its bracket)
      (r.samples.bracket?.requests.filter((s) => s.error !== null).length ?? 0) +
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
      (r.samples.bracket?.requests.reduce((a, s) => a + s.completionTokens, 0) ?? 0) +
      (r.samples.warmup?.completionTokens ?? 0);
    expect(counted).toBe(after.completed.completionTokens - before.completed.completionTokens);
    for (const level of r.samples.sweep)
      for (const s of level.requests) if (s.error !== null) expect(s.completionTokens).toBe(0);
  });

  it("throughput agrees with the simulator's own books over the same window; sweep, saturation and single requests are consistent", async () => {
    sim = await startSim({ timeScale: 1 });
    expect((await verify({ url: sim.url }, { deadlineSeconds: 10 })).ready).toBe(true);
    // The simulator's books at each sweep level's edges: read when the level starts (before its first
    // request is sent) and when its last request has been answered. The performance model's figure is
    // not the reference here: on a loaded machine the simulator itself runs slower than its model, and
    // the benchmark must report what was served. Accuracy against the model is a benchmark
    // (`npx tsx bench/gate-throughput.ts`, README), not a test.
    const edges = new Map<number, { start?: Promise<Truth>; end?: Promise<Truth> }>();
    const url = sim.url;
    const r = await bench(
      { url },
      {
        singleRequestMaxTokens: [512, 1024],
        singleRequestPrompts: 2,
        concurrency: [8, 32, 64],
        sweepMaxTokens: 1024,
        requestsPerConcurrency: 2,
      },
      {
        onProgress: (e) => {
          if (e.kind === "stage" && e.stage === "sweep") edges.set(levelOf(e.detail), { start: truth(url) });
          else if (e.kind === "request" && e.stage === "sweep" && e.done === e.total)
            edges.get(levelOf(e.label))!.end = truth(url);
        },
      },
    );
    expect([...edges.keys()]).toEqual([8, 32, 64]);
    // Issue 26.2: each level reconciled with the simulator's SGLang counters (its /metrics), certified.
    for (const level of r.sweep) {
      expect(level.certificate, JSON.stringify(level.certificate)).toMatchObject({ certified: true });
      expect(level.certificate!.checks[0].detail).toMatch(
        new RegExp(
          `^the server's sglang counters: [\\d,]+ tokens generated, ${level.concurrency * 2} requests, as the client counted$`,
        ),
      );
    }
    for (const level of r.sweep) {
      const edge = edges.get(level.concurrency)!;
      const [before, after] = await Promise.all([edge.start!, edge.end!]);
      expect(level.errors).toBe(0);
      expect(level.completionTokens).toBe(level.concurrency * 2 * 1024);
      // Exact: the level's tokens and requests are the ones the simulator completed in its window.
      expect(level.completionTokens).toBe(after.completed.completionTokens - before.completed.completionTokens);
      expect(level.requests).toBe(after.requests.completed - before.requests.completed);
      // The rate the simulator served over the same window, on its own clock (wall seconds).
      const served = level.completionTokens / (after.wallSeconds - before.wallSeconds);
      expect(Math.abs(level.outputTokensPerSecond - served) / served).toBeLessThan(0.1);
    }
    // The knee is the rule's verdict on the levels reported, and the sustained figure its level's.
    const rule = { errorBudget: r.plan.errorBudget, minGain: r.plan.kneeMinGain };
    const knee = findKnee(r.sweep, rule);
    expect(r.saturationConcurrency).toBe(knee.saturationConcurrency);
    expect(r.sustainedOutputTokensPerSecond).toBe(
      r.sweep.find((l) => l.concurrency === (knee.saturationConcurrency ?? 64))!.outputTokensPerSecond,
    );
    // tiny caps running requests at 32. Whether 32 -> 64 still gains 10 % is the machine's load's to
    // decide (a loaded client leaves a slot idle between its two requests at 32; at 64 the queue
    // refills it), so the cap is checked where load cannot move it: at 64 requests wait for a slot,
    // about a whole generation, and a TTFT bound of half a generation puts the knee at 32 at most.
    const capped = findKnee(r.sweep, { ...rule, maxTtftP95Seconds: r.sweep[1].e2eP50Seconds! / 2 });
    expect(capped.saturationConcurrency).not.toBeNull();
    expect(capped.saturationConcurrency!).toBeLessThanOrEqual(32);
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
