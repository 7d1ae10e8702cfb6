/**
 * The job against a server written in the test that misbehaves as real ones do: drops connections,
 * answers 500, 429, 400 or an HTML page with 200, stalls, goes away and comes back, goes away for good.
 * Whatever it does, every custom_id ends up recorded exactly once, and a dead server never turns the
 * input into errors.
 */
import * as fs from "node:fs";
import * as path from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { JobFileError } from "../../job/batch-file";
import { jobServer, type JobServer, type Misbehaviour } from "./job-server";
import { jobIn, readLines, recordedCounts, tempDir, until, writeInput } from "./helpers";

let server: JobServer | null = null;
afterEach(async () => {
  await server?.stop();
  server = null;
});

const N = 24;

function exactlyOnce(dir: string): void {
  const counts = recordedCounts(dir);
  expect(counts.size).toBe(N);
  expect([...counts.values()].every((c) => c === 1)).toBe(true);
}

describe("gpuhost job against a misbehaving server", () => {
  it.each<[string, Misbehaviour[]]>([
    ["drops the connection", ["drop", "drop"]],
    ["answers 500", ["500", "500", "500"]],
    ["answers 429 (overloaded)", ["429", "429"]],
    ["answers an HTML page with 200", ["html"]],
    ["stalls past the request timeout", ["stall"]],
  ])("retries a request whose server %s, and records it once in the output", async (_what, tries) => {
    server = await jobServer();
    const dir = tempDir();
    writeInput(path.join(dir, "in.jsonl"), N);
    for (const p of ["p-0", "p-5", "p-17"]) server.script.set(p, tries);
    const result = await jobIn(dir, server.url, {
      policy: { attempts: 4, backoffMs: 10, maxBackoffMs: 50, requestTimeoutMs: 500 },
    });
    expect(result.stopped).toBeNull();
    expect(readLines(path.join(dir, "out.errors.jsonl"))).toEqual([]);
    expect(server.received.get("p-5")).toBe(tries.length + 1);
    exactlyOnce(dir);
    expect(result.tokens).toBe(N * 8);
  });

  it("records a request that fails every try while others succeed in the errors file, with the reason", async () => {
    server = await jobServer();
    const dir = tempDir();
    writeInput(path.join(dir, "in.jsonl"), N);
    server.script.set("p-3", Array<Misbehaviour>(100).fill("500"));
    const result = await jobIn(dir, server.url);
    expect(result.stopped).toBeNull();
    const errors = readLines(path.join(dir, "out.errors.jsonl"));
    expect(errors.map((e) => e.custom_id)).toEqual(["r-3"]);
    expect(errors[0].error?.code).toBe("500");
    expect(errors[0].error?.message).toMatch(/HTTP 500.*scripted 500.*after 4 tries/);
    expect(errors[0].response?.status_code).toBe(500);
    exactlyOnce(dir);
  });

  it("records a 400 in the errors file at once, without retrying it", async () => {
    server = await jobServer();
    const dir = tempDir();
    writeInput(path.join(dir, "in.jsonl"), N);
    server.script.set("p-8", ["400"]);
    await jobIn(dir, server.url);
    const errors = readLines(path.join(dir, "out.errors.jsonl"));
    expect(errors.map((e) => [e.custom_id, e.response?.status_code])).toEqual([["r-8", 400]]);
    expect(server.received.get("p-8")).toBe(1);
    exactlyOnce(dir);
  });
});

describe("gpuhost job against a server that goes away", () => {
  it("waits for a server that went away and came back, and says so", async () => {
    server = await jobServer();
    server.delayMs = 20;
    const dir = tempDir();
    writeInput(path.join(dir, "in.jsonl"), N);
    const said: string[] = [];
    const s = server;
    const job = jobIn(dir, server.url, { say: (l) => said.push(l), concurrency: 2 });
    await until(() => s.answered >= 6, job);
    await s.stop();
    await new Promise((r) => setTimeout(r, 800));
    await s.start();
    const result = await job;
    expect(result.stopped).toBeNull();
    expect(said.some((l) => /the server is not answering .* waiting, and giving up at/.test(l))).toBe(true);
    expect(said.some((l) => /answers again/.test(l))).toBe(true);
    expect(readLines(path.join(dir, "out.errors.jsonl"))).toEqual([]);
    exactlyOnce(dir);
  });

  it.each<[string, (s: JobServer) => Promise<void>]>([
    ["dies", (s) => s.stop()],
    ["answers 500 to everything", (s) => Promise.resolve(void (s.all = "500"))],
  ])(
    "stops after --outage-limit when the server %s, turning no request into an error; the next run finishes",
    async (_what, kill) => {
      server = await jobServer();
      server.delayMs = 20;
      const dir = tempDir();
      writeInput(path.join(dir, "in.jsonl"), N);
      const s = server;
      const job = jobIn(dir, server.url, { outageMs: 1_000, concurrency: 2 });
      await until(() => s.answered >= 6, job);
      await kill(s);
      const result = await job;
      expect(result.stopped).toMatch(/no request succeeded for \d+ s \(--outage-limit\): the server is down/);
      expect(readLines(path.join(dir, "out.errors.jsonl"))).toEqual([]);
      expect(result.succeeded).toBeLessThan(N);
      s.all = null;
      if (
        !(await s.start().then(
          () => true,
          () => false,
        ))
      )
        return;
      const again = await jobIn(dir, s.url);
      expect(again.stopped).toBeNull();
      expect(again.resumed).toBe(result.succeeded);
      exactlyOnce(dir);
    },
  );
});

describe("gpuhost job before and after the run", () => {
  it("refuses an input whose model the server does not serve before sending any request", async () => {
    server = await jobServer();
    const dir = tempDir();
    writeInput(path.join(dir, "in.jsonl"), N, "other-model");
    const err = await jobIn(dir, server.url).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(JobFileError);
    expect((err as Error).message).toMatch(
      /asks for "other-model" \(24 requests\), which .* does not serve \(it serves "m"\)/,
    );
    expect(server.received.size).toBe(0);
    expect(fs.existsSync(path.join(dir, "out.jsonl"))).toBe(false);
  });

  it("stops at an interrupt with what was recorded kept; the next run records the rest, each once", async () => {
    server = await jobServer();
    server.delayMs = 30;
    const dir = tempDir();
    writeInput(path.join(dir, "in.jsonl"), N);
    const ctl = new AbortController();
    const s = server;
    const job = jobIn(dir, server.url, {}, ctl);
    await until(() => s.answered >= 5, job);
    ctl.abort(new Error("SIGINT"));
    const first = await job;
    expect(first.stopped).toMatch(/interrupted/);
    expect(recordedCounts(dir).size).toBeLessThan(N);
    const again = await jobIn(dir, server.url);
    expect(again.stopped).toBeNull();
    exactlyOnce(dir);
  });
});
