/**
 * `gpuhost verify | bench | plan`: the gate's engine outside Pulumi. Each *Main returns an exit
 * status; cli/gpuhost.ts dispatches to them. JSON goes to stdout (or a file), progress to stderr.
 */
import { writeFileSync } from "node:fs";
import { parseArgs } from "node:util";
import { bench, type BenchProgress } from "./bench";
import { capacity, type CapacityPlan } from "./capacity";
import { benchChart } from "./chart";
import { WorkloadSchema } from "./schema";
import { verify } from "./verify";

export interface CliIo {
  stdout: { write(s: string): unknown; isTTY?: boolean };
  stderr: { write(s: string): unknown; isTTY?: boolean };
}

const defaultIo = (): CliIo => ({ stdout: process.stdout, stderr: process.stderr });

class UsageError extends Error {}

function numberOption(name: string, value: string | undefined): number | undefined {
  if (value === undefined) return undefined;
  const n = Number(value);
  if (!Number.isFinite(n) || n <= 0)
    throw new UsageError(`--${name} must be a positive number, got ${JSON.stringify(value)}`);
  return n;
}

function listOption(name: string, value: string | undefined): number[] | undefined {
  if (value === undefined) return undefined;
  const list = value
    .split(",")
    .map((v) => v.trim())
    .filter((v) => v !== "");
  const nums = list.map(Number);
  if (nums.length === 0 || nums.some((n) => !Number.isInteger(n) || n <= 0)) {
    throw new UsageError(`--${name} must be a comma-separated list of positive integers, got ${JSON.stringify(value)}`);
  }
  return nums;
}

async function main(io: CliIo, usage: string, body: () => Promise<number>): Promise<number> {
  try {
    return await body();
  } catch (err) {
    if (err instanceof UsageError || (err as { code?: string }).code?.startsWith("ERR_PARSE_ARGS")) {
      io.stderr.write(`${(err as Error).message}\n${usage}\n`);
      return 2;
    }
    io.stderr.write(`error: ${(err as Error).message}\n`);
    return 1;
  }
}

const VERIFY_USAGE =
  "usage: gpuhost verify --endpoint URL [--model ID] [--deadline SECONDS] [--thinking-off] [--known-answer TEXT --prompt TEXT] [--api-key KEY] [--json]";

export function verifyMain(argv: string[], io: CliIo = defaultIo()): Promise<number> {
  return main(io, VERIFY_USAGE, async () => {
    const { values } = parseArgs({
      args: argv,
      options: {
        endpoint: { type: "string" },
        model: { type: "string" },
        deadline: { type: "string" },
        "thinking-off": { type: "boolean" },
        "known-answer": { type: "string" },
        prompt: { type: "string" },
        "api-key": { type: "string" },
        json: { type: "boolean" },
      },
      strict: true,
    });
    if (!values.endpoint) throw new UsageError("--endpoint is required");
    const result = await verify(
      { url: values.endpoint, model: values.model, apiKey: values["api-key"] ?? process.env.GPUHOST_API_KEY },
      {
        deadlineSeconds: numberOption("deadline", values.deadline),
        thinkingToggle: values["thinking-off"] ?? undefined,
        knownAnswer: values["known-answer"],
        probePrompt: values.prompt,
      },
      { onPhase: (phase, detail) => io.stderr.write(`[verify] ${phase}: ${detail}\n`) },
    );
    if (values.json) {
      io.stdout.write(
        JSON.stringify(
          {
            ready: result.ready,
            phase: result.phase,
            elapsedSeconds: result.elapsedSeconds,
            diagnosis: result.diagnosis,
            model: result.model,
            phases: result.phases,
            probe: result.probe,
            lastResponse: result.lastResponse,
            lastError: result.lastError,
          },
          null,
          2,
        ) + "\n",
      );
    } else if (result.ready) {
      io.stdout.write(
        `ready: ${result.model} generated (${result.probe?.completionTokens} tokens, finish_reason ${result.probe?.finishReason}) after ${result.elapsedSeconds.toFixed(2)} s\n`,
      );
    } else {
      io.stdout.write(`NOT ready\n${result.diagnosis}\n`);
    }
    return result.ready ? 0 : 1;
  });
}

const BENCH_USAGE =
  "usage: gpuhost bench --endpoint URL [--model ID] [--concurrency 8,16,32,48,64] [--max-tokens 2048,4096] [--sweep-max-tokens N] [--prompts N] [--requests-per-concurrency N] [--api-key KEY] [--json FILE] [--chart FILE.svg]";

export function benchMain(argv: string[], io: CliIo = defaultIo()): Promise<number> {
  return main(io, BENCH_USAGE, async () => {
    const { values } = parseArgs({
      args: argv,
      options: {
        endpoint: { type: "string" },
        model: { type: "string" },
        concurrency: { type: "string" },
        "max-tokens": { type: "string" },
        "sweep-max-tokens": { type: "string" },
        prompts: { type: "string" },
        "requests-per-concurrency": { type: "string" },
        "api-key": { type: "string" },
        json: { type: "string" },
        chart: { type: "string" },
      },
      strict: true,
    });
    if (!values.endpoint) throw new UsageError("--endpoint is required");
    const progress = progressPrinter(io);
    const result = await bench(
      { url: values.endpoint, model: values.model, apiKey: values["api-key"] ?? process.env.GPUHOST_API_KEY },
      {
        concurrency: listOption("concurrency", values.concurrency) as [number, ...number[]] | undefined,
        singleRequestMaxTokens: listOption("max-tokens", values["max-tokens"]),
        sweepMaxTokens: numberOption("sweep-max-tokens", values["sweep-max-tokens"]),
        singleRequestPrompts: numberOption("prompts", values.prompts),
        requestsPerConcurrency: numberOption("requests-per-concurrency", values["requests-per-concurrency"]),
      },
      { onProgress: progress },
    );
    progress.finish();
    const { samples, ...summary } = result;
    if (values.json) writeFileSync(values.json, JSON.stringify({ ...summary, samples }, null, 1) + "\n");
    if (values.chart) writeFileSync(values.chart, benchChart(summary));
    io.stdout.write(benchTable(summary));
    return summary.sustainedOutputTokensPerSecond > 0 && summary.complete ? 0 : 1;
  });
}

/** Live progress: one rewritten line on a terminal, one line per stage and level otherwise. */
function progressPrinter(io: CliIo): ((e: BenchProgress) => void) & { finish(): void } {
  const tty = io.stderr.isTTY === true;
  let pending = false;
  const fn = (e: BenchProgress) => {
    if (e.kind === "request") {
      if (!tty) return;
      const rate = e.elapsedSeconds > 0 ? e.tokens / e.elapsedSeconds : 0;
      io.stderr.write(
        `\r\x1b[K[bench] ${e.label}: ${e.done}/${e.total} requests, ${e.errors} errors, ${e.tokens} tokens (${rate.toFixed(0)} tok/s since start)`,
      );
      pending = true;
      return;
    }
    if (pending) io.stderr.write("\n");
    pending = false;
    if (e.kind === "stage") io.stderr.write(`[bench] ${e.stage}: ${e.detail}\n`);
    else
      io.stderr.write(
        `[bench] concurrency ${e.summary.concurrency}: ${e.summary.outputTokensPerSecond.toFixed(1)} tok/s, ${e.summary.errors}/${e.summary.requests} errors, TTFT p50 ${sec(e.summary.ttftP50Seconds)}\n`,
      );
  };
  return Object.assign(fn, {
    finish() {
      if (pending) io.stderr.write("\n");
    },
  });
}

function sec(v: number | null): string {
  return v === null ? "n/a" : `${v.toFixed(3)} s`;
}

function benchTable(s: Omit<import("./bench").BenchResult, "samples">): string {
  const lines = [
    `model ${s.model}${s.complete ? "" : " (INCOMPLETE)"}${s.warmupError ? `; warmup failed: ${s.warmupError}` : ""}`,
  ];
  for (const r of s.singleRequest) {
    lines.push(
      `single max_tokens ${r.maxTokens}: ${r.outputTokensPerSecond.toFixed(1)} tok/s, TTFT p50 ${sec(r.ttftP50Seconds)}, E2E p50 ${sec(r.e2eP50Seconds)}, errors ${r.errors}/${r.requests}`,
    );
  }
  lines.push("concurrency  tok/s       req/s    TTFT p50   ITL p50    E2E p50    errors");
  for (const l of s.sweep) {
    lines.push(
      `${String(l.concurrency).padEnd(12)} ${l.outputTokensPerSecond.toFixed(1).padEnd(11)} ${l.requestsPerSecond.toFixed(2).padEnd(8)} ${sec(l.ttftP50Seconds).padEnd(10)} ${sec(l.itlP50Seconds).padEnd(10)} ${sec(l.e2eP50Seconds).padEnd(10)} ${l.errors}/${l.requests}`,
    );
  }
  lines.push(
    `saturation at concurrency ${s.saturationConcurrency ?? "n/a"}; sustained ${s.sustainedOutputTokensPerSecond.toFixed(1)} tok/s`,
  );
  if (s.acceptanceLength !== null) lines.push(`speculative acceptance length ${s.acceptanceLength.toFixed(2)}`);
  return lines.join("\n") + "\n";
}

const PLAN_USAGE =
  "usage: gpuhost plan --throughput TOKS [--completions N] [--tokens T] [--hosts H] [--deadline-days D] [--bytes-per-token B] [--json]";

export function planMain(argv: string[], io: CliIo = defaultIo()): Promise<number> {
  return main(io, PLAN_USAGE, async () => {
    const { values } = parseArgs({
      args: argv,
      options: {
        throughput: { type: "string" },
        completions: { type: "string" },
        tokens: { type: "string" },
        hosts: { type: "string" },
        "deadline-days": { type: "string" },
        "bytes-per-token": { type: "string" },
        json: { type: "boolean" },
      },
      strict: true,
    });
    if (values.throughput === undefined) throw new UsageError("--throughput is required");
    const throughput = Number(values.throughput);
    if (!Number.isFinite(throughput) || throughput < 0)
      throw new UsageError(`--throughput must be a number >= 0, got ${JSON.stringify(values.throughput)}`);
    const parsed = WorkloadSchema.safeParse({
      completions: numberOption("completions", values.completions),
      outputTokensPerCompletion: numberOption("tokens", values.tokens),
      hosts: numberOption("hosts", values.hosts),
      deadlineDays: numberOption("deadline-days", values["deadline-days"]),
      bytesPerToken: numberOption("bytes-per-token", values["bytes-per-token"]),
    });
    if (!parsed.success)
      throw new UsageError(parsed.error.issues.map((i) => `${i.path.join(".")}: ${i.message}`).join("; "));
    const plan = capacity(throughput, parsed.data);
    io.stdout.write(values.json ? JSON.stringify(plan, null, 2) + "\n" : planText(plan));
    return 0;
  });
}

function days(v: number | null): string {
  return v === null ? "never (zero throughput)" : `${v.toFixed(1)} days`;
}

function planText(p: CapacityPlan): string {
  return (
    [
      `workload: ${p.completions.toLocaleString("en-US")} completions x ${p.outputTokensPerCompletion.toLocaleString("en-US")} tokens = ${p.totalOutputTokens.toLocaleString("en-US")} tokens`,
      `throughput: ${p.sustainedOutputTokensPerSecond.toLocaleString("en-US")} tok/s per host = ${Math.round(p.tokensPerDayPerHost).toLocaleString("en-US")} tokens/day`,
      `one host: ${days(p.daysOnOneHost)}`,
      `${p.hosts} host(s): ${days(p.daysOnHosts)}`,
      `hosts for a ${p.deadlineDays}-day deadline: ${p.hostsForDeadline ?? "n/a"}`,
      `raw storage: ${p.rawStorageGigabytes.toFixed(2)} GB at ${p.bytesPerToken} bytes/token`,
    ].join("\n") + "\n"
  );
}
