/**
 * The job's fidelity to capacity: on the simulated story host (its own process, so this process's CPU
 * is the client's alone), `gate bench` at the job's concurrency gives the certified sustained tok/s;
 * then `gpuhost job` runs the same requests (the benchmark's i-th request is the job's i-th line) at
 * the same concurrency, and its sustained tok/s (over the middle of the run, after the ramp and before
 * the drain) is compared with it: target within 3 %. Client CPU seconds per million tokens of each
 * are printed side by side. Then resident memory: the job started on a 1,000,000-line input and on a
 * 10,000-line one, stopped after --memory-seconds, peak RSS of each.
 *
 *   npx tsx bench/job-throughput.ts [--time-scale 10] [--concurrency 64] [--tokens 2000] [--waves 10] [--memory-seconds 60]
 */
import { spawn } from "node:child_process";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { parseArgs } from "node:util";
import { freeLocalPort } from "../ports";
import { benchJobShape, STORY_JOB_PROFILE, writeStoryInput } from "../cli/demo-job";
import { runJob, type JobState } from "../job/run";
import { DEFAULT_RETRY } from "../job/request";

const { values } = parseArgs({
  options: {
    "time-scale": { type: "string", default: "10" },
    concurrency: { type: "string", default: "64" },
    tokens: { type: "string", default: "2000" },
    waves: { type: "string", default: "10" },
    "memory-seconds": { type: "string", default: "60" },
  },
});
const timeScale = Number(values["time-scale"]);
const concurrency = Number(values.concurrency);
const tokens = Number(values.tokens);

async function simulator(): Promise<{ url: string; stop: () => void }> {
  const port = await freeLocalPort();
  const entry = path.join(__dirname, "..", "cli", "gpuhost.ts");
  const args = [
    "--import",
    "tsx",
    entry,
    "sim",
    "--profile",
    STORY_JOB_PROFILE,
    "--port",
    String(port),
    "--time-scale",
    String(timeScale),
  ];
  const child = spawn(process.execPath, args, { stdio: "ignore" });
  const url = `http://127.0.0.1:${port}`;
  for (;;) {
    const t = (await (await fetch(`${url}/sim/truth`).catch(() => null))?.json().catch(() => null)) as {
      status?: string;
    } | null;
    if (t?.status === "ready") return { url, stop: () => child.kill("SIGTERM") };
    await new Promise((r) => setTimeout(r, 200));
  }
}

function jobOptions(dir: string, url: string, onTick?: (s: JobState) => void) {
  return {
    input: path.join(dir, "in.jsonl"),
    output: path.join(dir, "out.jsonl"),
    errors: path.join(dir, "out.errors.jsonl"),
    endpoint: url,
    apiKey: undefined,
    concurrency,
    policy: DEFAULT_RETRY,
    outageMs: 600_000,
    plan: { certifiedTokensPerSecond: null, hosts: 1, deadlineMs: null },
    timeScale,
    windowMs: 300_000,
    progressEveryMs: onTick ? 500 : 0,
    say: () => undefined,
    onTick,
  };
}

/** The job's tok/s (host time) between the ticks nearest 20 % and 80 % of the requests recorded. */
async function jobRun(url: string, requests: number) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "gpuhost-job-bench-"));
  writeStoryInput(path.join(dir, "in.jsonl"), requests, tokens);
  const ticks: { at: number; done: number; tokens: number }[] = [];
  const cpu = process.cpuUsage();
  const result = await runJob(
    jobOptions(dir, url, (s) => ticks.push({ at: performance.now(), done: s.succeeded, tokens: s.tokens })),
    new AbortController().signal,
  );
  const used = process.cpuUsage(cpu);
  const near = (share: number) =>
    ticks.reduce((a, t) => (Math.abs(t.done - share * requests) < Math.abs(a.done - share * requests) ? t : a));
  const [a, b] = [near(0.2), near(0.8)];
  fs.rmSync(dir, { recursive: true, force: true });
  return {
    sustained: (b.tokens - a.tokens) / ((b.at - a.at) / 1000) / timeScale,
    tokens: result.tokens,
    failed: result.failed,
    cpuSeconds: (used.user + used.system) / 1e6,
  };
}

/** Peak RSS while the job runs on an input of LINES lines for SECONDS (tiny completions, so it cycles fast). */
async function memoryRun(url: string, lines: number, seconds: number) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "gpuhost-job-mem-"));
  writeStoryInput(path.join(dir, "in.jsonl"), lines, 16);
  const size = fs.statSync(path.join(dir, "in.jsonl")).size;
  global.gc?.();
  let peak = process.memoryUsage().rss;
  const sampler = setInterval(() => (peak = Math.max(peak, process.memoryUsage().rss)), 200);
  const stop = new AbortController();
  const timer = setTimeout(() => stop.abort(new Error("the benchmark's time")), seconds * 1000);
  const result = await runJob(jobOptions(dir, url), stop.signal);
  clearTimeout(timer);
  clearInterval(sampler);
  fs.rmSync(dir, { recursive: true, force: true });
  return { lines, inputMB: size / 1e6, recorded: result.succeeded, peakRssMB: peak / 1e6 };
}

async function main(): Promise<void> {
  const sim = await simulator();
  try {
    const cert = await benchJobShape(sim.url, concurrency, tokens, timeScale);
    const job = await jobRun(sim.url, concurrency * Number(values.waves));
    const gap = job.sustained / cert.sustained - 1;
    const memory = [];
    for (const lines of [10_000, 1_000_000])
      memory.push(await memoryRun(sim.url, lines, Number(values["memory-seconds"])));
    const out = {
      machine: `${os.cpus().length} cores, load ${os.loadavg()[0].toFixed(1)} at the end`,
      profile: STORY_JOB_PROFILE,
      timeScale,
      concurrency,
      tokens,
      benchSustainedTokensPerSecond: cert.sustained,
      benchCertificate: cert.certificate,
      jobSustainedTokensPerSecond: job.sustained,
      jobFailed: job.failed,
      relativeGap: gap,
      benchClientCpuSecondsPerMillionTokens: (cert.cpuSeconds / cert.tokens) * 1e6,
      jobClientCpuSecondsPerMillionTokens: (job.cpuSeconds / job.tokens) * 1e6,
      memory,
    };
    console.log(JSON.stringify(out, null, 2));
    console.log(`job vs bench: ${(gap * 100).toFixed(2)} % (target within 3 %)`);
  } finally {
    sim.stop();
  }
}

main().then(
  () => process.exit(0),
  (err: unknown) => {
    console.error(err);
    process.exit(1);
  },
);
