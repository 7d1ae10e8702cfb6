/**
 * The client's measured ceiling: how fast a stream the benchmark client still times correctly,
 * against a paced server whose own log is the truth. The server (a child process, the other core)
 * streams one SSE event per token at a fixed rate per stream (--rate tokens per second; a late timer
 * writes the events due together, each still its own event) and logs, per request, when it arrived
 * and when its first and last tokens were written. Each level is one `bench()` run at concurrency C
 * (C x rate tokens per second offered), and its figures are held against the log of the same
 * requests: the level's throughput against the tokens over the server's own span (first arrival to
 * last write), its e2e p50 against the server's (arrival to last write), its TTFT against the
 * server's first write (the first-token lag). A level is timed correctly when the figure and the
 * e2e p50 are within 1 % of the truth; the certificate's verdict is printed beside, to show whether
 * it knew. The server also states its timing of each request in a Server-Timing trailer (first-token,
 * last-token), from which the certificate's client check measures the client's lag itself. An
 * unpaced flood (bench/gate-client-ceiling.ts) has no truth to compare with.
 *
 * --threads takes a number or auto (as `gpuhost bench --client-threads`); several, comma-separated
 * (1,auto), measure each level with each in turn, so that auto is held against one thread.
 *
 *   npm run tsx -- bench/gate-client-paced.ts [--levels 16,64,128,256] [--rate 1000] [--tokens 2000] [--threads 1,auto] [--requests-per-concurrency 2]
 */
import { fork } from "node:child_process";
import * as http from "node:http";
import type { AddressInfo } from "node:net";
import { availableParallelism } from "node:os";
import { parseArgs } from "node:util";
import { bench } from "../gate/index";
import { percentile } from "../gate/judge/stats";

/** One request as the paced server saw it: epoch milliseconds. */
interface Truth {
  benchmark: boolean;
  arrivedMs: number;
  firstWriteMs: number;
  lastWriteMs: number;
  tokens: number;
}

const epochMs = () => performance.timeOrigin + performance.now();

/** The same truth on the wire, for the certificate's client check (its first- and last-token lags). */
const serverTiming = (t: Truth) =>
  `first-token;dur=${(t.firstWriteMs - t.arrivedMs).toFixed(2)}, last-token;dur=${(t.lastWriteMs - t.arrivedMs).toFixed(2)}`;

function pacedServer(rate: number): void {
  const log: Truth[] = [];
  const counters = { generated: 0, requests: 0, running: 0 };
  const event = (i: number) =>
    `data: {"id":"chatcmpl-paced","object":"chat.completion.chunk","created":1795000000,"model":"paced","choices":[{"index":0,"delta":{"content":" tok${i % 10}"},"finish_reason":null}]}\n\n`;
  const stream = (res: http.ServerResponse, n: number, benchmark: boolean, arrivedMs: number) => {
    const interval = 1000 / rate;
    const t0 = performance.now();
    const truth: Truth = { benchmark, arrivedMs, firstWriteMs: 0, lastWriteMs: 0, tokens: n };
    let sent = 0;
    counters.running++;
    res.writeHead(200, { "content-type": "text/event-stream", trailer: "Server-Timing" });
    const tick = () => {
      const due = Math.min(n, Math.floor((performance.now() - t0) / interval) + 1);
      if (due > sent) {
        let out = "";
        for (; sent < due; sent++) out += event(sent);
        res.write(out);
        truth.lastWriteMs = epochMs();
        if (truth.firstWriteMs === 0) truth.firstWriteMs = truth.lastWriteMs;
      }
      if (sent < n) return void setTimeout(tick, Math.max(0, t0 + sent * interval - performance.now()));
      counters.generated += n;
      counters.requests++;
      counters.running--;
      log.push(truth);
      res.addTrailers({ "Server-Timing": serverTiming(truth) });
      res.end(
        `data: {"id":"x","object":"chat.completion.chunk","created":1,"model":"paced","choices":[{"index":0,"delta":{},"finish_reason":"length"}]}\n\n` +
          `data: {"id":"x","object":"chat.completion.chunk","created":1,"model":"paced","choices":[],"usage":{"prompt_tokens":20,"completion_tokens":${n},"total_tokens":${n + 20}}}\n\ndata: [DONE]\n\n`,
      );
    };
    tick();
  };
  const metrics = () =>
    [
      `sglang:generation_tokens_total{model_name="paced"} ${counters.generated}`,
      `sglang:num_requests_total{model_name="paced"} ${counters.requests}`,
      `sglang:num_running_reqs{model_name="paced"} ${counters.running}`,
      `sglang:num_queue_reqs{model_name="paced"} 0`,
      "",
    ].join("\n");
  const server = http.createServer((req, res) => {
    const arrivedMs = epochMs();
    let raw = "";
    req.on("data", (c) => (raw += c));
    req.on("end", () => {
      if (req.url === "/v1/models") return res.writeHead(200).end('{"data":[{"id":"paced"}]}');
      if (req.url === "/metrics") return res.writeHead(200).end(metrics());
      if (req.url !== "/v1/chat/completions") return res.writeHead(404).end();
      const body = JSON.parse(raw) as { max_tokens?: number; ignore_eos?: boolean };
      stream(res, Number(body.max_tokens) || 16, body.ignore_eos === true, arrivedMs);
    });
  });
  process.on("message", () => process.send!(log.splice(0)));
  server.listen({ port: 0, host: "127.0.0.1" }, () => process.send!((server.address() as AddressInfo).port));
}

const pct = (v: number) => `${v >= 0 ? "+" : ""}${(v * 100).toFixed(2)} %`;

interface Options {
  port: number;
  truthLog: () => Promise<Truth[]>;
  rate: number;
  tokens: number;
  requestsPerConcurrency: number;
}

/** One level on THREADS ("auto" or a number) held against the server's log of the same requests. */
async function measureLevel(o: Options, concurrency: number, threads: "auto" | number) {
  await o.truthLog(); // the previous level's and the warmup's
  const r = await bench(
    { url: `http://127.0.0.1:${o.port}`, model: "paced" },
    {
      singleRequestMaxTokens: [],
      concurrency: [concurrency],
      sweepMaxTokens: o.tokens,
      requestsPerConcurrency: o.requestsPerConcurrency,
      clientThreads: threads,
    },
  );
  const truth = (await o.truthLog()).filter((t) => t.benchmark);
  const level = r.sweep[0];
  const tokens = truth.reduce((a, t) => a + t.tokens, 0);
  const span = (Math.max(...truth.map((t) => t.lastWriteMs)) - Math.min(...truth.map((t) => t.arrivedMs))) / 1000;
  const sorted = (xs: number[]) => Float64Array.from(xs).sort();
  const truthE2e = percentile(sorted(truth.map((t) => (t.lastWriteMs - t.arrivedMs) / 1000)), 50) ?? 0;
  const truthTtft = percentile(sorted(truth.map((t) => (t.firstWriteMs - t.arrivedMs) / 1000)), 50) ?? 0;
  const figure = level.outputTokensPerSecond / (tokens / span) - 1;
  const e2e = (level.e2eP50Seconds ?? 0) / truthE2e - 1;
  const client = level.certificate?.checks.find((c) => c.name === "client")?.detail ?? null;
  return {
    concurrency,
    threads: `${threads}`,
    // what the level ran on: its client check names a spread
    threadsUsed: Number(/spread over (\d+) client threads/.exec(client ?? "")?.[1] ?? 1),
    offeredTokensPerSecond: concurrency * o.rate,
    truthTokensPerSecond: Math.round(tokens / span),
    clientTokensPerSecond: Math.round(level.outputTokensPerSecond),
    figureVsTruth: pct(figure),
    e2eP50VsTruth: pct(e2e),
    firstTokenLagP50Ms: Math.round(((level.ttftP50Seconds ?? 0) - truthTtft) * 1000),
    timedCorrectly: Math.abs(figure) <= 0.01 && Math.abs(e2e) <= 0.01,
    certified: level.certificate?.certified ?? false,
    failedChecks: level.certificate?.checks.filter((c) => !c.ok).map((c) => `${c.name}: ${c.detail}`) ?? [],
    client,
  };
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      levels: { type: "string", default: "16,64,128,256" },
      rate: { type: "string", default: "1000" },
      tokens: { type: "string", default: "2000" },
      threads: { type: "string", default: "1" },
      "requests-per-concurrency": { type: "string", default: "2" },
      child: { type: "boolean" },
    },
  });
  const rate = Number(values.rate);
  if (values.child) return pacedServer(rate);
  const child = fork(__filename, ["--child", "--rate", `${rate}`], { execArgv: process.execArgv });
  const port = await new Promise<number>((resolve) => child.once("message", (m) => resolve(Number(m))));
  const truthLog = () =>
    new Promise<Truth[]>((resolve) => {
      child.once("message", (m) => resolve(m as Truth[]));
      child.send("truth");
    });
  const o = {
    port,
    truthLog,
    rate,
    tokens: Number(values.tokens),
    requestsPerConcurrency: Number(values["requests-per-concurrency"]),
  };
  const settings = values.threads.split(",").map((t) => (t === "auto" ? "auto" : Number(t)));
  const rows = [];
  try {
    for (const concurrency of values.levels.split(",").map(Number))
      for (const threads of settings) {
        const row = await measureLevel(o, concurrency, threads);
        rows.push(row);
        console.log(
          `C=${concurrency} threads=${row.threads} (${row.threadsUsed}): truth ${row.truthTokensPerSecond.toLocaleString("en-US")} tok/s, client ${row.clientTokensPerSecond.toLocaleString("en-US")} (${row.figureVsTruth}), e2e p50 ${row.e2eP50VsTruth}, first-token lag p50 ${row.firstTokenLagP50Ms} ms; ${row.timedCorrectly ? "timed correctly" : "NOT timed correctly"}; ${row.certified ? "certified" : "not certified"}`,
        );
      }
  } finally {
    child.kill();
  }
  console.log(JSON.stringify({ cores: availableParallelism(), rate, tokens: o.tokens, rows }, null, 1));
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
