/**
 * The simulator holds up like a server (issue 11.10): malformed messages are 400 (the official
 * client's BadRequestError), oversized bodies 413 (an answer, not a reset), token budgets bounded
 * by the context length, idle connections closed, and a full waiting queue answered 503.
 */
import * as http from "node:http";
import * as net from "node:net";
import OpenAI from "openai";
import { afterEach, describe, expect, it } from "vitest";
import type { ApiError, Truth } from "./helpers";
import { closeAll, derivedProfile, json, post, sleep, startTestSim, waitHealthy } from "./helpers";

afterEach(closeAll);

async function ready(opts: Parameters<typeof startTestSim>[0] = {}) {
  const sim = await startTestSim({ timeScale: 4, ...opts });
  await waitHealthy(sim.url);
  return sim;
}

describe("request validation", () => {
  it("malformed messages are 400 with OpenAI's error shape, never a 500", async () => {
    const sim = await ready();
    for (const messages of [[null], [1], ["hi"], [{ content: "no role" }], [{ role: "user", content: 5 }]]) {
      const r = await post<ApiError>(`${sim.url}/v1/chat/completions`, { model: "tiny", messages, max_tokens: 4 });
      expect(r.status, JSON.stringify(messages)).toBe(400);
      expect(r.body.error.type).toBe("BadRequestError");
      expect(r.body.error.message).toMatch(/^messages\.0/);
    }
    const openai = new OpenAI({ baseURL: `${sim.url}/v1`, apiKey: "none", maxRetries: 0 });
    await expect(
      openai.chat.completions.create({ model: "tiny", messages: [null as never], max_tokens: 4 }),
    ).rejects.toBeInstanceOf(OpenAI.BadRequestError);
    expect(sim.logs.join("\n")).not.toMatch(/ERROR: .*TypeError/);
  });

  it("max_tokens and max_new_tokens are bounded by the context length (400 at once, not a generation without end)", async () => {
    const sim = await ready();
    const t0 = performance.now();
    const g = await post<ApiError>(`${sim.url}/generate`, { text: "hi", sampling_params: { max_new_tokens: 1e12 } });
    expect(g.status).toBe(400);
    expect(g.body.error.message).toContain("maximum context length of 32768");
    const c = await post(`${sim.url}/v1/chat/completions`, {
      model: "tiny",
      messages: [{ role: "user", content: "hi" }],
      max_tokens: 1e12,
    });
    expect(c.status).toBe(400);
    expect((performance.now() - t0) / 1000).toBeLessThan(2);
  });

  it("a body over 16 MiB is answered 413, by Content-Length or while streaming, and the server goes on serving", async () => {
    const sim = await ready();
    const big = JSON.stringify({ model: "tiny", messages: [{ role: "user", content: "x".repeat(17 * 1024 * 1024) }] });
    const r = await json<ApiError>(`${sim.url}/v1/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: big,
    });
    expect(r.status).toBe(413);
    expect(r.body.error.message).toContain("larger than 16777216 bytes");
    const openai = new OpenAI({ baseURL: `${sim.url}/v1`, apiKey: "none", maxRetries: 0 });
    const err = await openai.chat.completions
      .create({ model: "tiny", messages: [{ role: "user", content: "x".repeat(17 * 1024 * 1024) }] })
      .catch((e: unknown) => e);
    expect((err as { status?: number }).status).toBe(413);
    // Chunked, no Content-Length: refused once the count passes the limit, still with an answer.
    const chunked = await new Promise<number>((resolve, reject) => {
      const req = http.request(`${sim.url}/v1/chat/completions`, { method: "POST" }, (res) => {
        res.resume();
        resolve(res.statusCode ?? 0);
      });
      req.on("error", reject);
      const mb = Buffer.alloc(1024 * 1024, "x");
      const write = (i: number): void => {
        if (i === 17) return void req.end();
        if (req.write(mb)) write(i + 1);
        else req.once("drain", () => write(i + 1));
      };
      write(0);
    });
    expect(chunked).toBe(413);
    const ok = await post(`${sim.url}/v1/chat/completions`, {
      model: "tiny",
      messages: [{ role: "user", content: "Say just 'OK'" }],
      max_tokens: 400,
    });
    expect(ok.status).toBe(200);
  });
});

describe("connection limits", () => {
  it("connections that send no request are closed after the headers timeout; serving goes on", async () => {
    const sim = await ready({ headersTimeoutMs: 300 });
    const { port } = new URL(sim.url);
    const sockets = await Promise.all(
      Array.from(
        { length: 200 },
        () =>
          new Promise<net.Socket>((resolve, reject) => {
            const s = net.connect(Number(port), "127.0.0.1", () => resolve(s));
            s.on("error", reject);
          }),
      ),
    );
    const closed = sockets.map((s) => new Promise<void>((r) => s.once("close", () => r())));
    const t0 = performance.now();
    await Promise.all(closed);
    expect((performance.now() - t0) / 1000).toBeLessThan(2);
    const r = await json(`${sim.url}/v1/models`);
    expect(r.status).toBe(200);
  });

  it("a full waiting queue answers 503 at once", async () => {
    const profile = derivedProfile("tiny", (p) => {
      p.decode.maxRunningRequests = 1;
      p.decode.perRequestTokensPerSecond = [{ batch: 1, value: 50 }];
      p.reasoning = null;
    });
    const sim = await ready({ profile, maxQueuedRequests: 2, timeScale: 1 });
    const ask = () =>
      post<ApiError>(`${sim.url}/v1/chat/completions`, {
        model: "tiny",
        messages: [{ role: "user", content: "write" }],
        max_tokens: 20,
        ignore_eos: true,
      });
    const first = [ask(), ask(), ask()];
    await sleep(100); // one running, two waiting
    const t0 = performance.now();
    const refused = await ask();
    expect(refused.status).toBe(503);
    expect(refused.body.error.message).toContain("The request queue is full");
    expect((performance.now() - t0) / 1000).toBeLessThan(0.3);
    expect((await Promise.all(first)).map((r) => r.status)).toEqual([200, 200, 200]);
    const truth = await json<Truth>(`${sim.url}/sim/truth`);
    expect(truth.body.requests.failedBy["queue-full"]).toBe(1);
  });
});
