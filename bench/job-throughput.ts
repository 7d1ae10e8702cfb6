/**
 * The job's fidelity to capacity: on the simulated story host (its own process, so this process's CPU
 * is the client's alone), `gate bench` at the job's concurrency gives the certified sustained tok/s;
 * then `gpuhost job` runs the same requests (the benchmark's i-th request is the job's i-th line) at
 * the same concurrency, and its sustained tok/s (over the middle of the run, after the ramp and before
 * the drain) is compared with it: target within 3 %. Client CPU seconds per million tokens of each
 * are printed side by side. Then resident memory: `gpuhost job` as its own process (dist/) on a
 * 10,000-line and a 1,000,000-line input, stopped with Ctrl-C --memory-seconds after its scan: its
 * peak RSS (the scan's hash table included) and its RSS as the run began and at its end, which the
 * file's size should barely move (what the run holds is its requests in flight and one byte a line);
 * and the 1,000,000-line run again under a 64 MB V8 heap cap.
 *
 *   npx tsc -p . && npm run tsx -- bench/job-throughput.ts [--time-scale 10] [--concurrency 64] [--tokens 2000] [--waves 10] [--memory-seconds 60] [--memory-only]
 */
import { spawn } from "node:child_process";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { parseArgs } from "node:util";
import { freeLocalPort } from "../ports";
import { benchJobShape, STORY_JOB_PROFILE, writeStoryInput } from "../cli/demo-job";
import { runJob } from "../job/run";
import { type JobState } from "../job/tracker";
import { DEFAULT_RETRY } from "../job/request";

const { values } = parseArgs({
  options: {
    "time-scale": { type: "string", default: "10" },
    concurrency: { type: "string", default: "64" },
    tokens: { type: "string", default: "2000" },
    waves: { type: "string", default: "10" },
    "memory-seconds": { type: "string", default: "60" },
    "memory-only": { type: "boolean", default: false },
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

/** KEY's value in /proc/PID/status, in MB (VmRSS: resident now; VmHWM: the peak so far); null once it is gone. */
function procMB(pid: number, key: "VmRSS" | "VmHWM"): number | null {
  try {
    const m = new RegExp(`^${key}:\\s+(\\d+) kB`, "m").exec(fs.readFileSync(`/proc/${pid}/status`, "utf8"));
    return m ? (Number(m[1]) * 1024) / 1e6 : null;
  } catch {
    return null;
  }
}

/**
 * Resident memory of `gpuhost job` (dist/, its own process, as a user runs it) on an input of LINES
 * lines (64-token completions: 10,000 of them outlast a minute) for SECONDS after its scan: the peak (VmHWM, the
 * scan included), the resident set when the run began and at its end, then Ctrl-C.
 */
async function memoryRun(url: string, lines: number, seconds: number, nodeOptions: string[] = []) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "gpuhost-job-mem-"));
  const input = path.join(dir, "in.jsonl");
  writeStoryInput(input, lines, 64);
  const size = fs.statSync(input).size;
  const entry = path.join(__dirname, "..", "dist", "cli", "gpuhost.js");
  if (!fs.existsSync(entry)) throw new Error(`${entry} is missing: npx tsc -p . first`);
  const args = ["job", "--input", input, "--output", path.join(dir, "out.jsonl"), "--endpoint", url];
  const child = spawn(process.execPath, [...nodeOptions, entry, ...args, "--concurrency", String(concurrency)], {
    stdio: ["ignore", "ignore", "pipe"],
  });
  const pid = child.pid!;
  const started = performance.now();
  let scanSeconds: number | null = null;
  let atRunStart: number | null = null;
  let peak = 0;
  let last: number | null = null;
  child.stderr.on("data", (d: Buffer) => {
    if (scanSeconds !== null || !/job: [\d,]+ requests/.test(d.toString())) return;
    scanSeconds = (performance.now() - started) / 1000;
    atRunStart = procMB(pid, "VmRSS");
    setTimeout(() => child.kill("SIGINT"), seconds * 1000);
  });
  const sampler = setInterval(() => {
    peak = Math.max(peak, procMB(pid, "VmHWM") ?? 0);
    last = procMB(pid, "VmRSS") ?? last;
  }, 100);
  const code = await new Promise((resolve) => child.on("exit", (c, signal) => resolve(c ?? signal)));
  clearInterval(sampler);
  const recorded = fs.readFileSync(path.join(dir, "out.jsonl"), "utf8").split("\n").length - 1;
  fs.rmSync(dir, { recursive: true, force: true });
  return {
    lines,
    nodeOptions: nodeOptions.join(" "),
    exit: code,
    inputMB: size / 1e6,
    scanSeconds,
    rssAtRunStartMB: atRunStart,
    peakRssMB: peak,
    rssAtEndMB: last,
    recorded,
  };
}

/** The job against gate bench at the same concurrency on the same simulator, and each one's client CPU. */
async function fidelity(url: string) {
  const cert = await benchJobShape(url, concurrency, tokens, timeScale);
  const job = await jobRun(url, concurrency * Number(values.waves));
  const gap = job.sustained / cert.sustained - 1;
  console.log(`job vs bench: ${(gap * 100).toFixed(2)} % (target within 3 %)`);
  return {
    benchSustainedTokensPerSecond: cert.sustained,
    benchCertificate: cert.certificate,
    jobSustainedTokensPerSecond: job.sustained,
    jobFailed: job.failed,
    relativeGap: gap,
    benchClientCpuSecondsPerMillionTokens: (cert.cpuSeconds / cert.tokens) * 1e6,
    jobClientCpuSecondsPerMillionTokens: (job.cpuSeconds / job.tokens) * 1e6,
  };
}

async function main(): Promise<void> {
  const sim = await simulator();
  try {
    const faithful = values["memory-only"] ? {} : await fidelity(sim.url);
    const memory = [];
    const seconds = Number(values["memory-seconds"]);
    for (const lines of [10_000, 1_000_000]) memory.push(await memoryRun(sim.url, lines, seconds));
    // V8 grows its heap lazily, so RSS says little of what is held: the same run under a heap cap a
    // Map of the million ids alone (62 MB) would nearly fill must still run (exit 130 at the Ctrl-C).
    memory.push(await memoryRun(sim.url, 1_000_000, seconds, ["--max-old-space-size=64"]));
    const out = {
      machine: `${os.cpus().length} cores, load ${os.loadavg()[0].toFixed(1)} at the end`,
      profile: STORY_JOB_PROFILE,
      timeScale,
      concurrency,
      tokens,
      ...faithful,
      memory,
    };
    console.log(JSON.stringify(out, null, 2));
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
