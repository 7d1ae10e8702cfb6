/**
 * `npm run demo -- --job`: the story's job rehearsed on the simulated story host at time scale. The
 * host is measured the way `pulumi up` measures it (gate bench at the job's concurrency: the certified
 * sustained tok/s), the outputs a stack would export for that measurement are written, and a few
 * thousand requests of the story's job (the benchmark's own chat and code prompts, ~2,000 tokens, no
 * thinking) run through `gpuhost job` as its own process, killed with SIGKILL half-way, and run again
 * with the same command; then the live comparison with the plan, and the projection for the whole
 * 900,000-completion job. bench/job-throughput.ts uses the same pieces to measure the job's fidelity.
 */
import { spawn } from "node:child_process";
import * as fs from "node:fs";
import * as path from "node:path";
import { bench } from "../gate/index";
import { capacity } from "../gate/plan/capacity";
import { shapedRequest, WorkloadShapeSchema } from "../gate/base/workload";
import { timeNote } from "../gate/reports/outputs";
import { startSimulator, type RunningSimulator } from "../simulator/index";

/** The story host's simulator profile (simulator/profiles). */
export const STORY_JOB_PROFILE = "kimi-k2.6-8x-rtx-pro-6000";
export const STORY_MODEL = "moonshotai/Kimi-K2.6";

/** The story's job, as the benchmark sends it: chat and code prompts, thinking off, exact lengths. */
export function storyShape(outputTokens: number) {
  return WorkloadShapeSchema.parse({
    mix: { chat: 1, code: 1 },
    thinking: false,
    outputTokens: { distribution: "fixed", tokens: outputTokens },
  });
}

/** N batch-input lines of the story's job, the i-th the benchmark's i-th request. */
export function writeStoryInput(file: string, n: number, outputTokens: number, model = STORY_MODEL): void {
  const shape = storyShape(outputTokens);
  const fd = fs.openSync(file, "w");
  try {
    for (let i = 0; i < n; i++) {
      const r = shapedRequest(shape, i);
      const body = { model, messages: [{ role: "user", content: r.prompt }], max_tokens: r.maxTokens, ...r.extraBody };
      fs.writeSync(
        fd,
        `${JSON.stringify({ custom_id: `story-${i}`, method: "POST", url: "/v1/chat/completions", body })}\n`,
      );
    }
  } finally {
    fs.closeSync(fd);
  }
}

/** The story host, simulated, once it has loaded (330-630 s of host time). */
export async function storyHost(timeScale: number): Promise<RunningSimulator> {
  const sim = await startSimulator({
    profile: STORY_JOB_PROFILE,
    port: 0,
    timeScale,
    log: () => undefined,
    onExit: () => undefined,
  });
  for (;;) {
    const t = (await (await fetch(`${sim.url}/sim/truth`).catch(() => null))?.json().catch(() => null)) as {
      status?: string;
    } | null;
    if (t?.status === "ready") return sim;
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** What `pulumi up` certifies for the service: gate bench at CONCURRENCY with the job's shape. */
export async function benchJobShape(url: string, concurrency: number, outputTokens: number, timeScale: number) {
  const cpu = process.cpuUsage();
  const result = await bench(
    { url, model: STORY_MODEL },
    {
      singleRequestMaxTokens: [],
      concurrency: [concurrency],
      sweepMaxTokens: outputTokens,
      requestsPerConcurrency: 2,
      repeats: 1,
      mix: { chat: 1, code: 1 },
      thinking: false,
      requestTimeoutSeconds: 7200,
      // Reported, not required: on a machine other developers load, the client check can fail (the
      // process descheduled) while the figure holds; the demo prints the certificate either way.
      certification: { require: false },
    },
    { timeScale },
  );
  const used = process.cpuUsage(cpu);
  const level = result.sweep[0];
  const failed = level?.certificate?.checks.filter((c) => !c.ok).map((c) => c.detail) ?? [];
  return {
    sustained: result.sustainedOutputTokensPerSecond,
    certificate: level?.certificate?.certified
      ? "certified"
      : `not certified: ${failed.join("; ") || "no certificate"}`,
    tokens: level?.completionTokens ?? 0,
    cpuSeconds: (used.user + used.system) / 1e6,
    result,
  };
}

/** The outputs a stack exports for that measurement (stack/outputs.ts, the fields `gpuhost job` reads). */
export function writeStackOutputs(
  file: string,
  url: string,
  concurrency: number,
  sustained: number,
  timeScale: number,
) {
  const host = {
    activeService: "autoregressive",
    endpoint: url,
    model: STORY_MODEL,
    saturationConcurrency: concurrency,
    sustainedOutputTokensPerSecond: sustained,
    sweep: [{ concurrency }],
    timeNote: timeNote(timeScale),
  };
  fs.writeFileSync(file, JSON.stringify({ gpuHosts: { story: host }, fleet: null }, null, 1));
}

/** `gpuhost job ARGS` as its own process; with killAtLines, SIGKILL once the output holds that many lines. */
export function jobProcess(
  args: string[],
  say: (line: string) => void,
  killAt?: { file: string; lines: number },
): Promise<{ code: number | null; signal: NodeJS.Signals | null }> {
  const ts = __filename.endsWith(".ts");
  const entry = path.join(__dirname, `gpuhost${ts ? ".ts" : ".js"}`);
  const child = spawn(process.execPath, [...(ts ? ["--import", "tsx"] : []), entry, "job", ...args], {
    stdio: ["ignore", "pipe", "pipe"],
  });
  const relay = (d: Buffer) =>
    d
      .toString()
      .split("\n")
      .filter(Boolean)
      .forEach((l) => say(`  ${l}`));
  child.stdout.on("data", relay);
  child.stderr.on("data", relay);
  const poll = killAt
    ? setInterval(() => {
        const n = fs.existsSync(killAt.file) ? fs.readFileSync(killAt.file, "utf8").split("\n").length - 1 : 0;
        if (n >= killAt.lines) {
          clearInterval(poll);
          say(`  -- kill -9 ${child.pid} with ${n} lines in the output --`);
          child.kill("SIGKILL");
        }
      }, 50)
    : undefined;
  return new Promise((resolve) =>
    child.on("exit", (code, signal) => {
      clearInterval(poll);
      resolve({ code, signal });
    }),
  );
}

export interface JobDemoOptions {
  timeScale: number;
  requests: number;
  outputTokens: number;
  concurrency: number;
  outDir: string;
  say: (line: string) => void;
}

/** The rehearsal: measure, run, kill half-way, run again, and project the whole job. */
export async function rehearseJob(o: JobDemoOptions): Promise<number> {
  fs.mkdirSync(o.outDir, { recursive: true });
  const files = (name: string) => path.join(o.outDir, name);
  for (const f of ["job-out.jsonl", "job-out.errors.jsonl"]) fs.rmSync(files(f), { force: true });
  o.say(`The story host (simulator profile ${STORY_JOB_PROFILE}), time scale ${o.timeScale}: loading...`);
  const sim = await storyHost(o.timeScale);
  try {
    o.say(
      `Certifying it as pulumi up does: gate bench at concurrency ${o.concurrency}, ${o.outputTokens}-token completions...`,
    );
    const cert = await benchJobShape(sim.url, o.concurrency, o.outputTokens, o.timeScale);
    o.say(`  sustained: ${Math.round(cert.sustained)} tok/s (host time); ${cert.certificate}`);
    writeStackOutputs(files("job-outputs.json"), sim.url, o.concurrency, cert.sustained, o.timeScale);
    writeStoryInput(files("job-in.jsonl"), o.requests, o.outputTokens);
    const args = [
      "--outputs",
      files("job-outputs.json"),
      "--input",
      files("job-in.jsonl"),
      "--output",
      files("job-out.jsonl"),
    ];
    const deadline = new Date(Date.now() + 7 * 86_400_000).toISOString().slice(0, 10);
    // Every request of a closed loop at exact lengths ends in waves of 64: a window of several waves.
    const window = String(Math.max(30, Math.round(1200 / o.timeScale)));
    const live = [...args, "--progress-every", "5", "--window", window, "--deadline", deadline];
    o.say(`\n$ gpuhost job ${args.join(" ")} (${o.requests} requests; killed with SIGKILL half-way)`);
    await jobProcess(live, o.say, { file: files("job-out.jsonl"), lines: Math.floor(o.requests / 2) });
    o.say(`\n$ gpuhost job ${args.join(" ")} (the same command again: it continues)`);
    const said: string[] = [];
    const again = await jobProcess(live, (line) => (said.push(line), o.say(line)));
    const rate = /throughput: ([\d,]+) tok\/s/.exec(said.join("\n"))?.[1];
    o.say(
      projection(files("job-out.jsonl"), cert.sustained, rate === undefined ? null : Number(rate.replace(/,/g, ""))),
    );
    return again.code ?? 1;
  } finally {
    await sim.close();
  }
}

/** The 900,000-completion job planned from the certified figure and from what the job really got (capacity()). */
function projection(output: string, certified: number, jobRate: number | null): string {
  const lines = fs.readFileSync(output, "utf8").split("\n").filter(Boolean);
  const bytesPerCompletion = Buffer.byteLength(lines.join("\n")) / Math.max(1, lines.length);
  const at = (rate: number, what: string) => {
    const plan = capacity(rate, {});
    return `  at ${what} ${Math.round(rate)} tok/s: ${plan.daysOnOneHost?.toFixed(1)} days on one host; ${plan.hostsForDeadline} hosts for the ${plan.deadlineDays}-day deadline`;
  };
  const plan = capacity(certified, {});
  return [
    "",
    `The whole job: ${plan.completions.toLocaleString("en-US")} completions x ${plan.outputTokensPerCompletion.toLocaleString("en-US")} tokens (the story's):`,
    at(certified, "the stack's measured"),
    ...(jobRate === null ? [] : [at(jobRate, "the job's own")]),
    `  output: ${((bytesPerCompletion * plan.completions) / 1e9).toFixed(1)} GB at the ${Math.round(bytesPerCompletion).toLocaleString("en-US")} bytes per line this run wrote`,
  ].join("\n");
}
