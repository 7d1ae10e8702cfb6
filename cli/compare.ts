/**
 * `gpuhost compare`: measure the services of one host in turn and say which to run.
 *
 *   gpuhost compare --endpoint http://127.0.0.1:30001 \
 *     --activate-command "ssh root@gpu-host-1 systemctl start {unit}" \
 *     --identity-command "ssh root@gpu-host-1 systemctl cat {unit}" \
 *     --draft eagle3=/models/Kimi-K2.6-EAGLE3 --draft dflash=/models/Kimi-K2.6-DFlash --auto
 *
 * The command options are split on spaces into argv and run without a shell; `{unit}` becomes the
 * service's unit (sglang-<service>.service). The identity command's output is hashed: a service
 * whose unit did not change is not measured again (--cache, default .gpuhost/compare-cache.json).
 */
import { execFile } from "node:child_process";
import { createHash } from "node:crypto";
import { writeFileSync } from "node:fs";
import { uncertifiedLevels } from "../gate/judge/verdict";
import { AcceptanceFloorSchema } from "../gate/readiness/acceptance";
import { JobSchema, SERVICE_NAMES, type ServiceName } from "../gate/plan/compare";
import { compareChart } from "../gate/reports/chart";
import { compareCsv } from "../gate/reports/csv";
import { compareJson, compareText } from "../gate/reports/compare-report";
import { roofline } from "../physics/roofline";
import { hostPhysics, PHYSICS_FLAGS } from "./physics-flags";
import { runComparison, type CompareHooks, type CompareResult } from "../gate/plan/compare-run";
import { type BenchPlan, BenchPlanSchema, CONCURRENCY_REASON, MAX_CONCURRENCY } from "../gate/base/schema";
import { MAX_TOKENS_BOUND } from "./bench";
import { ANSWERS_FLAG, answersOption } from "./verify";
import {
  API_KEY_FLAGS,
  API_KEY_USAGE,
  apiKeyOption,
  defaultIo,
  workloadPlan,
  WORKLOAD_FLAGS,
  EXIT,
  runCommand,
  schemaDefault,
  schemaIssues,
  UsageError,
  type CliIo,
} from "./common";
import type { CommandSpec, Values } from "./options";

/** The levels measured when neither --concurrency nor --rate is given. */
const DEFAULT_LEVELS = [1, 8, 16, 32, 64];

const job = (key: Parameters<typeof schemaDefault<typeof JobSchema>>[1]) => ({
  description: JobSchema.shape[key].description?.replace(/\.$/, "") ?? key,
  shownDefault: schemaDefault(JobSchema, key),
});

export const COMPARE = {
  name: "compare",
  about: `Measures each service of one host in turn (activating it with --activate-command) and says which
to run. The command options are split on spaces into argv and run without a shell; {unit} becomes
the service's unit (sglang-<service>.service). The identity command's output is hashed: a service
whose unit did not change is not measured again (--cache). A level whose error rate exceeds
--error-budget counts for nothing, and the run exits 3. With --rate, a rate the service kept up
with measured the offered load, not capacity. ${API_KEY_USAGE}`,
  flags: {
    endpoint: { type: "string", value: "URL", required: true, description: "the host's serving endpoint" },
    "activate-command": {
      type: "string",
      value: "ARGV",
      required: true,
      description: "starts a service's unit, e.g. 'ssh root@host systemctl start {unit}'",
    },
    "identity-command": {
      type: "string",
      value: "ARGV",
      description: "prints what identifies a unit's configuration, e.g. 'ssh root@host systemctl cat {unit}'",
    },
    services: {
      type: "string",
      value: "S,S,...",
      description: "services to measure",
      default: SERVICE_NAMES.join(","),
    },
    draft: {
      type: "string",
      value: "SERVICE=PATH",
      multiple: true,
      description: "a speculative service's draft model",
    },
    "acceptance-floor": {
      type: "number",
      min: 1,
      description: "the least mean tokens per verify step that counts as working",
      shownDefault: () => String(AcceptanceFloorSchema.parse(undefined)),
    },
    concurrency: {
      type: "integers",
      max: MAX_CONCURRENCY,
      maxReason: CONCURRENCY_REASON,
      description: "closed-loop levels (requests in flight)",
      shownDefault: () => DEFAULT_LEVELS.join(","),
    },
    ...WORKLOAD_FLAGS,
    "max-tokens": {
      type: "integer",
      max: MAX_TOKENS_BOUND,
      description: "output tokens of every request (the name gpuhost bench uses)",
    },
    repeats: { type: "integer", description: "runs of each level", default: 3 },
    "requests-per-concurrency": {
      type: "number",
      max: 1000,
      description: "requests per level, as a multiple of the level (the name gpuhost bench uses)",
      shownDefault: () => "1",
    },
    // The old spellings: the same knobs, accepted with a one-line note (RENAMED).
    "output-tokens": { type: "integer", max: MAX_TOKENS_BOUND, hidden: true, description: "--max-tokens" },
    "requests-per-level": { type: "number", max: 1000, hidden: true, description: "--requests-per-concurrency" },
    "error-budget": {
      type: "fraction",
      description: "the largest error rate a level may have and still count (0.01 or 1%)",
      shownDefault: () => String(BenchPlanSchema.parse({}).errorBudget),
    },
    purpose: { type: "string", value: "batch|interactive", ...job("purpose") },
    completions: { type: "integer", ...job("completions") },
    tokens: { type: "number", ...job("outputTokensPerCompletion") },
    "deadline-days": { type: "number", ...job("deadlineDays") },
    "gpu-hour-cost": { type: "number", value: "USD", min: 0, description: "cost of one GPU hour" },
    gpus: { type: "integer", ...job("gpusPerHost") },
    // The roofline column: the host's GPU and the model (--gpus above is the tensor-parallel count).
    gpu: PHYSICS_FLAGS.gpu,
    "model-config": PHYSICS_FLAGS["model-config"],
    "context-tokens": PHYSICS_FLAGS["context-tokens"],
    "mem-fraction-static": PHYSICS_FLAGS["mem-fraction-static"],
    auto: { type: "boolean", description: "activate the recommended service at the end" },
    restore: {
      type: "string",
      value: "SERVICE",
      description: "the service to leave active",
      default: "autoregressive",
    },
    "time-scale": {
      type: "number",
      value: "X",
      description: "simulated seconds per wall second (simulator only)",
      default: 1,
    },
    cache: { type: "path", description: "measurements of unchanged units", default: ".gpuhost/compare-cache.json" },
    ...ANSWERS_FLAG,
    ...API_KEY_FLAGS,
    model: { type: "string", value: "ID", description: "the model (default: the first the server lists)" },
    json: { type: "path", description: "write the comparison as JSON there" },
    csv: { type: "path", description: "write the levels as CSV there" },
    chart: { type: "path", value: "FILE.svg", description: "write the chart there" },
  },
  exits: [
    [EXIT.ok, "a comparison was made"],
    [EXIT.failed, "no service could be compared, or an error"],
    [EXIT.errorBudget, "a level broke the error budget (it counts for nothing)"],
    [EXIT.uncertified, "a level was not certified (--certify require): it counts for nothing, its line says why"],
    [EXIT.usage, "usage"],
    [EXIT.interrupted, "interrupted"],
  ],
} as const satisfies CommandSpec;

function service(v: string): ServiceName {
  if (!(SERVICE_NAMES as readonly string[]).includes(v))
    throw new UsageError(`unknown service '${v}' (known: ${SERVICE_NAMES.join(", ")})`);
  return v as ServiceName;
}

/** "ssh host systemctl start {unit}" -> argv with {unit} replaced; no shell ever sees it. */
export function commandArgv(template: string, unit: string): string[] {
  const words = template.trim().split(/\s+/).filter(Boolean);
  if (words.length === 0) throw new UsageError("a command option is empty");
  return words.map((w) => w.split("{unit}").join(unit));
}

/** Runs ARGV; the command's interrupt kills it (nothing gpuhost starts outlives gpuhost). */
function run(argv: string[], signal: AbortSignal): Promise<string> {
  return new Promise((resolve, reject) =>
    execFile(argv[0], argv.slice(1), { timeout: 120_000, maxBuffer: 4 * 1024 * 1024, signal }, (err, stdout, stderr) =>
      err
        ? reject(new Error(`${argv.join(" ")} failed: ${err.message}${stderr ? `\n${stderr.trim()}` : ""}`))
        : resolve(stdout),
    ),
  );
}

/** compare's old spellings and the name gpuhost bench gives the same knob. */
const RENAMED = { "output-tokens": "max-tokens", "requests-per-level": "requests-per-concurrency" } as const;

/** The knobs compare shares with bench, under bench's names; an old spelling is taken with a one-line note. */
function spelledAsBench(values: Values<typeof COMPARE.flags>, io: CliIo) {
  for (const [old, now] of Object.entries(RENAMED) as [
    keyof typeof RENAMED,
    (typeof RENAMED)[keyof typeof RENAMED],
  ][]) {
    if (values[old] === undefined) continue;
    if (values[now] !== undefined) throw new UsageError(`--${old} is the old spelling of --${now}: give one of them`);
    io.stderr.write(`gpuhost compare: --${old} is spelled --${now} now, as in gpuhost bench; taking it as --${now}\n`);
  }
  return {
    maxTokens: values["max-tokens"] ?? values["output-tokens"],
    requestsPerConcurrency: values["requests-per-concurrency"] ?? values["requests-per-level"] ?? 1,
  };
}

type CompareValues = Values<typeof COMPARE.flags>;

export function compareMain(argv: string[], io: CliIo = defaultIo()): Promise<number> {
  return runCommand(COMPARE, argv, io, async (values, signal) => {
    if (values.concurrency && values.rate) throw new UsageError("--concurrency and --rate exclude each other");
    const knobs = spelledAsBench(values, io);
    const services = values.services.split(",").map((s) => service(s.trim()));
    const drafts = draftsOf(values.draft, services);
    const plan = comparePlan(values, knobs);
    const job = compareJob(values);
    const physics = await hostPhysics(
      // --gpus is compare's own (the cost); it is the tensor-parallel count only with --gpu.
      { ...values, gpus: values.gpu === undefined ? undefined : (values.gpus ?? job.gpusPerHost) },
      job.outputTokensPerCompletion,
    );
    const timeScale = values["time-scale"];
    const result = await runComparison(
      {
        endpoint: { url: values.endpoint, model: values.model, apiKey: apiKeyOption(values) },
        services,
        drafts,
        acceptanceFloor: AcceptanceFloorSchema.parse(values["acceptance-floor"]),
        plan,
        timeScale,
        verifyPolicy: { deadlineSeconds: 1800 / timeScale + 60, thinkingToggle: true, answers: answersOption(values) },
        job,
        auto: values.auto === true,
        restore: service(values.restore),
        cacheFile: values.cache,
      },
      comparisonHooks(values, signal, io),
    );
    writeReports(values, result);
    const ceiling =
      physics &&
      ((c: number) =>
        roofline(physics.model, physics.host, { concurrency: c, tokensPerSecond: 0 }).atConcurrency?.roofline ?? NaN);
    io.stdout.write(compareText(result, ceiling));
    return exitOf(result, plan);
  });
}

/** --draft eagle3=PATH / dflash=PATH; a speculative service compared without one is said to have none. */
function draftsOf(given: string[], services: ServiceName[]) {
  const drafts: Partial<Record<ServiceName, { algorithm: string; draftModelPath: string }>> = {};
  for (const d of given) {
    const eq = d.indexOf("=");
    const s = service(eq > 0 ? d.slice(0, eq) : d);
    if (s === "autoregressive" || eq < 0)
      throw new UsageError(`--draft takes eagle3=PATH or dflash=PATH, got ${JSON.stringify(d)}`);
    drafts[s] = { algorithm: s === "eagle3" ? "EAGLE3" : "DFLASH", draftModelPath: d.slice(eq + 1) };
  }
  for (const s of services)
    if (s !== "autoregressive" && !drafts[s])
      drafts[s] = { algorithm: s === "eagle3" ? "EAGLE3" : "DFLASH", draftModelPath: "(not given)" };
  return drafts;
}

/**
 * The host's one plan, from the flags bench reads the same way (cli/common.ts workloadPlan), over
 * compare's own defaults: its levels, one request per slot, an hour per request.
 */
function comparePlan(values: CompareValues, knobs: ReturnType<typeof spelledAsBench>) {
  const plan = BenchPlanSchema.safeParse({
    ...workloadPlan(values),
    concurrency: values.rate ? undefined : (values.concurrency ?? DEFAULT_LEVELS),
    repeats: values.repeats,
    sweepMaxTokens: knobs.maxTokens,
    requestsPerConcurrency: knobs.requestsPerConcurrency,
    requestTimeoutSeconds: 3600,
    errorBudget: values["error-budget"],
  });
  if (!plan.success) throw new UsageError(schemaIssues(plan.error));
  return plan.data;
}

/** The job the recommendation is costed for. */
function compareJob(values: CompareValues) {
  const job = JobSchema.safeParse({
    purpose: values.purpose,
    completions: values.completions,
    outputTokensPerCompletion: values.tokens,
    deadlineDays: values["deadline-days"],
    gpuHourCost: values["gpu-hour-cost"],
    gpusPerHost: values.gpus,
  });
  if (!job.success) throw new UsageError(schemaIssues(job.error));
  return job.data;
}

/** The user's commands as the comparison's hooks: each run as argv, its output hashed as the unit's identity. */
function comparisonHooks(values: CompareValues, signal: AbortSignal, io: CliIo): CompareHooks {
  const unit = (s: ServiceName) => `sglang-${s}.service`;
  const activate = values["activate-command"];
  const identity = values["identity-command"];
  return {
    activate: async (s) => void (await run(commandArgv(activate, unit(s)), signal)),
    identity: async (s) =>
      identity
        ? createHash("sha256")
            .update(await run(commandArgv(identity, unit(s)), signal))
            .digest("hex")
        : `unverified:${s}:${Date.now()}`,
    onProgress: (line) => io.stderr.write(`[compare] ${line}\n`),
  };
}

/** --json, --csv, --chart: the files asked for. */
function writeReports(values: CompareValues, result: CompareResult): void {
  if (values.json) writeFileSync(values.json, JSON.stringify(compareJson(result), null, 1) + "\n");
  if (values.csv) writeFileSync(values.csv, compareCsv(result));
  if (values.chart) writeFileSync(values.chart, compareChart(result, values.model ?? values.endpoint));
}

/** As bench: a level over the error budget, or one not certified, is excluded from every figure, and the run says so. */
function exitOf(result: CompareResult, plan: BenchPlan): number {
  if (!result.comparison) return EXIT.failed;
  if (result.outcomes.some((o) => o.sweep.some((l) => !l.withinErrorBudget))) return EXIT.errorBudget;
  return result.outcomes.some((o) => uncertifiedLevels(o.sweep, plan).length > 0) ? EXIT.uncertified : EXIT.ok;
}
