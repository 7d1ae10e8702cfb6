/**
 * `gpuhost job`: the story's last step, the generation job itself, run on the stack it provisioned:
 * an OpenAI batch-input file in, batch-output and errors files out (job/batch-file.ts), resumable by
 * running the same command again, aimed and judged by the stack's outputs (job/aim.ts, forecast.ts).
 */
import * as fs from "node:fs";
import { MAX_TIMER_SECONDS } from "../gate/transport/timers";
import { aimFromOutputs, type JobAim } from "../job/aim";
import { JobFileError } from "../job/batch-file";
import { jobExposition, summaryText } from "../job/report";
import { DEFAULT_RETRY } from "../job/request";
import { runJob } from "../job/run";
import { type JobState } from "../job/tracker";
import { writeTextfile } from "../components/drift/metrics";
import {
  API_KEY_FLAGS,
  API_KEY_USAGE,
  apiKeyOption,
  defaultIo,
  EXIT,
  runCommand,
  UsageError,
  type CliIo,
} from "./common";
import { textfileDir } from "./drift";
import type { CommandSpec, Values } from "./options";

export const JOB = {
  name: "job",
  about: `Runs an OpenAI batch-input file (custom_id, method, url, body; /v1/chat/completions and
/v1/completions) against the stack's endpoint and writes batch-output lines (id, custom_id, response,
error) to --output, failed requests to --errors. Run the same command again after a crash, kill -9 or
Ctrl-C and it continues: each custom_id is recorded exactly once (a request in flight at the stop is
sent again). With --stack (or --outputs), the endpoint (the fleet's router, or the host's active
service), the concurrency (the measured knee) and the certified tok/s the job is held to come from the
stack's outputs, and the API key from the stack's secret config when neither of these gives one:
${API_KEY_USAGE}`,
  flags: {
    input: { type: "path", required: true, description: "the batch-input JSONL file" },
    output: { type: "path", required: true, description: "the batch-output JSONL file (appended; the checkpoint)" },
    errors: { type: "path", description: "the failed requests' JSONL file (default: OUTPUT with .errors.jsonl)" },
    stack: { type: "string", value: "NAME", description: "aim the job by this stack's outputs (pulumi stack output)" },
    outputs: {
      type: "path",
      description: "aim the job by a stack's outputs saved as JSON (pulumi stack output --json), instead of --stack",
    },
    endpoint: { type: "string", value: "URL", description: "the server's base URL (default: the stack's)" },
    concurrency: { type: "integer", max: 65_536, description: "requests in flight (default: the stack's knee)" },
    throughput: {
      type: "number",
      value: "TOKS",
      description: "the certified sustained tok/s the job is held to (default: the stack's)",
    },
    hosts: { type: "integer", description: "hosts behind the endpoint (default: the stack's; 1)" },
    "time-scale": {
      type: "number",
      value: "X",
      description: "a simulated host's seconds per wall second (default: the stack's outputs say; 1)",
    },
    deadline: { type: "string", value: "DATE", description: "when the job must be done (2026-12-31 or an ISO time)" },
    attempts: { type: "integer", max: 100, default: DEFAULT_RETRY.attempts, description: "tries per request" },
    "request-timeout": {
      type: "number",
      value: "S",
      max: MAX_TIMER_SECONDS,
      default: DEFAULT_RETRY.requestTimeoutMs / 1000,
      description: "the most one try may take (a stalled request is cut and retried)",
    },
    "outage-limit": {
      type: "number",
      value: "S",
      max: MAX_TIMER_SECONDS,
      default: 600,
      description: "stop when no request succeeded for this long (the job waits for the server until then)",
    },
    "progress-every": { type: "number", value: "S", default: 10, description: "seconds between progress lines" },
    "summary-every": { type: "number", value: "MIN", default: 10, description: "minutes between summaries" },
    window: { type: "number", value: "S", default: 300, description: "the live tok/s is over the last S seconds" },
    textfile: {
      type: "path",
      value: "DIR",
      description: "also write the job's state as Prometheus metrics to DIR/gpuhost-job-<stack>.prom",
    },
    ...API_KEY_FLAGS,
  },
  exits: [
    [EXIT.ok, "every request is recorded (in the output, or the errors file)"],
    [EXIT.failed, "stopped: the server did not answer within --outage-limit, or an error (run it again to continue)"],
    [
      EXIT.usage,
      "usage, or an input that cannot run (bad line, duplicate custom_id, a model the stack does not serve)",
    ],
    [EXIT.interrupted, "interrupted: what was recorded is kept; run the same command again to continue"],
  ],
} as const satisfies CommandSpec;

type JobValues = Values<typeof JOB.flags>;

/** --deadline as epoch ms. */
function deadlineOf(text: string | undefined): number | null {
  if (text === undefined) return null;
  const ms = /^\d{4}-\d{2}-\d{2}([T ][\d:.]+(Z|[+-]\d{2}:?\d{2})?)?$/.test(text) ? Date.parse(text) : NaN;
  if (!Number.isFinite(ms))
    throw new UsageError(`--deadline takes a date like 2026-12-31 or 2026-12-31T18:00Z, got ${JSON.stringify(text)}`);
  return ms;
}

/** What the job asks of the engine; a test hands in the real engine on its throwaway stack's backend. */
export interface JobDeps {
  /** Runs the engine (default: engine/pulumi.ts runPulumi, on the backend stackAccess picks). */
  runPulumi?: typeof import("../engine/pulumi").runPulumi;
}

/**
 * The stack's outputs: from --outputs FILE, or the engine's `pulumi stack output --json`; with --stack,
 * also the stack's API key (its secret `gpuhost:apiKey`, read through the engine's stdout: never in an
 * argv or environment), absent when the stack sets none or its secrets cannot be opened here.
 */
async function stackOutputs(
  values: JobValues,
  deps: JobDeps,
): Promise<{ name: string; outputs: unknown; apiKey?: string } | null> {
  if (values.outputs !== undefined) {
    if (values.stack !== undefined) throw new UsageError("--outputs and --stack both name the stack: give one");
    try {
      return { name: values.outputs, outputs: JSON.parse(fs.readFileSync(values.outputs, "utf8")) };
    } catch (e) {
      throw new UsageError(`--outputs ${values.outputs}: ${(e as Error).message}`);
    }
  }
  if (values.stack === undefined) return null;
  const engine = await import("../engine/pulumi");
  // An engine handed in brings its own backend and secrets (drift's asGiven).
  const access = deps.runPulumi ? { opts: {}, problem: undefined } : await engine.stackAccess(values.stack);
  if (access.problem) throw new UsageError(access.problem);
  const run = deps.runPulumi ?? engine.runPulumi;
  const out = await run(["stack", "output", "--json", "--stack", values.stack], access.opts);
  if (out.code !== 0) throw new UsageError(`pulumi stack output --stack ${values.stack} failed: ${out.stderr.trim()}`);
  const key = await run(["config", "get", "gpuhost:apiKey", "--stack", values.stack], access.opts);
  const apiKey = key.code === 0 && key.stdout.trim() !== "" ? key.stdout.trim() : undefined;
  return { name: values.stack, outputs: JSON.parse(out.stdout), apiKey };
}

/** The aim: the stack's, each part overridden by its flag; without a stack, the flags must say it all. */
async function aimOf(
  values: JobValues,
  deps: JobDeps,
): Promise<{ aim: JobAim; stack: string; fromStack: boolean; apiKey?: string }> {
  const source = await stackOutputs(values, deps);
  const base = source ? aimFromOutputs(source.outputs, source.name) : null;
  const endpoint = values.endpoint ?? base?.endpoint;
  const concurrency = values.concurrency ?? base?.concurrency;
  if (endpoint === undefined) throw new UsageError("--endpoint is required without --stack or --outputs");
  if (concurrency === undefined) throw new UsageError("--concurrency is required without --stack or --outputs");
  const aim: JobAim = {
    endpoint,
    concurrency,
    model: base?.model ?? "",
    certifiedTokensPerSecond: values.throughput ?? base?.certifiedTokensPerSecond ?? 0,
    hosts: values.hosts ?? base?.hosts ?? 1,
    timeScale: values["time-scale"] ?? base?.timeScale ?? 1,
    against: values.endpoint !== undefined || !base ? endpoint : base.against,
  };
  const fromStack = base !== null && values.endpoint === undefined;
  return { aim, stack: source?.name ?? "endpoint", fromStack, apiKey: fromStack ? source?.apiKey : undefined };
}

export function jobMain(argv: string[], io: CliIo = defaultIo(), deps: JobDeps = {}): Promise<number> {
  return runCommand(JOB, argv, io, async (values, signal) => {
    const given = apiKeyOption(values);
    const deadlineMs = deadlineOf(values.deadline);
    const dir = values.textfile === undefined ? undefined : textfileDir(values.textfile);
    const { aim, stack, fromStack, apiKey: stackKey } = await aimOf(values, deps);
    // GPUHOST_API_KEY or --api-key-file first; else the key of the stack the job is aimed at.
    const apiKey = given ?? stackKey;
    const errors = values.errors ?? `${values.output.replace(/\.jsonl?$/, "")}.errors.jsonl`;
    if (values["summary-every"] * 60 > MAX_TIMER_SECONDS) throw new UsageError("--summary-every is too long");
    let lastSummary = Date.now();
    // One write after another, so a tick's file never lands after the final one; a failed write is
    // said, not thrown (it would end the job as an unhandled rejection), and the last is awaited: an
    // interrupted command exits at once once it returns.
    let textfile = Promise.resolve();
    const publish = (s: JobState, stopped: string | null, final: boolean, counters: string | null = null) => {
      if (dir)
        textfile = textfile
          .then(async () =>
            writeTextfile(dir, stack, await jobExposition(s, stack, stopped, Date.now()), jobTextfileName(stack)),
          )
          .then(
            () => undefined,
            (e: unknown) => void io.stderr.write(`gpuhost job: --textfile ${dir}: ${(e as Error).message}\n`),
          );
      if (final || Date.now() - lastSummary >= values["summary-every"] * 60_000) {
        lastSummary = Date.now();
        io.stdout.write(`${summaryText(s, aim.against, stopped, counters)}\n`);
      }
    };
    const result = await usageOnBadInput(
      runJob(
        {
          input: values.input,
          output: values.output,
          errors,
          endpoint: aim.endpoint,
          apiKey,
          concurrency: aim.concurrency,
          // The stack's served model is what the requests must name; without a stack, the server's list.
          served: fromStack && aim.model ? [aim.model] : undefined,
          policy: { ...DEFAULT_RETRY, attempts: values.attempts, requestTimeoutMs: values["request-timeout"] * 1000 },
          outageMs: values["outage-limit"] * 1000,
          plan: { certifiedTokensPerSecond: aim.certifiedTokensPerSecond || null, hosts: aim.hosts, deadlineMs },
          timeScale: aim.timeScale,
          windowMs: values.window * 1000,
          progressEveryMs: values["progress-every"] * 1000,
          say: (line) => io.stderr.write(`gpuhost job: ${line}\n`),
          onTick: (s) => publish(s, null, false),
        },
        signal,
      ),
    );
    publish(result, result.stopped, true, result.serverCounters);
    await textfile;
    if (result.stopped !== null) io.stderr.write(`gpuhost job: stopped: ${result.stopped}\n`);
    return result.stopped === null ? EXIT.ok : signal.aborted ? EXIT.interrupted : EXIT.failed;
  });
}

/** An input the job cannot run is a usage error (exit 2), said as the job said it. */
async function usageOnBadInput<T>(p: Promise<T>): Promise<T> {
  try {
    return await p;
  } catch (e) {
    if (e instanceof JobFileError) throw new UsageError(e.message);
    throw e;
  }
}

/** The job's textfile beside drift's, one per stack. */
export const jobTextfileName = (stack: string): string => `gpuhost-job-${stack.replace(/[^A-Za-z0-9_.-]/g, "_")}.prom`;
