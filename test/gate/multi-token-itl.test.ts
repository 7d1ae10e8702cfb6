/**
 * Inter-token latency when a server sends several tokens at once (issue 25 point 7): SGLang does
 * under speculative decoding (one SSE event carries every accepted token) and with a stream interval
 * (several events in one write). gpuhost's definition is SGLang bench_serving's for its native
 * backend: each arrival's gap since the previous one is spread over the tokens it carried, one ITL
 * per token. Before, the gap was one ITL per event, and events of one write counted 0 s apart, so
 * the bench table printed ITL p50 as 0.000 s. Against tiny servers written here: 4 tokens every
 * 80 ms, as one event per write or as four events in one write.
 */
import * as http from "node:http";
import type { AddressInfo, Socket } from "node:net";
import { afterEach, describe, expect, it } from "vitest";
import { benchTable } from "../../cli/bench";
import { bench } from "../../gate/index";

const INTERVAL_MS = 80;
const TOKENS_PER_WRITE = 4;

const servers: Array<() => Promise<void>> = [];
afterEach(async () => {
  await Promise.all(servers.splice(0).map((close) => close()));
});

/** Streams max_tokens tokens, TOKENS_PER_WRITE per write every INTERVAL_MS, as one event or as one each. */
async function burstServer(shape: "one event" | "events"): Promise<string> {
  const sockets = new Set<Socket>();
  const timers = new Set<NodeJS.Timeout>();
  const server = http.createServer((req, res) => {
    if (req.url === "/v1/models") {
      res.writeHead(200, { "content-type": "application/json" });
      res.end(JSON.stringify({ object: "list", data: [{ id: "m", object: "model" }] }));
      return;
    }
    if (req.url !== "/v1/chat/completions") {
      res.writeHead(404).end();
      return;
    }
    let body = "";
    req.on("data", (d: Buffer) => (body += d.toString()));
    req.on("end", () => {
      const maxTokens = (JSON.parse(body) as { max_tokens: number }).max_tokens;
      const event = (delta: Record<string, unknown>, extra: Record<string, unknown> = {}) =>
        `data: ${JSON.stringify({ model: "m", choices: [{ index: 0, delta, finish_reason: null }], ...extra })}\n\n`;
      res.writeHead(200, { "content-type": "text/event-stream" });
      res.socket?.setNoDelay(true);
      let sent = 0;
      const tick = () => {
        const n = Math.min(TOKENS_PER_WRITE, maxTokens - sent);
        const words = Array.from({ length: n }, (_, i) => `t${sent + i} `);
        res.write(
          shape === "one event" ? event({ content: words.join("") }) : words.map((w) => event({ content: w })).join(""),
        );
        sent += n;
        if (sent < maxTokens) {
          const t = setTimeout(tick, INTERVAL_MS);
          timers.add(t);
          return;
        }
        res.write(
          `data: ${JSON.stringify({ model: "m", choices: [], usage: { prompt_tokens: 5, completion_tokens: sent, total_tokens: sent + 5 } })}\n\n`,
        );
        res.end("data: [DONE]\n\n");
      };
      tick();
    });
  });
  server.on("connection", (s) => {
    sockets.add(s);
    s.on("close", () => sockets.delete(s));
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  servers.push(async () => {
    for (const t of timers) clearTimeout(t);
    for (const s of sockets) s.destroy();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  });
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

const plan = {
  warmupMaxTokens: 4,
  singleRequestMaxTokens: [24],
  singleRequestPrompts: 1,
  concurrency: [1] as [number, ...number[]],
  requestsPerConcurrency: 1,
  sweepMaxTokens: 24,
};

describe("ITL with several tokens per arrival", () => {
  for (const shape of ["one event", "events"] as const) {
    it(`4 tokens every ${INTERVAL_MS} ms (${shape} per write): ITL p50 is about ${INTERVAL_MS / TOKENS_PER_WRITE} ms per token, and printed so`, async () => {
      const r = await bench({ url: await burstServer(shape), model: "m" }, plan);
      expect(r.complete, r.stopReason ?? "").toBe(true);
      const perToken = INTERVAL_MS / TOKENS_PER_WRITE / 1000;
      for (const itl of [r.singleRequest[0].itlP50Seconds, r.sweep[0].itlP50Seconds]) {
        // A loaded machine only delays writes: the gap grows, never shrinks below the interval.
        expect(itl).toBeGreaterThan(perToken * 0.9);
        expect(itl).toBeLessThan(perToken * 2);
      }
      // One ITL per token after the first arrival: 24 tokens in 6 writes, 20 after the first.
      expect(r.samples.sweep[0].requests[0].itlSeconds).toHaveLength(20);
      const row = benchTable(r)
        .split("\n")
        .find((l) => /^1 {11}/.test(l));
      expect(row, benchTable(r)).toBeDefined();
      // Columns: level, tok/s, req/s, TTFT p50, TTFA p50, ITL p50, E2E p50, ...
      const itlColumn = row!.trim().split(/\s{2,}/)[5];
      expect(itlColumn, row).toMatch(/^(19|[23][0-9])\.[0-9] ms$/);
      expect(row).not.toMatch(/(^|\s)(0\.000 s|0 ms)(\s|$)/);
    }, 30_000);
  }
});
