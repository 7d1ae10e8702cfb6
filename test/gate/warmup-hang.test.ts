/**
 * A warmup that hangs ends the benchmark within its bound, and the reason says what hung (issue 25
 * point 7): against tiny servers written here that list the model and then, for the warmup's chat
 * request, accept it and never answer, send the response headers and stall, or send one token and
 * stall (a server wedged mid-generation). Real sockets on free loopback ports.
 */
import * as http from "node:http";
import type { AddressInfo, Socket } from "node:net";
import { afterEach, describe, expect, it } from "vitest";
import { bench } from "../../gate/index";

type Hang = "no-headers" | "headers" | "one-token";

const servers: Array<() => Promise<void>> = [];
afterEach(async () => {
  await Promise.all(servers.splice(0).map((close) => close()));
});

/** A server that lists model "m" and hangs every chat request the way `hang` says. */
async function hangingServer(hang: Hang): Promise<{ url: string; chats: () => number }> {
  let chats = 0;
  const sockets = new Set<Socket>();
  const server = http.createServer((req, res) => {
    if (req.url === "/v1/models") {
      res.writeHead(200, { "content-type": "application/json" });
      res.end(JSON.stringify({ object: "list", data: [{ id: "m", object: "model" }] }));
      return;
    }
    chats++;
    req.resume();
    if (hang === "no-headers") return;
    res.writeHead(200, { "content-type": "text/event-stream" });
    res.flushHeaders();
    if (hang === "one-token")
      res.write(`data: ${JSON.stringify({ model: "m", choices: [{ index: 0, delta: { content: "O" } }] })}\n\n`);
  });
  server.on("connection", (s) => {
    sockets.add(s);
    s.on("close", () => sockets.delete(s));
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  servers.push(async () => {
    for (const s of sockets) s.destroy();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  });
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, chats: () => chats };
}

const SEEN: Record<Hang, RegExp> = {
  "no-headers": /: no response headers came$/,
  headers: /: the response headers came, then no token$/,
  "one-token": /: 1 output chunk came, then nothing$/,
};

describe("a hung warmup", () => {
  for (const hang of ["no-headers", "headers", "one-token"] as const) {
    it(`(${hang}) ends at the warmup's own bound, the plan's request timeout, saying what hung`, async () => {
      const server = await hangingServer(hang);
      const t0 = performance.now();
      const r = await bench({ url: server.url, model: "m" }, { requestTimeoutSeconds: 1 });
      expect((performance.now() - t0) / 1000).toBeLessThan(8);
      expect(server.chats()).toBe(1);
      expect(r.complete).toBe(false);
      expect(r.sweep).toEqual([]);
      expect(r.warmupError).toMatch(/^no complete answer within 1 s/);
      expect(r.warmupError).toMatch(SEEN[hang]);
      expect(r.stopReason).toBe(
        `the warmup failed (${r.warmupError}): stopped before the single requests and the sweep`,
      );
    }, 30_000);
  }

  it("ends at the benchmark's deadline when that comes first, and the reason still names the warmup and what it saw", async () => {
    const server = await hangingServer("headers");
    const t0 = performance.now();
    // The default request timeout (900 s) bounds the warmup at 300 s: the 2 s deadline comes first.
    const r = await bench({ url: server.url, model: "m" }, { deadlineSeconds: 2 });
    expect((performance.now() - t0) / 1000).toBeLessThan(10);
    expect(r.complete).toBe(false);
    expect(r.stopReason).toBe(
      "the warmup failed (benchmark deadline of 2 s passed: the response headers came, then no token): stopped before the single requests and the sweep",
    );
  }, 30_000);

  it("a caller's interrupt during the warmup stops at once with the caller's reason", async () => {
    const server = await hangingServer("headers");
    const stop = new AbortController();
    setTimeout(() => stop.abort(new Error("interrupted (SIGINT)")), 300);
    const t0 = performance.now();
    const r = await bench({ url: server.url, model: "m" }, {}, { signal: stop.signal });
    expect((performance.now() - t0) / 1000).toBeLessThan(5);
    expect(r.stopReason).toBe("interrupted (SIGINT)");
  }, 30_000);
});
