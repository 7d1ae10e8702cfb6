/**
 * Small HTTP servers that misbehave the ways the simulator does not: accept and never answer, die
 * on the first generation (the port then refuses), answer an HTML login page with HTTP 200. Real
 * sockets on free ports, closed by the tests.
 */
import * as http from "node:http";
import type { AddressInfo, Socket } from "node:net";

export interface TestServer {
  url: string;
  port: number;
  /** Requests received, by path. */
  hits: Map<string, number>;
  /** performance.now() when the server died (crash-on-first-generation), else null. */
  diedAt: number | null;
  close(): Promise<void>;
}

async function serve(handler: (req: http.IncomingMessage, res: http.ServerResponse, s: TestServer) => void, port = 0) {
  const sockets = new Set<Socket>();
  const state: TestServer = {
    url: "",
    port: 0,
    hits: new Map(),
    diedAt: null,
    close: async () => {
      for (const s of sockets) s.destroy();
      await new Promise((r) => server.close(r));
    },
  };
  const server = http.createServer((req, res) => {
    const path = (req.url ?? "/").split("?")[0];
    state.hits.set(path, (state.hits.get(path) ?? 0) + 1);
    handler(req, res, state);
  });
  server.on("connection", (s: Socket) => {
    sockets.add(s);
    s.on("close", () => sockets.delete(s));
  });
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(port, "127.0.0.1", resolve);
  });
  state.port = (server.address() as AddressInfo).port;
  state.url = `http://127.0.0.1:${state.port}`;
  return state;
}

/** Accepts connections and reads requests; never writes a byte back. */
export function neverAnswering(): Promise<TestServer> {
  return serve((req) => req.resume());
}

const MODELS = JSON.stringify({ object: "list", data: [{ id: "m", object: "model" }] });

/**
 * /v1/models answers; the first chat completion's connection is dropped and the whole server goes
 * away at that moment (a process that crashed in its first generation), so the port refuses.
 */
export function crashOnFirstGeneration(): Promise<TestServer> {
  return serve((req, res, s) => {
    if (req.url === "/v1/models") {
      res.writeHead(200, { "content-type": "application/json" }).end(MODELS);
      return;
    }
    s.diedAt = performance.now();
    req.socket.destroy();
    void s.close();
  });
}

/** Everything answers HTTP 200 with an HTML login page (a proxy or SSO in front of the port). */
export function htmlLoginPage(): Promise<TestServer> {
  return serve((req, res) => {
    req.resume();
    res
      .writeHead(200, { "content-type": "text/html; charset=utf-8" })
      .end("<!doctype html><html><body><form>Sign in</form></body></html>");
  });
}

/** A plain OpenAI-style answer to everything: models, and a non-streamed completion (on PORT, or a free one). */
export function answering(content = "OK", port = 0): Promise<TestServer> {
  return serve((req, res) => {
    req.resume();
    if (req.url === "/v1/models") {
      res.writeHead(200, { "content-type": "application/json" }).end(MODELS);
      return;
    }
    if (req.url !== "/v1/chat/completions") {
      res.writeHead(404, { "content-type": "application/json" }).end('{"detail":"Not Found"}');
      return;
    }
    const body = {
      choices: [{ index: 0, message: { role: "assistant", content }, finish_reason: "stop" }],
      usage: { prompt_tokens: 3, completion_tokens: 2 },
    };
    res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify(body));
  }, port);
}
