import { afterEach, describe, expect, it } from "vitest";
import type { ApiError, ChatCompletion, ServerInfo, SpeculativeGenerated, Truth } from "./helpers";
import { closeAll, derivedProfile, json, post, sleep, startTestSim, waitHealthy } from "./helpers";

afterEach(closeAll);

describe("SGLang's native endpoints", () => {
  it("/health is 503 while loading, 200 after; /v1/models and chat are 503 while loading", async () => {
    const profile = derivedProfile("tiny", (p) => {
      p.load.minSeconds = 1;
      p.load.maxSeconds = 1;
    });
    const sim = await startTestSim({ profile, timeScale: 2 });
    expect((await fetch(`${sim.url}/health`)).status).toBe(503);
    expect((await fetch(`${sim.url}/health_generate`)).status).toBe(503);
    expect((await json(`${sim.url}/v1/models`)).status).toBe(503);
    const chat = await post<ApiError>(`${sim.url}/v1/chat/completions`, {
      messages: [{ role: "user", content: "hi" }],
      max_tokens: 4,
    });
    expect(chat.status).toBe(503);
    expect(chat.body.error.message).toMatch(/loading/);
    expect((await json<Truth>(`${sim.url}/sim/truth`)).body.status).toBe("loading");
    await waitHealthy(sim.url);
    expect((await json(`${sim.url}/v1/models`)).status).toBe(200);
    expect(sim.logs.some((l) => l.includes("The server is fired up and ready to roll!"))).toBe(true);
  });

  it("/health answers only after SGLang's one-second poll, not instantly", async () => {
    const sim = await startTestSim({ timeScale: 5 });
    await waitHealthy(sim.url);
    const t0 = performance.now();
    expect((await fetch(`${sim.url}/health`)).status).toBe(200);
    // one simulated second at time scale 5 is 200 ms of wall time
    expect(performance.now() - t0).toBeGreaterThanOrEqual(190);
  });

  it("/generate: meta_info with e2e_latency; speculative profiles add spec_verify_ct and spec_accept_length", async () => {
    const sim = await startTestSim({ profile: "kimi-k2.6-8x-rtx-pro-6000-eagle3", timeScale: 2000 });
    await waitHealthy(sim.url);
    const res = await post<SpeculativeGenerated>(`${sim.url}/generate`, {
      text: "Once upon a time",
      sampling_params: { max_new_tokens: 3000, ignore_eos: true },
    });
    expect(res.status).toBe(200);
    const meta = res.body.meta_info;
    expect(meta.completion_tokens).toBe(3000);
    expect(meta.finish_reason).toEqual({ type: "length", length: 3000 });
    expect(meta.spec_accept_length).toBeCloseTo(meta.completion_tokens / meta.spec_verify_ct, 12);
    // a single stream runs at batch 1, where the profile's acceptance length is 3.2
    expect(meta.spec_accept_length).toBeGreaterThan(3.0);
    expect(meta.spec_accept_length).toBeLessThan(3.4);
    expect(meta.e2e_latency).toBeGreaterThan(3000 / 100);
    const info = (await json<ServerInfo>(`${sim.url}/get_server_info`)).body;
    expect(info.speculative_algorithm).toBe("EAGLE3");
    expect(info.internal_states[0].avg_spec_accept_length).toBeGreaterThan(3.0);
    expect(info.internal_states[0].avg_spec_accept_length).toBeLessThan(3.4);
    const metrics = await (await fetch(`${sim.url}/metrics`)).text();
    expect(metrics).toMatch(/^sglang:spec_accept_length\{model_name="moonshotai\/Kimi-K2.6"\} 3\.\d+$/m);
  });

  it("/get_server_info of an autoregressive profile has no acceptance length", async () => {
    const sim = await startTestSim({ timeScale: 10 });
    await waitHealthy(sim.url);
    const info = (await json<ServerInfo>(`${sim.url}/get_server_info`)).body;
    expect(info.speculative_algorithm).toBeNull();
    expect(info.internal_states[0]).not.toHaveProperty("avg_spec_accept_length");
    expect(info.max_running_requests).toBe(32);
  });

  it("/metrics: Prometheus text with SGLang's names, counters equal to what was served", async () => {
    const sim = await startTestSim({ timeScale: 4 });
    await waitHealthy(sim.url);
    await post(`${sim.url}/generate`, { text: "abcdefgh", sampling_params: { max_new_tokens: 100 } });
    await post(`${sim.url}/v1/chat/completions`, { messages: [{ role: "user", content: "hi" }], max_tokens: 50 });
    const text = await (await fetch(`${sim.url}/metrics`)).text();
    const value = (name: string) => Number(new RegExp(`^sglang:${name}\\{[^}]*\\} (\\S+)$`, "m").exec(text)?.[1]);
    expect(value("generation_tokens_total")).toBe(150);
    // "abcdefgh" is 2 tokens; one chat message "hi": 3 template + 4 per message + 1
    expect(value("prompt_tokens_total")).toBe(2 + 8);
    expect(value("num_running_reqs")).toBe(0);
    expect(value("num_queue_reqs")).toBe(0);
    expect(value("gen_throughput")).toBeGreaterThan(0);
    expect(value("e2e_request_latency_seconds_count")).toBe(2);
    expect(value("time_to_first_token_seconds_count")).toBe(2);
    expect(text).toContain("# TYPE sglang:e2e_request_latency_seconds histogram");
  });

  it("queues what is above max running requests, visible in /metrics", async () => {
    // time scale 0.5 runs slower than real time, so the queue is there long enough to look at
    const sim = await startTestSim({ timeScale: 0.5 });
    await waitHealthy(sim.url);
    const all = Array.from({ length: 40 }, () =>
      post<ChatCompletion>(`${sim.url}/v1/chat/completions`, {
        messages: [{ role: "user", content: "essay" }],
        max_tokens: 600,
        chat_template_kwargs: { thinking: false },
      }),
    );
    await sleep(200);
    const text = await (await fetch(`${sim.url}/metrics`)).text();
    expect(text).toMatch(/^sglang:num_running_reqs\{[^}]*\} 32$/m);
    expect(text).toMatch(/^sglang:num_queue_reqs\{[^}]*\} 8$/m);
    const results = await Promise.all(all);
    expect(results.every((r) => r.status === 200 && r.body.usage.completion_tokens === 600)).toBe(true);
  });
});
