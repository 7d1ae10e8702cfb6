/**
 * The client's own ceiling: streamed tokens per second the benchmark client consumes on one core
 * (Node's main thread), against a blaster in a child process (the other core) that writes
 * precomputed SSE events, one token per event, as fast as the socket takes them.
 * Target: >= 200,000 tokens/s with 64 concurrent streams.
 *
 * With --threads N the client is spread over N worker threads (gate/run/client-threads.ts)
 * and --blasters M starts M blaster processes on one port (SO_REUSEPORT: the kernel deals the
 * connections out), so a machine with the cores shows how the ceiling grows with threads.
 *
 *   npx tsx bench/gate-client-ceiling.ts [--concurrency 64] [--tokens 4096] [--events-per-write 8] [--threads 1] [--blasters 1]
 */
import { fork, type ChildProcess } from "node:child_process";
import * as http from "node:http";
import type { AddressInfo } from "node:net";
import { availableParallelism } from "node:os";
import { parseArgs } from "node:util";
import { bench } from "../gate/index";

function blaster(eventsPerWrite: number, port: number): void {
  const chunk = (i: number) =>
    `data: {"id":"chatcmpl-0123456789abcdef","object":"chat.completion.chunk","created":1795000000,"model":"blaster","choices":[{"index":0,"delta":{"content":" tok${i % 10}"},"logprobs":null,"finish_reason":null}]}\n\n`;
  const cache = new Map<number, Buffer[]>();
  const body = (n: number): Buffer[] => {
    let parts = cache.get(n);
    if (!parts) {
      parts = [];
      for (let i = 0; i < n; i += eventsPerWrite) {
        let s = "";
        for (let j = i; j < Math.min(n, i + eventsPerWrite); j++) s += chunk(j);
        parts.push(Buffer.from(s));
      }
      parts.push(
        Buffer.from(
          `data: {"id":"x","object":"chat.completion.chunk","created":1,"model":"blaster","choices":[{"index":0,"delta":{},"finish_reason":"length"}]}\n\n` +
            `data: {"id":"x","object":"chat.completion.chunk","created":1,"model":"blaster","choices":[],"usage":{"prompt_tokens":20,"completion_tokens":${n},"total_tokens":${n + 20}}}\n\ndata: [DONE]\n\n`,
        ),
      );
      cache.set(n, parts);
    }
    return parts;
  };
  const server = http.createServer((req, res) => {
    let raw = "";
    req.on("data", (c) => (raw += c));
    req.on("end", () => {
      if (req.url === "/v1/models") return res.writeHead(200).end('{"data":[{"id":"blaster"}]}');
      if (req.url !== "/v1/chat/completions") return res.writeHead(404).end();
      const parts = body(Number((JSON.parse(raw) as { max_tokens?: number }).max_tokens) || 16);
      res.writeHead(200, { "content-type": "text/event-stream" });
      let i = 0;
      const pump = () => {
        while (i < parts.length) if (!res.write(parts[i++])) return void res.once("drain", pump);
        res.end();
      };
      pump();
    });
  });
  server.listen({ port, host: "127.0.0.1", reusePort: true }, () =>
    process.send!((server.address() as AddressInfo).port),
  );
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      concurrency: { type: "string", default: "64" },
      tokens: { type: "string", default: "4096" },
      "events-per-write": { type: "string", default: "8" },
      threads: { type: "string", default: "1" },
      blasters: { type: "string", default: "1" },
      port: { type: "string", default: "0" },
      child: { type: "boolean" },
    },
  });
  if (values.child) return blaster(Number(values["events-per-write"]), Number(values.port));
  const children: ChildProcess[] = [];
  const startBlaster = (at: number) => {
    const child = fork(__filename, ["--child", "--events-per-write", values["events-per-write"], "--port", `${at}`], {
      execArgv: process.execArgv,
    });
    children.push(child);
    return new Promise<number>((resolve) => child.once("message", (m) => resolve(Number(m))));
  };
  const port = await startBlaster(0);
  for (let i = 1; i < Number(values.blasters); i++) await startBlaster(port);
  try {
    const concurrency = Number(values.concurrency);
    const tokens = Number(values.tokens);
    const cpu0 = process.cpuUsage();
    const t0 = performance.now();
    const r = await bench(
      { url: `http://127.0.0.1:${port}`, model: "blaster" },
      {
        singleRequestMaxTokens: [],
        concurrency: [concurrency],
        sweepMaxTokens: tokens,
        requestsPerConcurrency: 4,
        clientThreads: Number(values.threads),
      },
    );
    const wall = (performance.now() - t0) / 1000;
    const cpu = process.cpuUsage(cpu0);
    const level = r.sweep[0];
    const chunks = r.samples.sweep[0].requests.reduce((a, s) => a + s.outputChunks, 0);
    const out = {
      concurrency,
      tokensPerRequest: tokens,
      eventsPerWrite: Number(values["events-per-write"]),
      threads: Number(values.threads),
      blasters: Number(values.blasters),
      cores: availableParallelism(),
      requests: level.requests,
      errors: level.errors,
      streamedTokensPerSecond: level.outputTokensPerSecond,
      sseEventsParsed: chunks,
      clientCpuSecondsPerWallSecond: (cpu.user + cpu.system) / 1e6 / wall,
      certificate: level.certificate?.checks.find((c) => c.name === "client")?.detail ?? null,
    };
    console.log(JSON.stringify(out, null, 2));
    console.log(
      `client ceiling: ${Math.round(level.outputTokensPerSecond).toLocaleString("en-US")} streamed tokens/s on ${out.threads === 1 ? "one core" : `${out.threads} client threads`} (target >= 200,000 on one)`,
    );
  } finally {
    for (const child of children) child.kill();
  }
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
