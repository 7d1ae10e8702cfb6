/**
 * A small OpenAI-compatible server written for the job's tests: it answers /v1/models and both
 * completion endpoints with a JSON completion whose usage counts the words it sent, and misbehaves on
 * cue per custom prompt: drops the connection, answers 500, 429, 400 or an HTML 200, or never answers.
 * Real sockets on a port of its own, closed by the tests; `stop` takes it away (the port then refuses)
 * and `start` brings it back on the same port.
 */
import * as http from "node:http";
import type { AddressInfo, Socket } from "node:net";

export type Misbehaviour = "drop" | "500" | "429" | "400" | "html" | "stall";

export interface JobServer {
  url: string;
  port: number;
  /** Completion requests received, by prompt (the request's user content or prompt). */
  received: Map<string, number>;
  /** Completions answered with 200 JSON, and their tokens (served at /metrics as SGLang names them). */
  answered: number;
  generated: number;
  /** Per prompt: what to do on each of its first tries (then it answers). */
  script: Map<string, Misbehaviour[]>;
  /** Every completion misbehaves this way while set (a server that is up but broken). */
  all: Misbehaviour | null;
  delayMs: number;
  /** The Authorization headers completions came with. */
  authorizations: Set<string>;
  stop(): Promise<void>;
  start(): Promise<void>;
}

const MODELS = JSON.stringify({ object: "list", data: [{ id: "m", object: "model" }] });

function promptOf(body: { messages?: { content?: string }[]; prompt?: string }): string {
  return body.prompt ?? body.messages?.[body.messages.length - 1]?.content ?? "";
}

function complete(res: http.ServerResponse, url: string, prompt: string, maxTokens: number): number {
  const words = Math.max(1, Math.min(maxTokens, 8));
  const text = Array.from({ length: words }, (_, i) => `w${i}`).join(" ");
  const chat = url === "/v1/chat/completions";
  const body = {
    id: `cmpl-${Math.random().toString(36).slice(2)}`,
    object: chat ? "chat.completion" : "text_completion",
    model: "m",
    choices: [
      chat
        ? { index: 0, message: { role: "assistant", content: text }, finish_reason: "length" }
        : { index: 0, text, finish_reason: "length" },
    ],
    usage: { prompt_tokens: prompt.length, completion_tokens: words, total_tokens: prompt.length + words },
  };
  res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify(body));
  return words;
}

function misbehave(how: Misbehaviour, req: http.IncomingMessage, res: http.ServerResponse): void {
  if (how === "drop") req.socket.destroy();
  else if (how === "stall") return;
  else if (how === "html") res.writeHead(200, { "content-type": "text/html" }).end("<html>login</html>");
  else
    res
      .writeHead(Number(how), { "content-type": "application/json" })
      .end(JSON.stringify({ error: { message: `scripted ${how}` } }));
}

export async function jobServer(port = 0): Promise<JobServer> {
  const sockets = new Set<Socket>();
  let server: http.Server | null = null;
  const s: JobServer = {
    url: "",
    port,
    received: new Map(),
    answered: 0,
    generated: 0,
    script: new Map(),
    all: null,
    delayMs: 0,
    authorizations: new Set(),
    stop: async () => {
      const srv = server;
      server = null;
      for (const sock of sockets) sock.destroy();
      if (srv) await new Promise((r) => srv.close(r));
    },
    start: async () => {
      const srv = http.createServer((req, res) => handle(s, req, res));
      srv.on("connection", (sock: Socket) => {
        sockets.add(sock);
        sock.on("close", () => sockets.delete(sock));
      });
      await new Promise<void>((resolve, reject) => {
        srv.once("error", reject);
        srv.listen(s.port, "127.0.0.1", resolve);
      });
      server = srv;
      s.port = (srv.address() as AddressInfo).port;
      s.url = `http://127.0.0.1:${s.port}`;
    },
  };
  await s.start();
  return s;
}

function handle(s: JobServer, req: http.IncomingMessage, res: http.ServerResponse): void {
  const url = (req.url ?? "/").split("?")[0];
  if (url === "/v1/models") {
    res.writeHead(200, { "content-type": "application/json" }).end(MODELS);
    return;
  }
  if (url === "/metrics") {
    const text = `# TYPE sglang:generation_tokens_total counter\nsglang:generation_tokens_total{model_name="m"} ${s.generated}\n`;
    res.writeHead(200, { "content-type": "text/plain" }).end(text);
    return;
  }
  s.authorizations.add(String(req.headers.authorization ?? ""));
  const chunks: Buffer[] = [];
  req.on("data", (c: Buffer) => chunks.push(c));
  req.on("end", () => {
    const body = JSON.parse(Buffer.concat(chunks).toString("utf8")) as {
      max_tokens?: number;
      prompt?: string;
      messages?: { content?: string }[];
    };
    const prompt = promptOf(body);
    const n = (s.received.get(prompt) ?? 0) + 1;
    s.received.set(prompt, n);
    const scripted = s.script.get(prompt);
    const how = s.all ?? scripted?.[n - 1];
    if (how) return misbehave(how, req, res);
    setTimeout(() => {
      if (res.destroyed) return;
      s.answered++;
      s.generated += complete(res, url, prompt, body.max_tokens ?? 8);
    }, s.delayMs);
  });
}
