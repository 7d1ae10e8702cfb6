/**
 * Protocol edge cases the simulator does not produce, against a FAKE local HTTP server whose
 * answers each test scripts: how the client parses streams and judges probe responses.
 */
import * as http from "node:http";
import type { AddressInfo } from "node:net";
import { afterEach, describe, expect, it } from "vitest";
import { bench, verify } from "../../gate/index";
import { makeAgent } from "../../gate/transport/http";
import { streamChat } from "../../gate/run/stream";

type Handler = (req: http.IncomingMessage, body: string, res: http.ServerResponse) => void;
let server: http.Server | null = null;

async function fake(handler: Handler): Promise<string> {
  server = http.createServer((req, res) => {
    let body = "";
    req.on("data", (c) => (body += c));
    req.on("end", () => handler(req, body, res));
  });
  await new Promise<void>((r) => server!.listen(0, "127.0.0.1", r));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}
afterEach(async () => {
  server?.closeAllConnections();
  await new Promise((r) => server?.close(r));
  server = null;
});

const models = (res: http.ServerResponse) =>
  res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify({ data: [{ id: "m" }] }));
const sse = (res: http.ServerResponse, events: unknown[], done = true) => {
  res.writeHead(200, { "content-type": "text/event-stream" });
  for (const e of events) res.write(`data: ${JSON.stringify(e)}\n\n`);
  if (done) res.write("data: [DONE]\n\n");
  res.end();
};
const delta = (d: Record<string, string>) => ({ choices: [{ index: 0, delta: d, finish_reason: null }] });

async function stream(url: string) {
  return streamChat({
    url: `${url}/v1/chat/completions`,
    body: { model: "m", max_tokens: 8, stream: true },
    signal: AbortSignal.timeout(5000),
    dispatcher: makeAgent(2),
    origin: performance.now(),
  });
}

describe("streamed samples (fake server)", () => {
  it("counts tokens from usage even when all output is reasoning_content and content chunks are empty", async () => {
    const url = await fake((_q, _b, res) =>
      sse(res, [
        delta({ role: "assistant", content: "" }),
        delta({ reasoning_content: "Let me" }),
        delta({ reasoning_content: " think" }),
        delta({ content: "" }),
        { choices: [{ index: 0, delta: {}, finish_reason: "length" }] },
        {
          choices: [],
          usage: { prompt_tokens: 3, completion_tokens: 8, completion_tokens_details: { reasoning_tokens: 8 } },
        },
      ]),
    );
    const s = await stream(url);
    expect(s.error).toBeNull();
    expect(s.completionTokens).toBe(8);
    expect(s.reasoningTokens).toBe(8);
    expect(s.outputChunks).toBe(2);
    expect(s.ttftSeconds).not.toBeNull();
    // ITL is per token (gate/run/stream.ts): 8 tokens in 2 events is 4 per event, so the second
    // event's gap counts 4 times, or not at all when both came in one read (written in one tick).
    expect([0, 4]).toContain(s.itlSeconds.length);
    expect(s.finishReason).toBe("length");
  });

  it("a stream without usage is an error and counts no tokens", async () => {
    const url = await fake((_q, _b, res) => sse(res, [delta({ content: "a" }), delta({ content: "b" })]));
    const s = await stream(url);
    expect(s.error).toContain("no usage");
    expect(s.completionTokens).toBe(0);
  });

  it("an error event mid-stream is an error even though usage arrived", async () => {
    const url = await fake((_q, _b, res) =>
      sse(res, [
        delta({ content: "a" }),
        { error: { message: "scheduler died" } },
        { choices: [], usage: { completion_tokens: 1 } },
      ]),
    );
    const s = await stream(url);
    expect(s.error).toContain("scheduler died");
    expect(s.completionTokens).toBe(0);
  });

  it("a stream cut without [DONE] is an error", async () => {
    const url = await fake((_q, _b, res) =>
      sse(res, [delta({ content: "a" }), { choices: [], usage: { completion_tokens: 1 } }], false),
    );
    const s = await stream(url);
    expect(s.error).toContain("without [DONE]");
  });

  it("a benchmark whose every request fails stops after the failed warmup, with its reason and zero sustained throughput", async () => {
    const url = await fake((req, _b, res) =>
      req.url === "/v1/models" ? models(res) : res.writeHead(500).end('{"error":"boom"}'),
    );
    const r = await bench(
      { url },
      { singleRequestMaxTokens: [8], singleRequestPrompts: 1, concurrency: [2], requestsPerConcurrency: 1 },
    );
    // Issue 18.10: every later request would meet what the warmup met; no level is walked.
    expect(r.complete).toBe(false);
    expect(r.stopReason).toMatch(
      /^the warmup failed \(HTTP 500 .*boom.*\): stopped before the single requests and the sweep$/,
    );
    expect(r.sweep).toEqual([]);
    expect(r.singleRequest).toEqual([]);
    expect(r.sustainedOutputTokensPerSecond).toBe(0);
    expect(r.saturationConcurrency).toBeNull();
    expect(r.warmupError).toContain("HTTP 500");
  });
});

describe("probe judgement (fake server)", () => {
  const chat = (over: Record<string, unknown>) => ({
    choices: [{ index: 0, message: { role: "assistant", content: "OK" }, finish_reason: "stop" }],
    usage: { prompt_tokens: 3, completion_tokens: 2 },
    ...over,
  });

  it("HTTP 200 with completion_tokens 0 is not generation: fails after maxInvalidResponses, quoting the response", async () => {
    const url = await fake((req, _b, res) =>
      req.url === "/v1/models"
        ? models(res)
        : res.writeHead(200).end(JSON.stringify(chat({ usage: { completion_tokens: 0 } }))),
    );
    const r = await verify({ url, model: "m" }, { deadlineSeconds: 10, maxInvalidResponses: 3 });
    expect(r.ready).toBe(false);
    expect(r.phase).toBe("generate");
    expect(r.diagnosis).toContain("usage.completion_tokens is 0 (3 times in a row)");
    expect(r.diagnosis).toContain(`last response: POST ${url}/v1/chat/completions: HTTP 200`);
  });

  it("empty content and reasoning, or an unknown finish_reason, are not generation", async () => {
    let n = 0;
    const url = await fake((req, _b, res) => {
      if (req.url === "/v1/models") return models(res);
      const bad =
        n++ % 2 === 0
          ? chat({ choices: [{ message: { content: "" }, finish_reason: "stop" }] })
          : chat({ choices: [{ message: { content: "x" }, finish_reason: "abort" }] });
      res.writeHead(200).end(JSON.stringify(bad));
    });
    const r = await verify({ url, model: "m" }, { deadlineSeconds: 10, maxInvalidResponses: 2 });
    expect(r.ready).toBe(false);
    expect(r.diagnosis).toMatch(/finish_reason is "abort"|the completion has no visible content/);
  });

  it("401 from /v1/models fails at once: waiting cannot fix a wrong key", async () => {
    const url = await fake((_q, _b, res) => res.writeHead(401).end('{"error":"unauthorized"}'));
    const r = await verify({ url, model: "m", apiKey: "wrong" }, { deadlineSeconds: 10 });
    expect(r.ready).toBe(false);
    expect(r.phase).toBe("models");
    expect(r.elapsedSeconds).toBeLessThan(2);
    expect(r.diagnosis).toContain("HTTP 401");
  });

  it("sends chat_template_kwargs thinking:false and a small max_tokens only when the policy says the family supports it", async () => {
    const bodies: { chat_template_kwargs?: unknown; max_tokens?: number; temperature?: number }[] = [];
    const url = await fake((req, body, res) => {
      if (req.url === "/v1/models") return models(res);
      bodies.push(JSON.parse(body) as (typeof bodies)[number]);
      res.writeHead(200).end(JSON.stringify(chat({})));
    });
    // This server answers "OK" to everything: the answer check (its own tests: answers.test.ts) is skipped.
    const none = { answers: { file: "none" } };
    expect((await verify({ url, model: "m" }, { thinkingToggle: true, ...none })).ready).toBe(true);
    expect(bodies[0].chat_template_kwargs).toEqual({ thinking: false });
    expect(bodies[0].max_tokens).toBe(16);
    expect(bodies[0].temperature).toBe(0);
    expect(bodies[1].temperature).toBeGreaterThan(0); // the stability probe samples
    bodies.length = 0;
    expect((await verify({ url, model: "m" }, none)).ready).toBe(true);
    expect(bodies[0].chat_template_kwargs).toBeUndefined();
    expect(bodies[0].max_tokens).toBe(1024);
  });

  it("a service that restarted during the gate fails it even though generation works", async () => {
    const url = await fake((req, _b, res) =>
      req.url === "/v1/models" ? models(res) : res.writeHead(200).end(JSON.stringify(chat({}))),
    );
    let calls = 0;
    const r = await verify(
      { url, model: "m" },
      {},
      { serviceState: async () => ({ activeState: "active", restarts: calls++ === 0 ? 0 : 1 }) },
    );
    expect(r.ready).toBe(false);
    expect(r.phase).toBe("stability");
    expect(r.diagnosis).toContain("restarted 1 time(s)");
  });

  it("a generation that works once and then fails is not ready (stability)", async () => {
    let n = 0;
    const url = await fake((req, _b, res) => {
      if (req.url === "/v1/models") return models(res);
      if (n++ === 0) res.writeHead(200).end(JSON.stringify(chat({})));
      else req.socket.destroy();
    });
    const r = await verify({ url, model: "m" }, { deadlineSeconds: 10 });
    expect(r.ready).toBe(false);
    expect(r.phase).toBe("stability");
    expect(r.diagnosis).toContain("generated once, then generation 2 failed");
  });
});
