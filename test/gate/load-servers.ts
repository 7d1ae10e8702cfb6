/**
 * Small streaming OpenAI-style servers for the load generator's open-loop tests, misbehaving the
 * ways real servers do under load: one that fails a share of its requests, or those beyond a number
 * in flight (HTTP 500, the way an overloaded server sheds load), one that serves one request at a
 * time, so arrivals faster than its service time queue and it cannot keep up, one that dies
 * mid-run (killed: connections cut, then the port refuses), one that serves another model than
 * asked, one whose streams carry no usage, one whose usage over-claims what its own /metrics counts,
 * one whose requests wait in front of it, and one that never answers a chat; and liars whose
 * counters are kept in step with their usage, so that only the client's own evidence (issue 44)
 * catches them: usage over max_tokens, one chunk per answer, empty 200s, fast then slow. Each counts what it
 * served, and holds, in SGLang's /metrics counters and gauges unless told not to. Real sockets on free ports, closed by the tests.
 */
import * as http from "node:http";
import type { AddressInfo, Socket } from "node:net";
import { afterEach } from "vitest";

export interface LoadServer {
  url: string;
  /** Benchmark requests (ignore_eos) received. */
  received: number;
  close(): Promise<void>;
}

export interface LoadServerOptions {
  /**
   * Every n-th benchmark request (those sent with ignore_eos, by arrival) answers HTTP 500; 0: none.
   * The readiness gate's probes (no ignore_eos) always succeed, so the server passes the gate first.
   */
  failEvery?: number;
  /** Benchmark requests stop at this many tokens with finish_reason length (a context limit), whatever max_tokens asked. */
  truncateAt?: number;
  /** Benchmark requests stream reasoning only and never a visible answer (the probes still answer). */
  reasoningOnly?: boolean;
  /** After this many benchmark requests the process dies: every connection cut, the port then refuses. */
  dieAfter?: number;
  /** HTTP 500 for a benchmark request that arrives while this many are in flight (load shedding). */
  busyLimit?: number;
  /** One request at a time: the others wait their turn (a server at its capacity queues). */
  serial?: boolean;
  /** Output chunks per answer, one token each. */
  tokens?: number;
  /** Milliseconds between chunks (after the first, which is sent as the request's turn comes). */
  chunkMs?: number;
  /** What GET /v1/models lists (default ["m"]). */
  models?: string[];
  /** The `model` every chunk names, whatever the request asked for (default: the request's). */
  servesModel?: string;
  /** Streams end without a usage chunk (stream_options.include_usage ignored), probes included. */
  noUsage?: boolean;
  /** Chat requests that are never answered: the warmup (hangChats) or only benchmark requests (hangBenchmark). */
  hangChats?: boolean;
  hangBenchmark?: boolean;
  /** Requests for exactly this max_tokens (the benchmark's 16-token warmup) answer HTTP 503; the gate's probes ask for more. */
  failMaxTokens?: number;
  /** Benchmark requests after this many are accepted and never answered (the sweep hangs, the single requests not). */
  hangBenchmarkAfter?: number;
  /**
   * GET /metrics with SGLang's counters of what it served (generation and prompt tokens, finished
   * requests), counted as each answer ends; false: 404, as SGLang without --enable-metrics. Default true.
   */
  metrics?: boolean;
  /** The usage blocks claim this many times the tokens streamed (the counters count right); default 1. */
  usageClaims?: number;
  /**
   * With `serial`: the requests waiting their turn are held in front of the engine (a proxy, a
   * gateway's concurrency limit), so its gauges count the one running and none waiting. Without it
   * the waiting ones are in num_queue_reqs, as SGLang counts its own queue.
   */
  queueInFront?: boolean;
  /** The counters count what the usage blocks claim, not what was streamed: reconciliation alone then agrees. */
  countClaimed?: boolean;
  /** Benchmark answers stream one chunk ("x") whatever their usage claims. */
  oneChunk?: boolean;
  /** Every n-th benchmark request: HTTP 200, `choices: []`, nothing streamed, usage claiming a full answer. */
  emptyEvery?: number;
  /** After this many benchmark requests, chunks come `slowFactor` times further apart (a throttle mid-run). */
  slowAfter?: number;
  slowFactor?: number;
}

const chunk = (body: unknown) => `data: ${JSON.stringify(body)}\n\n`;

export async function loadServer(opts: LoadServerOptions = {}): Promise<LoadServer> {
  const tokens = opts.tokens ?? 4;
  const chunkMs = opts.chunkMs ?? 5;
  const sockets = new Set<Socket>();
  let queue: Promise<void> = Promise.resolve();
  let inFlight = 0;
  const state: LoadServer = {
    url: "",
    received: 0,
    close: async () => {
      for (const s of sockets) s.destroy();
      await new Promise((r) => server.close(r));
    },
  };
  /** Requests the engine holds: answering now, and waiting their turn (SGLang's two gauges). */
  const held = { running: 0, waiting: 0 };
  const answer = async (res: http.ServerResponse, benchmark: boolean, maxTokens: number, model: string, nth = 0) => {
    held.running++;
    try {
      await stream(res, benchmark, maxTokens, model, nth);
    } finally {
      held.running--;
    }
  };
  const stream = async (res: http.ServerResponse, benchmark: boolean, maxTokens: number, model: string, nth = 0) => {
    const n = benchmark && opts.truncateAt !== undefined ? Math.min(opts.truncateAt, maxTokens) : tokens;
    const delta = benchmark && opts.reasoningOnly ? { reasoning_content: "hmm " } : { content: "ok " };
    const empty = benchmark && opts.emptyEvery !== undefined && nth % opts.emptyEvery === 0;
    const sent = !benchmark ? n : empty ? 0 : opts.oneChunk ? 1 : n;
    const gap =
      benchmark && opts.slowAfter !== undefined && nth > opts.slowAfter ? chunkMs * (opts.slowFactor ?? 4) : chunkMs;
    res.writeHead(200, { "content-type": "text/event-stream" });
    for (let i = 0; i < n; i++) {
      if (i > 0) await new Promise((r) => setTimeout(r, gap));
      if (i < sent)
        res.write(
          chunk({ model, choices: [{ index: 0, delta: sent < n ? { content: "x" } : delta, finish_reason: null }] }),
        );
    }
    if (!empty) res.write(chunk({ model, choices: [{ index: 0, delta: {}, finish_reason: "length" }] }));
    const claimed = n * (benchmark ? (opts.usageClaims ?? 1) : 1);
    if (!opts.noUsage)
      res.write(
        chunk({
          model,
          choices: [],
          usage: { prompt_tokens: 5, completion_tokens: claimed, total_tokens: 5 + claimed },
        }),
      );
    // Counted as the request finishes, before its last bytes leave (SGLang counts in the tokenizer manager).
    counters.generated += opts.countClaimed ? claimed : n;
    counters.prompt += 5;
    counters.requests++;
    res.end("data: [DONE]\n\n");
  };
  const counters = { generated: 0, prompt: 0, requests: 0 };
  const metricsText = () => {
    const label = `{model_name="${(opts.models ?? ["m"])[0]}"}`;
    return [
      "# TYPE sglang:generation_tokens_total counter",
      `sglang:generation_tokens_total${label} ${counters.generated}`,
      "# TYPE sglang:prompt_tokens_total counter",
      `sglang:prompt_tokens_total${label} ${counters.prompt}`,
      "# TYPE sglang:num_requests_total counter",
      `sglang:num_requests_total${label} ${counters.requests}`,
      "# TYPE sglang:num_running_reqs gauge",
      `sglang:num_running_reqs${label} ${held.running}`,
      "# TYPE sglang:num_queue_reqs gauge",
      `sglang:num_queue_reqs${label} ${opts.queueInFront ? 0 : held.waiting}`,
      "",
    ].join("\n");
  };
  const server = http.createServer((req, res) => {
    const body: Buffer[] = [];
    req.on("data", (b: Buffer) => body.push(b));
    req.on("end", () => route(req, res, Buffer.concat(body).toString("utf8")));
  });
  const route = (req: http.IncomingMessage, res: http.ServerResponse, body: string) => {
    if (req.url === "/v1/models") {
      const data = (opts.models ?? ["m"]).map((id) => ({ id, object: "model" }));
      res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify({ object: "list", data }));
      return;
    }
    if (req.url === "/metrics" && opts.metrics !== false) {
      res.writeHead(200, { "content-type": "text/plain; version=0.0.4" }).end(metricsText());
      return;
    }
    if (req.url !== "/v1/chat/completions") {
      res.writeHead(404, { "content-type": "application/json" }).end('{"detail":"Not Found"}');
      return;
    }
    const request = JSON.parse(body) as { ignore_eos?: boolean; max_tokens?: number; model?: string };
    const benchmark = request.ignore_eos === true;
    const model = opts.servesModel ?? request.model ?? "m";
    if (opts.failMaxTokens !== undefined && request.max_tokens === opts.failMaxTokens) {
      res.writeHead(503, { "content-type": "application/json" }).end('{"error":"warming"}');
      return;
    }
    const hang =
      opts.hangChats ||
      (benchmark &&
        (opts.hangBenchmark || (opts.hangBenchmarkAfter !== undefined && state.received >= opts.hangBenchmarkAfter)));
    if (hang) {
      if (benchmark) state.received++;
      return; // accepted, never answered
    }
    const maxTokens = request.max_tokens ?? tokens;
    const n = benchmark ? ++state.received : 0;
    if (benchmark && opts.dieAfter !== undefined && n > opts.dieAfter) {
      void state.close();
      return;
    }
    const shed = opts.busyLimit !== undefined && inFlight >= opts.busyLimit;
    if (benchmark && ((opts.failEvery && n % opts.failEvery === 0) || shed)) {
      res.writeHead(500, { "content-type": "application/json" }).end('{"error":"overloaded"}');
      return;
    }
    if (benchmark) {
      inFlight++;
      res.on("close", () => inFlight--);
    }
    if (!opts.serial) {
      void answer(res, benchmark, maxTokens, model, n);
      return;
    }
    held.waiting++;
    queue = queue
      .then(() => {
        held.waiting--;
        return answer(res, benchmark, maxTokens, model, n);
      })
      .catch(() => undefined);
  };
  server.on("connection", (s: Socket) => {
    sockets.add(s);
    s.on("close", () => sockets.delete(s));
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  state.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return state;
}

/** A suite's `start`: each server it starts is closed after the test. Call at a file's top level. */
export function loadServersClosedAfterEach(): (opts?: LoadServerOptions) => Promise<LoadServer> {
  const servers: LoadServer[] = [];
  afterEach(async () => {
    for (const s of servers.splice(0)) await s.close();
  });
  return async (opts = {}) => {
    const s = await loadServer(opts);
    servers.push(s);
    return s;
  };
}
