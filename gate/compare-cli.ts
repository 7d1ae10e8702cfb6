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
import { parseArgs } from "node:util";
import { AcceptanceFloorSchema } from "./readiness/acceptance";
import { API_KEY_USAGE, apiKeyOption, EXIT, fractionOption, UsageError } from "./cli-common";
import type { CliIo } from "./cli";
import { JobSchema, SERVICE_NAMES, type ServiceName } from "./measurement/compare";
import { compareChart } from "./reports/chart";
import { compareCsv } from "./reports/csv";
import { compareJson, compareText } from "./reports/compare-report";
import { runComparison } from "./measurement/compare-run";
import { SloSchema } from "./measurement/goodput";
import { BenchPlanSchema } from "./schema";
import { WorkloadShapeSchema } from "./measurement/workload";

const USAGE = `usage: gpuhost compare --endpoint URL --activate-command "ARGV {unit}" [--identity-command "ARGV {unit}"]
       [--services autoregressive,eagle3,dflash] [--draft SERVICE=PATH]... [--acceptance-floor 1.5]
       [--concurrency 1,8,16,32,64 | --rate 0.5,1,2] [--output-tokens 2048] [--mix chat=1,code=1,long-context=0]
       [--thinking on|off] [--repeats 3] [--requests-per-level 1] [--slo-ttft 10] [--slo-itl 0.1] [--error-budget 0.01]
       [--purpose batch|interactive] [--completions 900000] [--tokens 2000] [--deadline-days 7]
       [--gpu-hour-cost USD] [--gpus 8] [--auto | --restore SERVICE] [--time-scale X]
       [--cache FILE] [--json FILE] [--csv FILE] [--chart FILE.svg] [--model ID] [--api-key-file PATH]
A level whose error rate exceeds --error-budget (default 1 %) counts for nothing, and the run exits 3.
With --rate, a rate the service kept up with measured the offered load, not capacity.
${API_KEY_USAGE}`;

function list(name: string, v: string | undefined, parse: (s: string) => number): number[] | undefined {
  if (v === undefined) return undefined;
  const out = v.split(",").map((s) => parse(s.trim()));
  if (out.length === 0 || out.some((n) => !Number.isFinite(n) || n <= 0))
    throw new UsageError(`--${name} must be a comma-separated list of positive numbers, got ${JSON.stringify(v)}`);
  return out;
}

function positive(name: string, v: string | undefined): number | undefined {
  if (v === undefined) return undefined;
  const n = Number(v);
  if (!Number.isFinite(n) || n <= 0)
    throw new UsageError(`--${name} must be a positive number, got ${JSON.stringify(v)}`);
  return n;
}

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

function run(argv: string[]): Promise<string> {
  return new Promise((resolve, reject) =>
    execFile(argv[0], argv.slice(1), { timeout: 120_000, maxBuffer: 4 * 1024 * 1024 }, (err, stdout, stderr) =>
      err
        ? reject(new Error(`${argv.join(" ")} failed: ${err.message}${stderr ? `\n${stderr.trim()}` : ""}`))
        : resolve(stdout),
    ),
  );
}

export async function compareMain(
  argv: string[],
  io: CliIo = { stdout: process.stdout, stderr: process.stderr },
): Promise<number> {
  if (argv.includes("--help") || argv.includes("-h")) {
    io.stdout.write(`${USAGE}\n`);
    return 0;
  }
  try {
    const { values } = parseArgs({
      args: argv,
      strict: true,
      options: {
        endpoint: { type: "string" },
        model: { type: "string" },
        "api-key": { type: "string" },
        "api-key-file": { type: "string" },
        services: { type: "string" },
        "activate-command": { type: "string" },
        "identity-command": { type: "string" },
        draft: { type: "string", multiple: true },
        "acceptance-floor": { type: "string" },
        concurrency: { type: "string" },
        rate: { type: "string" },
        "output-tokens": { type: "string" },
        mix: { type: "string" },
        thinking: { type: "string" },
        repeats: { type: "string" },
        "requests-per-level": { type: "string" },
        "slo-ttft": { type: "string" },
        "slo-itl": { type: "string" },
        "error-budget": { type: "string" },
        purpose: { type: "string" },
        completions: { type: "string" },
        tokens: { type: "string" },
        "deadline-days": { type: "string" },
        "gpu-hour-cost": { type: "string" },
        gpus: { type: "string" },
        auto: { type: "boolean" },
        restore: { type: "string" },
        "time-scale": { type: "string" },
        cache: { type: "string" },
        json: { type: "string" },
        csv: { type: "string" },
        chart: { type: "string" },
      },
    });
    if (!values.endpoint) throw new UsageError("--endpoint is required");
    if (!values["activate-command"]) throw new UsageError("--activate-command is required");
    if (values.concurrency && values.rate) throw new UsageError("--concurrency and --rate exclude each other");
    const services = (values.services ?? SERVICE_NAMES.join(",")).split(",").map((s) => service(s.trim()));
    const drafts: Partial<Record<ServiceName, { algorithm: string; draftModelPath: string }>> = {};
    for (const d of values.draft ?? []) {
      const eq = d.indexOf("=");
      const s = service(eq > 0 ? d.slice(0, eq) : d);
      if (s === "autoregressive" || eq < 0)
        throw new UsageError(`--draft takes eagle3=PATH or dflash=PATH, got ${JSON.stringify(d)}`);
      drafts[s] = { algorithm: s === "eagle3" ? "EAGLE3" : "DFLASH", draftModelPath: d.slice(eq + 1) };
    }
    for (const s of services)
      if (s !== "autoregressive" && !drafts[s])
        drafts[s] = { algorithm: s === "eagle3" ? "EAGLE3" : "DFLASH", draftModelPath: "(not given)" };
    const mix = values.mix
      ? Object.fromEntries(
          values.mix.split(",").map((kv) => {
            const [k, v] = kv.split("=");
            return [k.trim(), Number(v)];
          }),
        )
      : undefined;
    const shape = WorkloadShapeSchema.parse({
      mode: values.rate ? "open" : "closed",
      ...(mix ? { mix } : {}),
      ...(values["output-tokens"]
        ? { outputTokens: { distribution: "fixed", tokens: positive("output-tokens", values["output-tokens"]) } }
        : {}),
      thinking: values.thinking === undefined ? null : values.thinking === "on",
    });
    const timeScale = positive("time-scale", values["time-scale"]) ?? 1;
    const unit = (s: ServiceName) => `sglang-${s}.service`;
    const activate = values["activate-command"];
    const identity = values["identity-command"];
    const result = await runComparison(
      {
        endpoint: {
          url: values.endpoint,
          model: values.model,
          apiKey: apiKeyOption(values),
        },
        services,
        drafts,
        acceptanceFloor: AcceptanceFloorSchema.parse(positive("acceptance-floor", values["acceptance-floor"])),
        shape,
        slo: SloSchema.parse({
          ttftSeconds: positive("slo-ttft", values["slo-ttft"]),
          itlSeconds: positive("slo-itl", values["slo-itl"]),
        }),
        levels: list("rate", values.rate, Number) ??
          list("concurrency", values.concurrency, Number) ?? [1, 8, 16, 32, 64],
        requestsPerLevel: positive("requests-per-level", values["requests-per-level"]) ?? 1,
        repeats: positive("repeats", values.repeats) ?? 3,
        requestTimeoutSeconds: 3600,
        timeScale,
        verifyPolicy: { deadlineSeconds: 1800 / timeScale + 60, thinkingToggle: true },
        job: JobSchema.parse({
          purpose: values.purpose,
          completions: positive("completions", values.completions),
          outputTokensPerCompletion: positive("tokens", values.tokens),
          deadlineDays: positive("deadline-days", values["deadline-days"]),
          gpuHourCost: values["gpu-hour-cost"] === undefined ? undefined : Number(values["gpu-hour-cost"]),
          gpusPerHost: positive("gpus", values.gpus),
        }),
        auto: values.auto === true,
        restore: values.restore ? service(values.restore) : "autoregressive",
        cacheFile: values.cache ?? ".gpuhost/compare-cache.json",
        judgement: BenchPlanSchema.parse({ errorBudget: fractionOption("error-budget", values["error-budget"]) }),
      },
      {
        activate: async (s) => void (await run(commandArgv(activate, unit(s)))),
        identity: async (s) =>
          identity
            ? createHash("sha256")
                .update(await run(commandArgv(identity, unit(s))))
                .digest("hex")
            : `unverified:${s}:${Date.now()}`,
        onProgress: (line) => io.stderr.write(`[compare] ${line}\n`),
      },
    );
    if (values.json) writeFileSync(values.json, JSON.stringify(compareJson(result), null, 1) + "\n");
    if (values.csv) writeFileSync(values.csv, compareCsv(result));
    if (values.chart) writeFileSync(values.chart, compareChart(result, values.model ?? values.endpoint));
    io.stdout.write(compareText(result));
    if (!result.comparison) return EXIT.failed;
    // As bench: a level over the error budget is excluded from every figure, and the run says so.
    return result.outcomes.some((o) => o.sweep.some((l) => !l.withinErrorBudget)) ? EXIT.errorBudget : EXIT.ok;
  } catch (err) {
    if (err instanceof UsageError || (err as { code?: string }).code?.startsWith("ERR_PARSE_ARGS")) {
      io.stderr.write(`${(err as Error).message}\n${USAGE}\n`);
      return 2;
    }
    io.stderr.write(`error: ${(err as Error).message}\n`);
    return 1;
  }
}
