/**
 * How many streamed tokens per second the simulator sustains on one core with 64 concurrent
 * streams. The server runs in this process (Node runs its JavaScript on one thread); the client
 * runs in a forked child process so that it has its own core. The model is made deliberately
 * faster than any server could stream (100,000 tok/s per request, one SSE event per token), so the
 * figure is the simulator's own ceiling.
 *
 *   npx tsx bench/simulator-throughput.ts [--seconds 10] [--streams 64] [--max-tokens 20000]
 */
import { fork } from "node:child_process";
import * as http from "node:http";
import { derivedProfileFile } from "./simulator-profile";
import { startSimulator } from "../simulator/index";
import { fetchOnce } from "../gate/transport/http";

function arg(name: string, fallback: number): number {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? Number(process.argv[i + 1]) : fallback;
}

interface ClientReport {
  events: number;
  bytes: number;
  completed: number;
  seconds: number;
  cpuSeconds: number;
}

/** The client: `streams` closed-loop streams; counts SSE token events without parsing JSON. */
async function client(url: string, streams: number, seconds: number, maxTokens: number): Promise<void> {
  const agent = new http.Agent({ keepAlive: true, maxSockets: streams });
  const body = JSON.stringify({
    model: "bench",
    messages: [{ role: "user", content: "Write a long story." }],
    max_tokens: maxTokens,
    ignore_eos: true,
    stream: true,
    chat_template_kwargs: { thinking: false },
  });
  const target = new URL(`${url}/v1/chat/completions`);
  const report: ClientReport = { events: 0, bytes: 0, completed: 0, seconds: 0, cpuSeconds: 0 };
  const needle = Buffer.from('"content":');
  const start = performance.now();
  const deadline = start + seconds * 1000;
  const one = (): Promise<void> =>
    new Promise((resolve, reject) => {
      const req = http.request(
        target,
        { method: "POST", agent, headers: { "content-type": "application/json" } },
        (res) => {
          res.on("data", (chunk: Buffer) => {
            report.bytes += chunk.length;
            // Token events carry `"content":"<text>"`; the opening role event has `"content":""`.
            for (let i = chunk.indexOf(needle); i >= 0; i = chunk.indexOf(needle, i + needle.length)) {
              if (chunk[i + needle.length + 1] !== 0x22) report.events++;
            }
            if (performance.now() > deadline) req.destroy();
          });
          res.on("end", () => {
            report.completed++;
            resolve();
          });
          res.on("close", resolve);
        },
      );
      req.on("error", (err: NodeJS.ErrnoException) => (performance.now() > deadline ? resolve() : reject(err)));
      req.end(body);
    });
  const loop = async (): Promise<void> => {
    while (performance.now() < deadline) await one();
  };
  await Promise.all(Array.from({ length: streams }, loop));
  report.seconds = (performance.now() - start) / 1000;
  const cpu = process.cpuUsage();
  report.cpuSeconds = (cpu.user + cpu.system) / 1e6;
  process.send!(report);
}

async function main(): Promise<void> {
  if (process.argv[2] === "client") {
    await client(process.argv[3], Number(process.argv[4]), Number(process.argv[5]), Number(process.argv[6]));
    return;
  }
  const seconds = arg("seconds", 10);
  const streams = arg("streams", 64);
  const maxTokens = arg("max-tokens", 20000);
  const profile = derivedProfileFile("tiny", (p) => {
    p.decode.perRequestTokensPerSecond = [{ batch: 1, value: 100_000 }];
    p.decode.maxRunningRequests = streams;
  });
  const sim = await startSimulator({ profile, port: 0, servedModelName: "bench", log: () => {} });
  for (;;) {
    const res = await fetchOnce(`${sim.url}/health`, { timeoutMs: 10_000 }).catch(() => null);
    if (res?.status === 200) break;
    await new Promise((r) => setTimeout(r, 50));
  }
  const cpuBefore = process.cpuUsage();
  const truthBefore = JSON.parse((await fetchOnce(`${sim.url}/sim/truth`, { timeoutMs: 10_000 })).text) as {
    tokensEmitted: number;
  };
  const child = fork(__filename, ["client", sim.url, String(streams), String(seconds), String(maxTokens)], {
    execArgv: process.execArgv,
  });
  const report = await new Promise<ClientReport>((resolve, reject) => {
    child.once("message", (m) => resolve(m as ClientReport));
    child.once("error", reject);
  });
  const cpu = process.cpuUsage(cpuBefore);
  const truth = JSON.parse((await fetchOnce(`${sim.url}/sim/truth`, { timeoutMs: 10_000 })).text) as {
    tokensEmitted: number;
  };
  await sim.close();
  const result = {
    streams,
    seconds: Number(report.seconds.toFixed(2)),
    clientTokensPerSecond: Math.round(report.events / report.seconds),
    serverTokensEmittedPerSecond: Math.round((truth.tokensEmitted - truthBefore.tokensEmitted) / report.seconds),
    megabytesPerSecond: Number((report.bytes / report.seconds / 1e6).toFixed(1)),
    serverCpuCores: Number(((cpu.user + cpu.system) / 1e6 / report.seconds).toFixed(2)),
    // What one core would sustain if it were the server's alone: tokens per second of server CPU.
    serverTokensPerCpuSecond: Math.round(report.events / ((cpu.user + cpu.system) / 1e6)),
    clientCpuCores: Number((report.cpuSeconds / report.seconds).toFixed(2)),
    requestsCompleted: report.completed,
  };
  process.stdout.write(`${JSON.stringify(result)}\n`);
  process.stdout.write(
    `simulator: ${result.clientTokensPerSecond.toLocaleString("en-US")} streamed tokens/s received by the client over ${streams} streams ` +
      `(server ${result.serverCpuCores} cores busy, client ${result.clientCpuCores}); ` +
      `${result.serverTokensPerCpuSecond.toLocaleString("en-US")} tokens per server CPU-second\n`,
  );
}

main().then(
  () => process.exit(0),
  (err) => {
    console.error(err);
    process.exit(1);
  },
);
