/**
 * The benchmark's verdicts do not lie about what it measured (issue 18 points 1, 5, 6, 10), against
 * small servers written in the tests (test/gate/load-servers.ts): one that does not list the model
 * asked for, one that ignores the request's `model`, one whose streams carry no usage, one that
 * never answers a chat, one that dies mid-generation, and a port nobody listens on.
 */
import { mkdtempSync, readFileSync } from "node:fs";
import * as http from "node:http";
import type { AddressInfo, Socket } from "node:net";
import { tmpdir } from "node:os";
import * as path from "node:path";
import { describe, expect, it } from "vitest";
import { benchMain, progressPrinter } from "../../cli/bench";
import { bench, verify } from "../../gate/index";
import type { BenchResult } from "../../gate/run/bench";
import { io, createVerification } from "./cli-fixture";
import { loadServer, loadServersClosedAfterEach } from "./load-servers";

const start = loadServersClosedAfterEach();
const plan = {
  concurrency: [1, 2] as [number, ...number[]],
  requestsPerConcurrency: 2,
  singleRequestMaxTokens: [4],
  singleRequestPrompts: 1,
  sweepMaxTokens: 4,
};
const jsonFile = () => path.join(mkdtempSync(path.join(tmpdir(), "gpuhost-verdicts-")), "b.json");
const argv = (url: string, ...more: string[]) => [
  ...["--endpoint", url, "--concurrency", "1,2", "--requests-per-concurrency", "2", "--max-tokens", "4"],
  ...["--prompts", "1", ...more],
];
const readJson = (file: string) => JSON.parse(readFileSync(file, "utf8")) as BenchResult;

describe("18.1 the model asked for is the model measured", () => {
  it("a model GET /v1/models does not list is refused before any request; the JSON says why", async () => {
    const server = await start({ models: ["small-model"] });
    const r = await bench({ url: server.url, model: "Qwen/Qwen3-8B" }, plan);
    expect(r.complete).toBe(false);
    expect(r.stopReason).toMatch(/the server serves \["small-model"\], not the model asked for "Qwen\/Qwen3-8B"/);
    expect(r.sweep).toEqual([]);
    expect(server.received).toBe(0);

    const file = jsonFile();
    const o = io();
    expect(await benchMain(argv(server.url, "--model", "Qwen/Qwen3-8B", "--json", file), o)).toBe(1);
    expect(readJson(file).stopReason).toMatch(/not the model asked for "Qwen\/Qwen3-8B"/);
    expect(o.out()).toMatch(/^stopped: .*the server serves \["small-model"\]/m);
    expect(server.received).toBe(0);
  }, 30_000);

  it("a server that lists the model but answers as another is reported; the served model is recorded", async () => {
    const server = await start({ models: ["small-model", "Qwen/Qwen3-8B"], servesModel: "small-model" });
    const file = jsonFile();
    const o = io();
    await benchMain(argv(server.url, "--model", "Qwen/Qwen3-8B", "--json", file), o);
    const json = readJson(file);
    expect(json.model).toBe("Qwen/Qwen3-8B");
    expect(json.servedModels).toEqual(["small-model"]);
    expect(json.modelMismatch).toMatch(/the server answered as "small-model", not the model asked for/);
    expect(o.out()).toMatch(/^WARNING: the server answered as "small-model"/m);
  }, 30_000);

  it("a server that answers as the model asked: recorded, nothing reported", async () => {
    const server = await start({});
    const r = await bench({ url: server.url, model: "m" }, plan);
    expect(r.servedModels).toEqual(["m"]);
    expect(r.modelMismatch).toBeNull();
    expect(r.complete).toBe(true);
  }, 30_000);
});

describe("18.5 ready, then unmeasurable: streams without usage", () => {
  it("the gate fails readiness with the reason when the benchmark needs usage; passes without the need", async () => {
    const server = await start({ noUsage: true });
    const needed = await verify({ url: server.url, model: "m" }, { deadlineSeconds: 10, requireUsage: true });
    expect(needed.ready).toBe(false);
    expect(needed.diagnosis).toMatch(/the stream carried no usage although stream_options.include_usage was asked/);
    const none = { answers: { file: "none" } }; // a load server answers filler: the subject here is usage
    expect((await verify({ url: server.url, model: "m" }, { deadlineSeconds: 10, ...none })).ready).toBe(true);
  }, 30_000);

  it("bench stops after the warmup with the reason, sending no benchmark request", async () => {
    const server = await start({ noUsage: true });
    const file = jsonFile();
    const o = io();
    expect(await benchMain(argv(server.url, "--json", file), o)).toBe(1);
    const json = readJson(file);
    expect(json.complete).toBe(false);
    expect(json.stopReason).toMatch(/^the server's streams carry no usage .*stopped after the warmup$/);
    expect(json.sweep).toEqual([]);
    expect(server.received).toBe(0);
  }, 30_000);

  it("VerifiedGeneration fails at readiness with the reason", async () => {
    const server = await start({ noUsage: true });
    await expect(createVerification(server.url, plan)).rejects.toThrow(/the stream carried no usage/);
    expect(server.received).toBe(0);
  }, 30_000);
});

describe("18.10 a run that cannot measure ends with its reason, and writes it", () => {
  it("a server that never answered: the JSON is written with the reason", async () => {
    const gone = await loadServer({});
    const url = gone.url;
    await gone.close();
    const file = jsonFile();
    const o = io();
    expect(await benchMain(argv(url, "--json", file), o)).toBe(1);
    const json = readJson(file);
    expect(json.complete).toBe(false);
    expect(json.stopReason).toMatch(/^the server never answered: GET http:\/\/127\.0\.0\.1:\d+\/v1\/models: /);
  }, 30_000);

  it("a warmup that hangs ends the run with that reason at its timeout, not after every level", async () => {
    const server = await start({ hangChats: true });
    const file = jsonFile();
    const o = io();
    expect(await benchMain(argv(server.url, "--request-timeout", "1", "--json", file), o)).toBe(1);
    const json = readJson(file);
    expect(json.stopReason).toMatch(/^the warmup failed \(no complete answer within 1 s/);
    expect(json.sweep).toEqual([]);
  }, 30_000);

  it("VerifiedGeneration: a ready server whose warmup fails fails the create with the run's reason", async () => {
    const server = await start({ failMaxTokens: 16 });
    await expect(createVerification(server.url, plan)).rejects.toThrow(
      /^the benchmark stopped: the warmup failed \(HTTP 503 .*warming.*\): stopped before the single requests and the sweep; no throughput/,
    );
    expect(server.received).toBe(0);
  }, 30_000);

  it("a single request that hangs stops the run before the sweep", async () => {
    const server = await start({ hangBenchmark: true });
    const r = await bench({ url: server.url, model: "m" }, { ...plan, requestTimeoutSeconds: 1 });
    expect(r.stopReason).toMatch(/^a single request at max_tokens 4 hung \(no complete answer within 1 s/);
    expect(r.sweep).toEqual([]);
    expect(server.received).toBe(1);
  }, 30_000);
});

describe("18.6 progress on any output", () => {
  it("off a terminal, a line with elapsed time, requests and tokens comes while a request hangs", async () => {
    const server = await start({ hangBenchmark: true });
    const o = io();
    const progress = progressPrinter(o, 200);
    try {
      await bench({ url: server.url, model: "m" }, { ...plan, requestTimeoutSeconds: 1.5 }, { onProgress: progress });
    } finally {
      progress.finish();
    }
    // The warmup ended (1 request, 4 tokens); the single request hangs: the heartbeat says so.
    expect(o.err()).toMatch(/\[bench\] \d+ s elapsed: 1 requests done \(0 errors\), 4 tokens so far; now: single/);
  }, 30_000);
});

describe("18.7 after a crash mid-generation, the diagnosis ends with the probe's own last event", () => {
  it("the last response is the cut stream and its last event, not GET /v1/models' HTTP 200", async () => {
    const sockets = new Set<Socket>();
    const server = http.createServer((req, res) => {
      if (req.url === "/v1/models") {
        res.writeHead(200, { "content-type": "application/json" }).end('{"data":[{"id":"m"}]}');
        return;
      }
      // The process dies while generating: two reasoning events, then every connection cut and the port closed.
      res.writeHead(200, { "content-type": "text/event-stream" });
      res.write(`data: ${JSON.stringify({ choices: [{ index: 0, delta: { reasoning_content: "Let me" } }] })}\n\n`);
      res.write(`data: ${JSON.stringify({ choices: [{ index: 0, delta: { reasoning_content: " think" } }] })}\n\n`);
      setTimeout(() => {
        server.close();
        for (const s of sockets) s.destroy();
      }, 50);
    });
    server.on("connection", (s: Socket) => sockets.add(s));
    await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    const r = await verify({ url, model: "m" }, { deadlineSeconds: 20, serverGoneSeconds: 1 });
    expect(r.ready).toBe(false);
    expect(r.diagnosis).toMatch(/the server process went away during its first generation/);
    expect(r.diagnosis).toMatch(
      /last response: POST http:\/\/127\.0\.0\.1:\d+\/v1\/chat\/completions: HTTP 200, the stream was cut \(.*\) after 2 event\(s\); last event: .*think/,
    );
    expect(r.diagnosis).not.toMatch(/last response: GET/);
  }, 30_000);
});
