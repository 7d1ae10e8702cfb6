/**
 * A pass-through HTTP proxy in front of llama-server that keeps, for every chat completion, what the
 * server itself reported: its `usage` and its `timings` (prompt_n, prompt_ms, predicted_n,
 * predicted_ms, predicted_per_second), from the JSON body or the stream's chunks. Bytes are
 * forwarded as they arrive (nothing is buffered or changed), and a client that hangs up cuts the
 * upstream request too, so the server sees what it would see without the tap.
 */
import * as http from "node:http";
import type { AddressInfo, Socket } from "node:net";

export interface ServerTimings {
  prompt_n: number;
  prompt_ms: number;
  predicted_n: number;
  predicted_ms: number;
  predicted_per_second: number;
}

export interface TappedCompletion {
  /** The `model` the request named and the one the response carried. */
  requestModel: unknown;
  responseModel: unknown;
  status: number;
  streamed: boolean;
  usage: { prompt_tokens: number; completion_tokens: number } | null;
  timings: ServerTimings | null;
  finishReason: string | null;
  /** Whether any chunk carried reasoning_content (thinking models). */
  reasoning: boolean;
  /** The client hung up before the response ended. */
  cutByClient: boolean;
}

export interface Tap {
  url: string;
  completions: TappedCompletion[];
  close(): Promise<void>;
}

interface ChunkLike {
  model?: unknown;
  usage?: TappedCompletion["usage"];
  timings?: ServerTimings;
  choices?: { finish_reason?: string | null; delta?: { reasoning_content?: unknown }; message?: unknown }[];
}

function absorb(c: TappedCompletion, json: ChunkLike): void {
  if (json.model !== undefined) c.responseModel = json.model;
  if (json.usage) c.usage = json.usage;
  if (json.timings) c.timings = json.timings;
  const choice = json.choices?.[0];
  if (choice?.finish_reason) c.finishReason = choice.finish_reason;
  if (typeof choice?.delta?.reasoning_content === "string" && choice.delta.reasoning_content.length > 0)
    c.reasoning = true;
}

function parseBody(c: TappedCompletion, body: string): void {
  if (!c.streamed) {
    try {
      absorb(c, JSON.parse(body) as ChunkLike);
    } catch {
      // not JSON (an error page): status says enough
    }
    return;
  }
  for (const line of body.split("\n")) {
    if (!line.startsWith("data:")) continue;
    const data = line.slice(5).trim();
    if (data === "[DONE]" || data === "") continue;
    try {
      absorb(c, JSON.parse(data) as ChunkLike);
    } catch {
      // a partial line of a cut stream
    }
  }
}

export async function startTap(upstream: string): Promise<Tap> {
  const target = new URL(upstream);
  const completions: TappedCompletion[] = [];
  const sockets = new Set<Socket>();
  const server = http.createServer((req, res) => {
    const body: Buffer[] = [];
    req.on("data", (b: Buffer) => body.push(b));
    req.on("end", () => {
      const raw = Buffer.concat(body);
      const isChat = req.method === "POST" && (req.url ?? "").startsWith("/v1/chat/completions");
      let record: TappedCompletion | null = null;
      if (isChat) {
        let parsed: { model?: unknown; stream?: unknown } = {};
        try {
          parsed = JSON.parse(raw.toString("utf8")) as typeof parsed;
        } catch {
          // forwarded as it is; the server answers the bad request
        }
        record = {
          requestModel: parsed.model,
          responseModel: undefined,
          status: 0,
          streamed: parsed.stream === true,
          usage: null,
          timings: null,
          finishReason: null,
          reasoning: false,
          cutByClient: false,
        };
      }
      const up = http.request(
        {
          host: target.hostname,
          port: target.port,
          method: req.method,
          path: req.url,
          headers: { ...req.headers, host: target.host },
          // A fresh connection per request: a pooled one that the server closed while idle would
          // fail the next request with a reset that the server never caused.
          agent: false,
        },
        (upRes) => {
          res.writeHead(upRes.statusCode ?? 502, upRes.headers);
          const copy: Buffer[] = [];
          upRes.on("data", (b: Buffer) => {
            if (record) copy.push(b);
            res.write(b);
          });
          upRes.on("end", () => {
            res.end();
            if (record) {
              record.status = upRes.statusCode ?? 0;
              parseBody(record, Buffer.concat(copy).toString("utf8"));
              completions.push(record);
            }
          });
          upRes.on("error", () => res.destroy());
        },
      );
      up.on("error", () => res.destroy());
      res.on("close", () => {
        if (!res.writableFinished) {
          if (record) {
            record.cutByClient = true;
            completions.push(record);
          }
          up.destroy();
        }
      });
      up.end(raw);
    });
  });
  server.on("connection", (s: Socket) => {
    sockets.add(s);
    s.on("close", () => sockets.delete(s));
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    completions,
    close: async () => {
      for (const s of sockets) s.destroy();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}
