/**
 * `gpuhost job` as a command: aimed by a stack's outputs (the endpoint, the knee, the certified tok/s,
 * the served model checked before any request), the API key never from argv, the summary, and the
 * --textfile metrics, which pass Prometheus's own `promtool check metrics`.
 */
import * as fs from "node:fs";
import * as path from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { jobMain, jobTextfileName } from "../../cli/job";
import { promtool, SKIP_PROMTOOL } from "../support/promtool";
import { jobServer, type JobServer } from "./job-server";
import { recordedCounts, tempDir, until, writeInput } from "./helpers";

let server: JobServer | null = null;
afterEach(async () => {
  await server?.stop();
  server = null;
  delete process.env.GPUHOST_API_KEY;
});

function io() {
  const out = { text: "", write: (s: string) => (out.text += s) };
  const err = { text: "", write: (s: string) => (err.text += s) };
  return { stdout: out, stderr: err, signal: new AbortController().signal };
}

function stackOutputs(dir: string, url: string, model = "m"): string {
  const file = path.join(dir, "outputs.json");
  const host = {
    activeService: "autoregressive",
    endpoint: url,
    model,
    saturationConcurrency: 3,
    sustainedOutputTokensPerSecond: 829,
    sweep: [{ concurrency: 3 }],
    timeNote: "Figures are wall-clock measurements of the host.",
  };
  fs.writeFileSync(file, JSON.stringify({ gpuHosts: { h1: host }, fleet: null }));
  return file;
}

describe("gpuhost job aimed by the stack", () => {
  // promtool is built from its Go module once per machine (.ci/promtool.sh): minutes the first time.
  it(
    "runs at the stack's endpoint and knee, with the key from GPUHOST_API_KEY, and writes its summary and metrics",
    { timeout: 1_800_000 },
    async () => {
      server = await jobServer();
      const dir = tempDir();
      writeInput(path.join(dir, "in.jsonl"), 20);
      process.env.GPUHOST_API_KEY = "sk-test";
      const cli = io();
      const args = ["--input", path.join(dir, "in.jsonl"), "--output", path.join(dir, "out.jsonl")];
      const code = await jobMain(
        [...args, "--outputs", stackOutputs(dir, server.url), "--textfile", dir, "--deadline", "2099-01-01"],
        cli,
      );
      expect(code, cli.stderr.text).toBe(0);
      expect(cli.stderr.text).toMatch(/20 requests, 0 already recorded, 3 at a time against http:\/\/127\.0\.0\.1:\d+/);
      expect(cli.stdout.text).toMatch(/recorded: 20 of 20 \(20 succeeded, 0 failed; 0 by earlier runs\)/);
      expect(cli.stdout.text).toMatch(/against host h1's autoregressive service/);
      // Held to the stack's figure: a run this short lands anywhere, on plan included (it did once, under load).
      expect(cli.stdout.text).toMatch(
        /on plan \(829 tok\/s measured by the stack\)|% (below|above) the 829 tok\/s the stack measured/,
      );
      expect([...server.authorizations]).toEqual(["Bearer sk-test"]);
      // Reconciled with the server's own counter, read as a benchmark level reads it.
      expect(cli.stdout.text).toMatch(
        /server: the server counted 160 tokens generated for m during this run; the job recorded 160 \(100\.0 % of them\)/,
      );
      expect(recordedCounts(dir).size).toBe(20);
      // Written before the command returned.
      const text = fs.readFileSync(path.join(dir, jobTextfileName(path.join(dir, "outputs.json"))), "utf8");
      expect(text).toMatch(/gpuhost_job_succeeded\{stack="[^"]+"\} 20/);
      expect(text).toMatch(/gpuhost_job_success\{stack="[^"]+"\} 1/);
      if (!SKIP_PROMTOOL) {
        const r = await promtool(["check", "metrics"], text);
        expect(r.status, `${r.stdout}${r.stderr}`).toBe(0);
      }
    },
  );

  it("interrupted, it has written its last state as metrics before it returns (an interrupted command exits at once)", async () => {
    server = await jobServer();
    server.delayMs = 30;
    const dir = tempDir();
    writeInput(path.join(dir, "in.jsonl"), 40);
    const stop = new AbortController();
    const cli = { ...io(), signal: stop.signal };
    const s = server;
    const args = ["--input", path.join(dir, "in.jsonl"), "--output", path.join(dir, "out.jsonl")];
    const job = jobMain([...args, "--outputs", stackOutputs(dir, server.url), "--textfile", dir], cli);
    await until(() => s.answered >= 5, job);
    stop.abort();
    expect(await job).toBe(130);
    const text = fs.readFileSync(path.join(dir, jobTextfileName(path.join(dir, "outputs.json"))), "utf8");
    expect(text).toMatch(/gpuhost_job_success\{stack="[^"]+"\} 0/);
    const recorded = Number(/gpuhost_job_succeeded\{stack="[^"]+"\} (\d+)/.exec(text)?.[1]);
    expect(recorded).toBe(recordedCounts(dir).size);
    expect(recorded).toBeLessThan(40);
  });

  it("prints the summary every --summary-every minutes while it runs, and once more at the end", async () => {
    server = await jobServer();
    server.delayMs = 30;
    const dir = tempDir();
    writeInput(path.join(dir, "in.jsonl"), 40);
    const cli = io();
    const args = ["--input", path.join(dir, "in.jsonl"), "--output", path.join(dir, "out.jsonl")];
    // A summary every 30 ms at the latest progress tick (every 50 ms): the job takes 400 ms at least.
    const timing = ["--summary-every", "0.0005", "--progress-every", "0.05"];
    expect(await jobMain([...args, ...timing, "--outputs", stackOutputs(dir, server.url)], cli)).toBe(0);
    const summaries = cli.stdout.text.split("gpuhost job summary").slice(1);
    expect(summaries.length).toBeGreaterThanOrEqual(3);
    expect(summaries[0]).toMatch(/recorded: \d+ of 40 /);
    expect(summaries[0]).not.toMatch(/recorded: 40 of 40 /);
    expect(summaries.at(-1)).toMatch(/recorded: 40 of 40 \(40 succeeded/);
  });

  it("refuses an input whose model the stack does not serve, before any request", async () => {
    server = await jobServer();
    const dir = tempDir();
    writeInput(path.join(dir, "in.jsonl"), 5, "m");
    const cli = io();
    const args = ["--input", path.join(dir, "in.jsonl"), "--output", path.join(dir, "out.jsonl")];
    const code = await jobMain([...args, "--outputs", stackOutputs(dir, server.url, "kimi-k2")], cli);
    expect(code).toBe(2);
    expect(cli.stderr.text).toMatch(/asks for "m" \(5 requests\), which .* does not serve \(it serves "kimi-k2"\)/);
    expect(server.received.size).toBe(0);
  });

  it("refuses --api-key (argv is readable by any local user) and an endpoint without a concurrency", async () => {
    const cli = io();
    expect(await jobMain(["--input", "a", "--output", "b", "--api-key", "sk"], cli)).toBe(2);
    expect(cli.stderr.text).toMatch(/--api-key would put the key in this command's argv/);
    const bare = io();
    expect(await jobMain(["--input", "a", "--output", "b", "--endpoint", "http://127.0.0.1:1"], bare)).toBe(2);
    expect(bare.stderr.text).toMatch(/--concurrency is required without --stack or --outputs/);
  });
});
