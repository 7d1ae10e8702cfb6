import OpenAI from "openai";
import { afterEach, describe, expect, it } from "vitest";
import {
  type ChatCompletion,
  closeAll,
  derivedProfile,
  type Generated,
  json,
  post,
  startTestSim,
  type Truth,
  waitHealthy,
} from "./helpers";

afterEach(closeAll);

async function streamOne(openai: OpenAI, maxTokens: number) {
  const stream = await openai.chat.completions.create({
    model: "tiny",
    messages: [{ role: "user", content: "Explain speculative decoding." }],
    max_tokens: maxTokens,
    stream: true,
    stream_options: { include_usage: true },
  });
  let usage: (OpenAI.CompletionUsage & { reasoning_tokens?: number }) | undefined;
  for await (const chunk of stream) if (chunk.usage) usage = chunk.usage;
  return usage!;
}

describe("ground truth", () => {
  it("exact token and request accounting; the client's throughput matches the model's expected figure", async () => {
    // A slow model (250 tok/s per request) keeps the client's own CPU work negligible, so that
    // what is compared is the simulator's timing, not the test machine's load.
    const profile = derivedProfile("tiny", (p) => {
      p.decode.perRequestTokensPerSecond = [
        { batch: 1, value: 300 },
        { batch: 8, value: 250 },
      ];
    });
    const sim = await startTestSim({ profile, timeScale: 1 });
    await waitHealthy(sim.url);
    const openai = new OpenAI({ baseURL: `${sim.url}/v1`, apiKey: "none", maxRetries: 0 });
    const before = (await json<Truth>(`${sim.url}/sim/truth`)).body;
    const t0 = performance.now();
    const usages = await Promise.all(Array.from({ length: 8 }, () => streamOne(openai, 250)));
    const wallSeconds = (performance.now() - t0) / 1000;
    const promptTokens = usages[0].prompt_tokens;
    // concurrency, prompt_tokens and output_tokens add `expected`; requests=1 adds `records`.
    const truth = (
      await json<Required<Truth>>(
        `${sim.url}/sim/truth?concurrency=8&output_tokens=250&prompt_tokens=${promptTokens}&requests=1`,
      )
    ).body;

    const clientTokens = usages.reduce((a, u) => a + u.completion_tokens, 0);
    expect(clientTokens).toBe(2000);
    expect(truth.tokensEmitted - before.tokensEmitted).toBe(clientTokens);
    expect(truth.completed.completionTokens).toBe(clientTokens);
    expect(truth.completed.reasoningTokens).toBe(usages.reduce((a, u) => a + (u.reasoning_tokens ?? 0), 0));
    expect(truth.requests).toMatchObject({ received: 8, completed: 8, failed: 0, running: 0, queued: 0 });
    expect(truth.records).toHaveLength(8);
    expect(truth.timeScale).toBe(1);

    const level8 = truth.theoretical.find((l) => l.concurrency === 8);
    expect(level8?.aggregateTokensPerSecond).toBe(8 * 250);
    // Closed loop of one request each: the client measures about what the model says; loose
    // bounds because the wall clock of a shared test machine adds its own delays.
    const measured = clientTokens / wallSeconds / truth.timeScale;
    expect(measured / truth.expected.aggregateOutputTokensPerSecond).toBeGreaterThan(0.75);
    expect(measured / truth.expected.aggregateOutputTokensPerSecond).toBeLessThan(1.05);
  });

  it("time scale: the simulation runs X times faster and reports simulated seconds", async () => {
    const sim = await startTestSim({ timeScale: 4 });
    await waitHealthy(sim.url);
    const t0 = performance.now();
    const res = await post<Generated>(`${sim.url}/generate`, {
      text: "abcd",
      sampling_params: { max_new_tokens: 4000, ignore_eos: true },
    });
    const wall = (performance.now() - t0) / 1000;
    const reported = res.body.meta_info.e2e_latency;
    // 4000 tokens at 2000 tok/s (batch 1) after a 2 ms prefill: about 2 simulated seconds
    expect(reported).toBeGreaterThan(0.002 + 3999 / 2000);
    expect(reported).toBeLessThan(0.002 + 3999 / 2000 + 0.1);
    // the client's wall-clock measurement times the scale is the reported latency
    expect((wall * 4) / reported).toBeGreaterThan(0.95);
    expect((wall * 4) / reported).toBeLessThan(1.15);
    const truth = (await json<Truth>(`${sim.url}/sim/truth`)).body;
    expect(truth.timeScale).toBe(4);
    expect(truth.simulatedSeconds / truth.wallSeconds).toBeCloseTo(4, 3);
    expect(truth.theoretical[0].wallAggregateTokensPerSecond).toBe(4 * truth.theoretical[0].aggregateTokensPerSecond);
  });

  it("reasoning lengths are deterministic for the profile's seed", async () => {
    const lengths = async () => {
      const sim = await startTestSim({ timeScale: 10 });
      await waitHealthy(sim.url);
      const out: number[] = [];
      for (let i = 0; i < 4; i++) {
        const r = await post<ChatCompletion>(`${sim.url}/v1/chat/completions`, {
          messages: [{ role: "user", content: "Say just 'OK'" }],
          max_tokens: 500,
        });
        out.push(r.body.usage.reasoning_tokens);
      }
      await sim.close();
      return out;
    };
    const a = await lengths();
    expect(a.every((n) => n >= 4 && n <= 200)).toBe(true);
    expect(new Set(a).size).toBeGreaterThan(1);
    expect(await lengths()).toEqual(a);
  });
});
