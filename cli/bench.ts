/**
 * `gpuhost bench`: warmup, single requests and a concurrency sweep against an endpoint. The output
 * files are checked before the run (a long benchmark must not end in "cannot write"), the table is
 * printed before they are written, and the exit status says whether every level kept the error
 * budget (cli/README.md).
 */
import { accessSync, constants, statSync, writeFileSync } from "node:fs";
import * as path from "node:path";
import { bench, type BenchProgress, type BenchResult, type RunTotals } from "../gate/run/bench";
import { certificateText } from "../gate/judge/certificate";
import { levelName } from "../gate/judge/levels";
import { answerless as answerlessLevel } from "../gate/judge/saturation";
import { uncertifiedLevels, verdictOf, type VerdictInput } from "../gate/judge/verdict";
import { benchChart } from "../gate/reports/chart";
import { writeBenchJson } from "../gate/reports/bench-json";
import { benchCsv, csvPathFor } from "../gate/reports/csv";
import { duration } from "../gate/reports/duration";
import { BenchPlanSchema, CONCURRENCY_REASON, MAX_CONCURRENCY } from "../gate/base/schema";
import { MAX_TIMER_SECONDS } from "../gate/transport/timers";
import {
  API_KEY_FLAGS,
  API_KEY_USAGE,
  apiKeyOption,
  defaultIo,
  EXIT,
  workloadPlan,
  WORKLOAD_FLAGS,
  runCommand,
  schemaDefault,
  schemaIssues,
  UsageError,
  type CliIo,
} from "./common";
import type { CommandSpec } from "./options";

/** No served model's context reaches this many tokens; a larger cap is a typo. */
export const MAX_TOKENS_BOUND = 1_048_576;

const knob = (key: Parameters<typeof schemaDefault<typeof BenchPlanSchema>>[1]) => ({
  description: BenchPlanSchema.shape[key].description?.replace(/\.$/, "") ?? key,
  shownDefault: schemaDefault(BenchPlanSchema, key),
});

export const BENCH = {
  name: "bench",
  about: `Benchmark: a warmup, single requests at each --max-tokens, then a closed-loop sweep (--concurrency)
or an open loop of Poisson arrivals (--rate, requests per second), each level --repeats times. A
level whose error rate exceeds --error-budget is marked failed and never used for saturation or
sustained throughput. A rate the server keeps up with measured the offered load, not capacity;
one this client could not send on schedule measured the client, and is excluded. The deadline or
Ctrl-C stops it within seconds. ${API_KEY_USAGE}`,
  flags: {
    endpoint: {
      type: "string",
      value: "URL",
      required: true,
      description: "the server: an http(s) URL with a host, e.g. http://127.0.0.1:30000",
    },
    model: {
      type: "string",
      value: "ID",
      description: "the model; GET /v1/models must list it (default: the first the server lists)",
    },
    concurrency: { type: "integers", max: MAX_CONCURRENCY, maxReason: CONCURRENCY_REASON, ...knob("concurrency") },
    ...WORKLOAD_FLAGS,
    repeats: { type: "integer", ...knob("repeats") },
    "max-tokens": {
      type: "integers",
      value: "N[,N...]",
      max: MAX_TOKENS_BOUND,
      description:
        "the output length of every request: the sweep asks for the first, the single requests for each in turn",
      shownDefault: () =>
        `${schemaDefault(BenchPlanSchema, "singleRequestMaxTokens")()}: the sweep at ${schemaDefault(BenchPlanSchema, "sweepMaxTokens")()}`,
    },
    prompts: { type: "integer", ...knob("singleRequestPrompts") },
    "requests-per-concurrency": { type: "integer", ...knob("requestsPerConcurrency") },
    "error-budget": { type: "fraction", ...knob("errorBudget") },
    deadline: { type: "number", value: "SECONDS", max: MAX_TIMER_SECONDS, ...knob("deadlineSeconds") },
    "request-timeout": { type: "number", value: "SECONDS", max: MAX_TIMER_SECONDS, ...knob("requestTimeoutSeconds") },
    ...API_KEY_FLAGS,
    json: {
      type: "path",
      description:
        "write every sample as JSON there (streamed as it is written; each request's per-token gaps as a summary: count, mean, p50, p90, p99, max), and the levels as CSV beside it",
    },
    "all-gaps": {
      type: "boolean",
      description:
        "--json keeps every request's per-token gaps (itlSeconds, one number per token) instead of their summary",
    },
    chart: { type: "path", value: "FILE.svg", description: "write the sweep's chart there" },
  },
  exits: [
    [EXIT.ok, "ok (--rate: also a server that kept up with every rate)"],
    [EXIT.failed, "not ready / nothing measured / a rate the client could not offer on schedule / error"],
    [EXIT.usage, "usage"],
    [EXIT.errorBudget, "a sweep level broke the error budget"],
    [EXIT.incomplete, "the deadline cut the run"],
    [
      EXIT.uncertified,
      "a level was not certified (--certify require): its figures are excluded, the table names the failed checks",
    ],
    [EXIT.interrupted, "interrupted"],
  ],
} as const satisfies CommandSpec;

/** Refuses, before the run, an output path that could not be written at its end. */
export function checkWritable(option: string, file: string): void {
  const dir = path.dirname(path.resolve(file));
  let st;
  try {
    st = statSync(file);
  } catch {
    st = null;
  }
  if (st?.isDirectory()) throw new UsageError(`--${option} ${file} is a directory, not a file`);
  try {
    if (!statSync(dir).isDirectory()) throw new Error("not a directory");
    accessSync(st ? file : dir, constants.W_OK);
  } catch {
    throw new UsageError(`--${option} ${file} cannot be written (folder ${dir} missing or not writable)`);
  }
}

export function benchMain(argv: string[], io: CliIo = defaultIo()): Promise<number> {
  return runCommand(BENCH, argv, io, async (values, signal) => {
    if (values.concurrency && values.rate) throw new UsageError("--concurrency and --rate exclude each other");
    const plan = BenchPlanSchema.safeParse({
      ...workloadPlan(values),
      repeats: values.repeats,
      concurrency: values.concurrency,
      // One flag for the output length: a run never asks for 64 tokens alone and 2048 in the sweep.
      singleRequestMaxTokens: values["max-tokens"],
      sweepMaxTokens: values["max-tokens"]?.[0],
      singleRequestPrompts: values.prompts,
      requestsPerConcurrency: values["requests-per-concurrency"],
      errorBudget: values["error-budget"],
      deadlineSeconds: values.deadline,
      requestTimeoutSeconds: values["request-timeout"],
    });
    if (!plan.success) throw new UsageError(schemaIssues(plan.error));
    if (values.json) checkWritable("json", values.json);
    if (values.chart) checkWritable("chart", values.chart);
    const progress = progressPrinter(io);
    let result: BenchResult;
    try {
      result = await bench({ url: values.endpoint, model: values.model, apiKey: apiKeyOption(values) }, plan.data, {
        onProgress: progress,
        signal,
      });
    } finally {
      progress.finish();
    }
    const { samples: _samples, ...summary } = result;
    // The table first: whatever happens to the files, the measurements are on the screen.
    io.stdout.write(benchTable(summary));
    let writeFailed = false;
    const write = (option: string, file: string, text: () => string) =>
      writeWith(option, file, () => writeFileSync(file, text()));
    const writeWith = (option: string, file: string, writeIt: () => void) => {
      try {
        writeIt();
      } catch (err) {
        writeFailed = true;
        io.stderr.write(`--${option} ${file} could not be written: ${(err as Error).message}\n`);
      }
    };
    if (values.json) {
      // Streamed: a large run's report is more than one string can hold (gate/reports/bench-json.ts).
      const file = values.json;
      writeWith("json", file, () => writeBenchJson(file, result, { allGaps: values["all-gaps"] === true }));
      // The levels as CSV beside the JSON, for a spreadsheet.
      write("json", csvPathFor(values.json), () => benchCsv(summary.sweep));
    }
    if (values.chart) write("chart", values.chart, () => benchChart(summary));
    if (signal.aborted) return EXIT.interrupted;
    if (writeFailed) return EXIT.failed;
    return benchStatus(summary);
  });
}

/** The exit status a finished run's summary earns (cli/README.md). */
export function benchStatus(s: VerdictInput & Pick<BenchResult, "deadlinePassed">): number {
  // The verdict VerifiedGeneration, the comparison and the fleet judge by (gate/judge/verdict.ts),
  // as an exit status: a blown budget first (the levels it excluded may be why nothing else counts),
  // a server that went away next, then a deadline that cut the run, whatever it had measured by then.
  const verdict = verdictOf(s);
  if (!verdict.ok && verdict.kind === "error-budget") return EXIT.errorBudget;
  if (!verdict.ok && verdict.kind === "server-gone") return EXIT.failed;
  if (s.deadlinePassed) return EXIT.incomplete;
  if (uncertifiedLevels(s.sweep, s.plan).length > 0) return EXIT.uncertified;
  if (!verdict.ok) return EXIT.failed;
  return verdict.complete ? EXIT.ok : EXIT.incomplete;
}

/** A finished level's line: its throughput, errors and first-token time; an open level's sent, planned and achieved rates. */
function levelLine(l: Extract<BenchProgress, { kind: "level" }>["summary"]): string {
  const verdict = l.withinErrorBudget ? "" : ` FAILED: error rate ${(l.errorRate * 100).toFixed(1)} % over budget`;
  const name = l.mode === "open" ? levelName(l) : `concurrency ${l.level}`;
  const rate =
    l.mode === "open"
      ? `, sent ${l.sentRequestsPerSecond?.toFixed(2) ?? "n/a"} of ${l.plannedRequestsPerSecond?.toFixed(2) ?? "n/a"} req/s planned (dispatch lag p99 ${duration(l.dispatchLagP99Seconds)}${l.clientLimited ? ": the client fell behind" : ""}), achieved ${l.achievedRequestsPerSecond?.toFixed(2) ?? "n/a"} req/s`
      : "";
  return `[bench] ${name}: ${l.outputTokensPerSecond.toFixed(1)} tok/s, ${l.errors}/${l.requests} errors, TTFT p50 ${duration(l.ttftP50Seconds)}${rate}${verdict}`;
}

/**
 * Live progress: one rewritten line on a terminal; otherwise one line per stage and level. On any
 * output, a line at least every `intervalMs` (elapsed, requests and tokens so far), so a run that
 * waits on a hung request, or writes to a file, never goes quiet.
 */
export function progressPrinter(io: CliIo, intervalMs = 10_000): ((e: BenchProgress) => void) & { finish(): void } {
  const tty = io.stderr.isTTY === true;
  const started = performance.now();
  let pending = false;
  let lastLine = started;
  let now = "the models check";
  let totals: RunTotals = { requests: 0, errors: 0, tokens: 0 };
  const line = (text: string) => {
    if (pending) io.stderr.write("\n");
    pending = false;
    lastLine = performance.now();
    io.stderr.write(`${text}\n`);
  };
  const heartbeat = setInterval(
    () => {
      if (performance.now() - lastLine < intervalMs) return;
      const elapsed = (performance.now() - started) / 1000;
      line(
        `[bench] ${elapsed.toFixed(0)} s elapsed: ${totals.requests} requests done (${totals.errors} errors), ${totals.tokens} tokens so far; now: ${now}`,
      );
    },
    Math.min(1000, intervalMs),
  );
  heartbeat.unref();
  const fn = (e: BenchProgress) => {
    if (e.kind === "request") {
      totals = e.sinceStart;
      const rate = e.elapsedSeconds > 0 ? e.tokens / e.elapsedSeconds : 0;
      const text = `[bench] ${e.label}: ${e.done}/${e.total} requests, ${e.errors} errors, ${e.tokens} tokens (${rate.toFixed(0)} tok/s since start)`;
      now = `${e.label}, ${e.done}/${e.total} requests`;
      if (tty) {
        io.stderr.write(`\r\x1b[K${text}`);
        pending = true;
        lastLine = performance.now();
      } else if (performance.now() - lastLine >= intervalMs) line(text);
      return;
    }
    if (e.kind === "stage") {
      totals = e.sinceStart;
      now = `${e.stage} (${e.detail})`;
      line(`[bench] ${e.stage}: ${e.detail}`);
    } else line(levelLine(e.summary));
  };
  return Object.assign(fn, {
    finish() {
      clearInterval(heartbeat);
      if (pending) io.stderr.write("\n");
      pending = false;
    },
  });
}

export function benchTable(s: Omit<BenchResult, "samples">): string {
  const lines = [
    `model ${s.model}${s.complete ? "" : " (INCOMPLETE)"}${s.warmupError ? `; warmup failed: ${s.warmupError}` : ""}`,
  ];
  if (s.stopReason !== null) lines.push(`stopped: ${s.stopReason}`);
  if (s.modelMismatch !== null) lines.push(`WARNING: ${s.modelMismatch}`);
  for (const r of s.singleRequest) {
    lines.push(
      `single max_tokens ${r.maxTokens}: ${r.outputTokensPerSecond.toFixed(1)} tok/s, TTFT p50 ${duration(r.ttftP50Seconds)}, TTFA p50 ${duration(r.ttfaP50Seconds)}, E2E p50 ${duration(r.e2eP50Seconds)}, errors ${r.errors}/${r.requests}`,
    );
  }
  const open = s.mode === "open";
  lines.push(
    `${open ? "req/s offered" : "concurrency "} tok/s       req/s    TTFT p50   TTFA p50   ITL p50    E2E p50    errors   budget${open ? "  sent req/s  achieved req/s" : ""}`,
  );
  for (const l of s.sweep) {
    const ci = l.throughput.halfWidth === null ? "" : ` ± ${l.throughput.halfWidth.toFixed(1)}`;
    // Planned against sent (the client) before sent against achieved (the server): a level the
    // client fell behind on says nothing of the server, so it is marked so and nothing else.
    const server = l.keptUp === false ? " (saturated)" : l.keptUp ? " (kept up)" : "";
    const achieved = open
      ? `  ${(l.sentRequestsPerSecond?.toFixed(2) ?? "n/a").padEnd(10)}  ${l.achievedRequestsPerSecond?.toFixed(2) ?? "n/a"}${l.clientLimited ? ` (client fell behind: ${l.plannedRequestsPerSecond?.toFixed(2) ?? "n/a"} planned, dispatch lag p99 ${duration(l.dispatchLagP99Seconds)})` : server}`
      : "";
    lines.push(
      `${String(l.level).padEnd(open ? 13 : 12)} ${`${l.outputTokensPerSecond.toFixed(1)}${ci}`.padEnd(11)} ${l.requestsPerSecond.toFixed(2).padEnd(8)} ${duration(l.ttftP50Seconds).padEnd(10)} ${duration(l.ttfaP50Seconds).padEnd(10)} ${duration(l.itlP50Seconds).padEnd(10)} ${duration(l.e2eP50Seconds).padEnd(10)} ${`${l.errors}/${l.requests}`.padEnd(8)} ${l.withinErrorBudget ? "ok" : "FAILED"}${achieved}${l.truncatedRequests > 0 ? ` (${l.truncatedRequests} cut short)` : ""}${answerlessLevel(l) ? " (no visible answer)" : ""}  ${certificateText(l.certificate)}`,
    );
  }
  for (const l of [...s.singleRequest, ...s.sweep]) {
    if (l.truncatedRequests === 0) continue;
    const where = "maxTokens" in l ? `single max_tokens ${l.maxTokens}` : levelName(l);
    const asked = "maxTokens" in l ? l.maxTokens : s.plan.sweepMaxTokens;
    const ok = l.requests - l.errors;
    lines.push(
      `note: ${where}: ${l.truncatedRequests}/${ok} request(s) cut short before max_tokens ${asked} (finish_reason length: the context limit), ${ok > 0 ? (l.completionTokens / ok).toFixed(0) : "0"} tokens per request on average; throughput counts the tokens produced`,
    );
  }
  const answerless = [...s.singleRequest, ...s.sweep].reduce((a, l) => a + l.answerlessRequests, 0);
  if (answerless > 0)
    lines.push(
      `note: ${answerless} successful request(s) produced no visible answer (reasoning used the whole budget); their tokens are reasoning`,
    );
  const reasoning = s.sweep.reduce((a, l) => a + (l.reasoningTokens ?? 0), 0);
  if (reasoning > 0) {
    const total = s.sweep.reduce((a, l) => a + l.completionTokens, 0);
    lines.push(`sweep tokens: ${total} = ${reasoning} reasoning + ${total - reasoning} answer`);
  }
  lines.push(
    s.sustainedOutputTokensPerSecond > 0
      ? `${s.saturationVerdict}; sustained ${s.sustainedOutputTokensPerSecond.toFixed(1)} tok/s`
      : `${s.saturationVerdict}; no sustained figure`,
  );
  if (s.timeScale !== 1)
    lines.push(`time: simulated host time (time scale ${s.timeScale}); rates and durations are the host's`);
  if (s.acceptanceLength !== null) lines.push(`speculative acceptance length ${s.acceptanceLength.toFixed(2)}`);
  return lines.join("\n") + "\n";
}
