import OpenAI from "openai";
import * as net from "node:net";
import { afterEach, describe, expect, it } from "vitest";
import type { ApiError, ChatCompletion, Generated, ModelList, Truth } from "./helpers";
import { closeAll, derivedProfile, json, post, sleep, startTestSim, waitHealthy } from "./helpers";

afterEach(closeAll);

const CHAT = {
  messages: [{ role: "user", content: "Write about serving." }],
  max_tokens: 200,
  chat_template_kwargs: { thinking: false },
};

function connects(url: string): Promise<boolean> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve) => {
    const s = net.connect(Number(port), hostname);
    s.once("connect", () => {
      s.destroy();
      resolve(true);
    });
    s.once("error", () => resolve(false));
  });
}

describe("faults", () => {
  it("late-port: connection refused while loading, the port opens once the model is loaded", async () => {
    const sim = await startTestSim({ faults: ["late-port"], timeScale: 1 });
    expect(await connects(sim.url)).toBe(false);
    await expect(fetch(`${sim.url}/v1/models`)).rejects.toThrow();
    await waitHealthy(sim.url, 5_000);
    expect(await connects(sim.url)).toBe(true);
  });

  it("models-before-ready: /v1/models answers while loading, health says 503, chat hangs until loaded", async () => {
    // A load long enough that a busy test machine still reaches every check before it ends.
    const profile = derivedProfile("tiny", (p) => {
      p.load.minSeconds = 4;
      p.load.maxSeconds = 4;
    });
    const sim = await startTestSim({ profile, faults: ["models-before-ready"], timeScale: 1 });
    const models = await json<ModelList>(`${sim.url}/v1/models`);
    expect(models.status).toBe(200);
    expect(models.body.data[0].id).toBe("tiny");
    expect((await fetch(`${sim.url}/health`)).status).toBe(503);
    let settled = false;
    const chat = post<ChatCompletion>(`${sim.url}/v1/chat/completions`, CHAT).then((r) => {
      settled = true;
      return r;
    });
    await sleep(300);
    expect(settled).toBe(false);
    expect((await json<Truth>(`${sim.url}/sim/truth`)).body.status).toBe("loading");
    const res = await chat;
    expect(res.status).toBe(200);
    expect(res.body.usage.completion_tokens).toBe(200);
  });

  it("models-before-ready with generationWhileLoading 503: chat gets 503 while /v1/models is 200", async () => {
    const profile = derivedProfile("tiny", (p) => {
      p.load.minSeconds = 5;
      p.load.maxSeconds = 5;
      p.faultSettings = { modelsBeforeReady: { generationWhileLoading: "503" } };
    });
    const sim = await startTestSim({ profile, faults: ["models-before-ready"] });
    expect((await json(`${sim.url}/v1/models`)).status).toBe(200);
    expect((await post(`${sim.url}/v1/chat/completions`, CHAT)).status).toBe(503);
  });

  it("jit-crash: healthy and listing models, then the first chat kills the process with curand.h on stderr", async () => {
    const sim = await startTestSim({ faults: ["jit-crash"], timeScale: 10 });
    await waitHealthy(sim.url);
    // SGLang's health check is a greedy 1-token generation that never reaches the sampling kernel.
    expect((await fetch(`${sim.url}/health`)).status).toBe(200);
    expect((await json(`${sim.url}/v1/models`)).status).toBe(200);
    await expect(post(`${sim.url}/v1/chat/completions`, CHAT)).rejects.toThrow();
    expect(sim.exits).toEqual([1]);
    expect(sim.logs.some((l) => l.includes("fatal error: curand.h: No such file or directory"))).toBe(true);
    expect(await connects(sim.url)).toBe(false);
  });

  it("oom-at-load: CUDA out of memory on stderr, exit non-zero, never healthy", async () => {
    const sim = await startTestSim({ faults: ["oom-at-load"], timeScale: 1 });
    expect((await fetch(`${sim.url}/health`)).status).toBe(503);
    for (let i = 0; i < 100 && sim.exits.length === 0; i++) await sleep(20);
    expect(sim.exits).toEqual([1]);
    expect(sim.logs.some((l) => l.includes("torch.OutOfMemoryError: CUDA out of memory"))).toBe(true);
    expect(await connects(sim.url)).toBe(false);
  });

  it("slow-first-request: the first generation waits out the compile, health times out meanwhile", async () => {
    // compile 90 simulated s at time scale 100 = 0.9 s of wall time
    const sim = await startTestSim({ faults: ["slow-first-request"], timeScale: 100 });
    await waitHealthy(sim.url);
    const first = post<Generated>(`${sim.url}/generate`, { text: "x", sampling_params: { max_new_tokens: 10 } });
    await sleep(50);
    // SGLang's health check gives up after 20 s without output from the scheduler
    expect((await fetch(`${sim.url}/health`)).status).toBe(503);
    const res = await first;
    expect(res.status).toBe(200);
    expect(res.body.meta_info.e2e_latency).toBeGreaterThanOrEqual(90);
    const second = await post<Generated>(`${sim.url}/generate`, { text: "x", sampling_params: { max_new_tokens: 10 } });
    expect(second.body.meta_info.e2e_latency).toBeLessThan(5);
    expect((await fetch(`${sim.url}/health`)).status).toBe(200);
  });

  it("thinking-budget: reasoning spends all of max_tokens, content empty, finish_reason length", async () => {
    const sim = await startTestSim({ faults: ["thinking-budget"], timeScale: 4 });
    await waitHealthy(sim.url);
    const openai = new OpenAI({ baseURL: `${sim.url}/v1`, apiKey: "none", maxRetries: 0 });
    const res = await openai.chat.completions.create({
      model: "tiny",
      messages: [{ role: "user", content: "Hello" }],
      max_tokens: 64,
    });
    const message = res.choices[0].message as { content: string | null; reasoning_content?: string | null };
    expect(message.content ?? "").toBe("");
    expect(message.reasoning_content?.length).toBeGreaterThan(0);
    expect(res.choices[0].finish_reason).toBe("length");
    expect(res.usage?.completion_tokens).toBe(64);
    expect((res.usage as unknown as { reasoning_tokens: number }).reasoning_tokens).toBe(64);
    // thinking off: the answer comes
    const off = await post<ChatCompletion>(`${sim.url}/v1/chat/completions`, {
      messages: [{ role: "user", content: "Say just 'OK'" }],
      max_tokens: 64,
      chat_template_kwargs: { thinking: false },
    });
    expect(off.body.choices[0].message.content).toBe("OK");
    expect(off.body.choices[0].finish_reason).toBe("stop");
  });

  it("reset-mid-stream: the stream breaks after the configured tokens, without [DONE]", async () => {
    const sim = await startTestSim({ faults: ["reset-mid-stream"], timeScale: 4 });
    await waitHealthy(sim.url);
    const openai = new OpenAI({ baseURL: `${sim.url}/v1`, apiKey: "none", maxRetries: 0 });
    const stream = await openai.chat.completions.create({
      ...CHAT,
      model: "tiny",
      stream: true,
      stream_options: { include_usage: true },
    } as OpenAI.ChatCompletionCreateParamsStreaming);
    let tokens = 0;
    const consume = async () => {
      for await (const chunk of stream) if (chunk.choices[0]?.delta?.content) tokens++;
    };
    await expect(consume()).rejects.toThrow();
    expect(tokens).toBe(32);
    const nonStream = await post(`${sim.url}/v1/chat/completions`, CHAT).catch((err: Error) => err);
    expect(nonStream).toBeInstanceOf(Error);
    const truth = (await json<Truth>(`${sim.url}/sim/truth`)).body;
    expect(truth.requests.failedBy["reset-mid-stream"]).toBe(2);
    expect(truth.requests.completed).toBe(0);
    expect(truth.tokensEmitted).toBe(64);
  });

  it("overload-500: requests at or above the threshold get HTTP 500, the rest complete", async () => {
    const profile = derivedProfile("tiny", (p) => {
      p.faultSettings = { overload500: { threshold: 4 } };
    });
    const sim = await startTestSim({ profile, faults: ["overload-500"], timeScale: 1 });
    await waitHealthy(sim.url);
    const results = await Promise.all(
      Array.from({ length: 7 }, () => post<ApiError>(`${sim.url}/v1/chat/completions`, CHAT)),
    );
    const statuses = results.map((r) => r.status).sort();
    expect(statuses).toEqual([200, 200, 200, 200, 500, 500, 500]);
    const error = results.find((r) => r.status === 500)!.body.error;
    expect(error).toMatchObject({ type: "InternalServerError", code: 500 });
    expect((await json<Truth>(`${sim.url}/sim/truth`)).body.requests.failedBy["overload-500"]).toBe(3);
  });

  it("silent: the connection is accepted, nothing ever answers, /health included", async () => {
    const sim = await startTestSim({ faults: ["silent"], timeScale: 10 });
    await sleep(100);
    expect(await connects(sim.url)).toBe(true);
    await expect(fetch(`${sim.url}/health`, { signal: AbortSignal.timeout(400) })).rejects.toThrow(/abort|timeout/i);
    await expect(fetch(`${sim.url}/v1/models`, { signal: AbortSignal.timeout(200) })).rejects.toThrow(/abort|timeout/i);
  });

  it("faults can be set in a profile, and unknown fault names are refused", async () => {
    const profile = derivedProfile("tiny", (p) => {
      p.faults = ["thinking-budget"];
    });
    const sim = await startTestSim({ profile, timeScale: 4 });
    await waitHealthy(sim.url);
    const res = await post<ChatCompletion>(`${sim.url}/v1/chat/completions`, {
      messages: [{ role: "user", content: "Hello" }],
      max_tokens: 20,
    });
    expect(res.body.choices[0].finish_reason).toBe("length");
    expect(res.body.usage.reasoning_tokens).toBe(20);
    await expect(startTestSim({ faults: ["nope"] })).rejects.toThrow(/unknown fault 'nope'/);
  });
});
