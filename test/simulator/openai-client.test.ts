import OpenAI from "openai";
import { afterEach, describe, expect, it } from "vitest";
import { closeAll, json, post, startTestSim, type Truth, waitHealthy } from "./helpers";

afterEach(closeAll);

async function client(opts: { apiKey?: string } = {}) {
  const sim = await startTestSim({ timeScale: 4, apiKey: opts.apiKey });
  await waitHealthy(sim.url);
  return { sim, openai: new OpenAI({ baseURL: `${sim.url}/v1`, apiKey: opts.apiKey ?? "none", maxRetries: 0 }) };
}

describe("the official openai client against the simulator", () => {
  it("lists the served model", async () => {
    const { openai } = await client();
    const models = await openai.models.list();
    expect(models.data.map((m) => m.id)).toEqual(["tiny"]);
  });

  it("non-streaming: reasoning_content, answer, usage counting reasoning inside completion_tokens", async () => {
    const { openai } = await client();
    const res = await openai.chat.completions.create({
      model: "tiny",
      messages: [{ role: "user", content: "Say just 'OK'" }],
      max_tokens: 400,
    });
    const choice = res.choices[0];
    const message = choice.message as typeof choice.message & { reasoning_content?: string | null };
    expect(message.content).toBe("OK");
    expect(message.reasoning_content && message.reasoning_content.length).toBeGreaterThan(0);
    expect(choice.finish_reason).toBe("stop");
    const usage = res.usage as NonNullable<typeof res.usage> & { reasoning_tokens: number };
    expect(usage.reasoning_tokens).toBeGreaterThan(0);
    expect(usage.completion_tokens).toBe(usage.reasoning_tokens + 1);
    expect(usage.completion_tokens_details?.reasoning_tokens).toBe(usage.reasoning_tokens);
    expect(usage.total_tokens).toBe(usage.prompt_tokens + usage.completion_tokens);
  });

  it("chat_template_kwargs thinking:false turns reasoning off", async () => {
    const { openai } = await client();
    const res = await openai.chat.completions.create({
      model: "tiny",
      messages: [{ role: "user", content: "Say just 'OK'" }],
      max_tokens: 16,
      chat_template_kwargs: { thinking: false },
    } as OpenAI.ChatCompletionCreateParamsNonStreaming);
    const message = res.choices[0].message as { content: string | null; reasoning_content?: string | null };
    expect(message.content).toBe("OK");
    expect(message.reasoning_content ?? null).toBeNull();
    expect(res.usage?.completion_tokens).toBe(1);
  });

  it("max_tokens is honoured: finish_reason length at exactly max_tokens", async () => {
    const { openai } = await client();
    const res = await openai.chat.completions.create({
      model: "tiny",
      messages: [{ role: "user", content: "Write an essay." }],
      max_tokens: 300,
    });
    expect(res.choices[0].finish_reason).toBe("length");
    expect(res.usage?.completion_tokens).toBe(300);
    expect(res.choices[0].message.content?.length).toBeGreaterThan(0);
  });

  it("streaming with include_usage: reasoning then content deltas, final usage chunk, totals agree", async () => {
    const { openai, sim } = await client();
    const stream = await openai.chat.completions.create({
      model: "tiny",
      messages: [{ role: "user", content: "Tell me about GPUs." }],
      max_tokens: 500,
      stream: true,
      stream_options: { include_usage: true },
    });
    let reasoning = 0;
    let content = 0;
    let sawContentBeforeReasoningEnded = false;
    let finish: string | null = null;
    let usage: OpenAI.CompletionUsage | undefined;
    for await (const chunk of stream) {
      if (chunk.usage) usage = chunk.usage;
      const choice = chunk.choices[0];
      if (!choice) continue;
      const delta = choice.delta as { content?: string | null; reasoning_content?: string | null };
      if (delta.reasoning_content) {
        if (content > 0) sawContentBeforeReasoningEnded = true;
        reasoning++;
      }
      if (delta.content) content++;
      if (choice.finish_reason) finish = choice.finish_reason;
    }
    expect(finish).toBe("length");
    expect(sawContentBeforeReasoningEnded).toBe(false);
    expect(usage?.completion_tokens).toBe(500);
    // tiny is autoregressive: one token per chunk, so chunks count tokens here (and only here).
    expect(reasoning + content).toBe(500);
    expect((usage as unknown as { reasoning_tokens: number }).reasoning_tokens).toBe(reasoning);
    const truth = (await json<Truth>(`${sim.url}/sim/truth`)).body;
    expect(truth.tokensEmitted).toBe(500);
    expect(truth.completed.reasoningTokens).toBe(reasoning);
  });

  it("errors are OpenAI-shaped: a prompt over the context length is a 400 the client raises", async () => {
    const { openai } = await client();
    await expect(
      openai.chat.completions.create({
        model: "tiny",
        messages: [{ role: "user", content: "hi" }],
        max_tokens: 40_000,
      }),
    ).rejects.toMatchObject({ status: 400, message: expect.stringContaining("maximum context length") as unknown });
    await expect(openai.chat.completions.create({ model: "tiny", messages: [] })).rejects.toMatchObject({
      status: 400,
    });
  });

  it("with an API key: 401 Unauthorized without it (health exempt), success with it", async () => {
    const { sim, openai } = await client({ apiKey: "sekret" });
    const res = await openai.chat.completions.create({
      model: "tiny",
      messages: [{ role: "user", content: "Say just 'OK'" }],
      max_tokens: 200,
    });
    expect(res.choices[0].message.content).toBe("OK");
    const denied = await post(`${sim.url}/v1/chat/completions`, { messages: [{ role: "user", content: "hi" }] });
    expect(denied).toEqual({ status: 401, body: { error: "Unauthorized" } });
    expect((await json(`${sim.url}/v1/models`, { headers: { authorization: "Bearer wrong" } })).status).toBe(401);
    expect((await fetch(`${sim.url}/health`)).status).toBe(200);
    const bad = new OpenAI({ baseURL: `${sim.url}/v1`, apiKey: "wrong", maxRetries: 0 });
    await expect(bad.models.list()).rejects.toMatchObject({ status: 401 });
  });
});
