/**
 * `gpuhost plan`: days and hosts for a workload at a measured throughput, and where that throughput
 * stands; with --curves, the split of a mixed fleet (interactive and batch) from measured curves.
 */
import * as fs from "node:fs/promises";
import { capacity, type CapacityPlan } from "../gate/plan/capacity";
import {
  CurvesSchema,
  degradedPlan,
  type HostsDown,
  type InteractiveDemand,
  mixedPlan,
  mixedPlanText,
  type ServiceCurve,
} from "../gate/plan/mixed-plan";
import { roofline, rooflineLines, type Roofline } from "../physics/roofline";
import { WorkloadSchema } from "../gate/base/schema";
import { defaultIo, EXIT, runCommand, schemaDefault, schemaIssues, UsageError, type CliIo } from "./common";
import type { CommandSpec, Values } from "./options";
import { hostPhysics, PHYSICS_FLAGS } from "./physics-flags";

export const PLAN = {
  name: "plan",
  about: `Capacity plan: days = completions x tokens / (sustained tok/s x 86,400), hosts for the deadline,
raw storage; with --gpu and --model-config, the roofline it stands against: the bandwidth roofline at
batch 1 and at --concurrency, the compute bound, the KV-cache bound on concurrency, the share of the
roofline reached, and the limiter with its lever (docs/physics.md). With --curves (a comparison's
measured curves) instead of --throughput: a mixed fleet, interactive users on the service that holds
the most of them within --ttft-p95 and --itl-p95, the batch job on the one that sustains the most
tok/s, beside the homogeneous fleets (gate/plan/mixed-plan.ts).`,
  flags: {
    throughput: {
      type: "number",
      value: "TOKS",
      min: 0,
      description: "the sustained aggregate output tok/s a benchmark measured (required without --curves)",
    },
    curves: {
      type: "path",
      description:
        "a comparison's JSON (gpuhost compare --json, the demo's story-compare.json, or pulumi stack output --json of a stack that compared): plan a mixed fleet",
    },
    "interactive-users": { type: "integer", description: "with --curves: concurrent interactive users" },
    "ttft-p95": {
      type: "number",
      value: "S",
      description: "with --curves: the interactive TTFT p95 objective, seconds",
    },
    "itl-p95": {
      type: "number",
      value: "S",
      description: "with --curves: the interactive inter-token latency p95 objective, seconds per token",
    },
    "hosts-down": {
      type: "string",
      value: "interactive=N,batch=M",
      description:
        "with --curves: hosts out of each group (a failed gate, a stopped host): what the fleet can still promise",
    },
    completions: {
      type: "integer",
      description: "completions to generate",
      shownDefault: schemaDefault(WorkloadSchema, "completions"),
    },
    tokens: {
      type: "number",
      description: "average output tokens per completion",
      shownDefault: schemaDefault(WorkloadSchema, "outputTokensPerCompletion"),
    },
    hosts: {
      type: "integer",
      description: "hosts the work is spread over",
      shownDefault: schemaDefault(WorkloadSchema, "hosts"),
    },
    "deadline-days": {
      type: "number",
      value: "D",
      description: "deadline for the whole workload",
      shownDefault: schemaDefault(WorkloadSchema, "deadlineDays"),
    },
    "bytes-per-token": {
      type: "number",
      value: "B",
      description: "raw storage per output token",
      shownDefault: schemaDefault(WorkloadSchema, "bytesPerToken"),
    },
    concurrency: {
      type: "integer",
      description: "the concurrency the throughput was measured at (places it on the roofline)",
    },
    ...PHYSICS_FLAGS,
    json: { type: "boolean", description: "print the plan as JSON" },
  },
  exits: [
    [EXIT.ok, "ok"],
    [EXIT.usage, "usage"],
  ],
} as const satisfies CommandSpec;

export function planMain(argv: string[], io: CliIo = defaultIo()): Promise<number> {
  return runCommand(PLAN, argv, io, async (values) => {
    const parsed = WorkloadSchema.safeParse({
      completions: values.completions,
      outputTokensPerCompletion: values.tokens,
      hosts: values.hosts,
      deadlineDays: values["deadline-days"],
      bytesPerToken: values["bytes-per-token"],
    });
    if (!parsed.success) throw new UsageError(schemaIssues(parsed.error));
    if (values.curves !== undefined) {
      if (values.throughput !== undefined)
        throw new UsageError("--curves plans from the curves: leave out --throughput");
      const curves = await readCurves(values.curves);
      const demand = interactiveDemand(values);
      const mixed = mixedPlan(curves.services, demand, parsed.data);
      const down = values["hosts-down"] === undefined ? null : hostsDown(values["hosts-down"]);
      const degraded = down ? degradedPlan(curves.services, mixed, demand, parsed.data, down) : null;
      // A simulated host's curves are in its own time: say so beside the plan, as the comparison did.
      const note = typeof curves.timeNote === "string" && curves.timeNote.length > 0 ? `${curves.timeNote}\n` : "";
      io.stdout.write(
        values.json
          ? JSON.stringify(degraded ? { ...mixed, degraded } : mixed, null, 2) + "\n"
          : mixedPlanText(mixed) + (degraded ? `With hosts out: ${degraded.verdict}\n` : "") + note,
      );
      return EXIT.ok;
    }
    if (values.throughput === undefined)
      throw new UsageError("--throughput is required (or --curves FILE for a mixed fleet)");
    const plan = capacity(values.throughput, parsed.data);
    const physics = await physicsOf(values, values.throughput, parsed.data.outputTokensPerCompletion);
    io.stdout.write(
      values.json
        ? JSON.stringify({ ...plan, roofline: physics?.roofline ?? null }, null, 2) + "\n"
        : planText(plan) + (physics ? rooflineLines(physics.roofline, physics.contextTokens).join("\n") + "\n" : ""),
    );
    return EXIT.ok;
  });
}

type PlanValues = Values<typeof PLAN.flags>;

/** --hosts-down interactive=N,batch=M (either may be left out: 0). */
function hostsDown(text: string): HostsDown {
  const out: HostsDown = { interactive: 0, batch: 0 };
  for (const part of text.split(",")) {
    const m = /^\s*(interactive|batch)\s*=\s*(\d+)\s*$/.exec(part);
    if (!m) throw new UsageError(`--hosts-down takes interactive=N,batch=M, got ${JSON.stringify(part)}`);
    out[m[1] as keyof HostsDown] = Number(m[2]);
  }
  return out;
}

/** The interactive class --curves plans for: all three flags, each named when missing. */
function interactiveDemand(values: PlanValues): InteractiveDemand {
  const users = values["interactive-users"];
  const ttft = values["ttft-p95"];
  const itl = values["itl-p95"];
  if (users === undefined) throw new UsageError("--curves needs --interactive-users");
  if (ttft === undefined) throw new UsageError("--curves needs --ttft-p95 (seconds)");
  if (itl === undefined) throw new UsageError("--curves needs --itl-p95 (seconds per token)");
  return { users, ttftP95Seconds: ttft, itlP95Seconds: itl };
}

/** The services' curves in FILE: a comparison's own JSON, or a stack's outputs (a mixed fleet's curves, or its first host that compared). */
async function readCurves(file: string): Promise<{ services: ServiceCurve[]; timeNote?: unknown }> {
  let json: unknown;
  try {
    json = JSON.parse(await fs.readFile(file, "utf8"));
  } catch (err) {
    throw new UsageError(`--curves ${file}: ${(err as Error).message}`);
  }
  const outputs = json as {
    gpuHosts?: Record<string, { comparison?: unknown }>;
    fleet?: { mixed?: { curves?: unknown } | null } | null;
  } | null;
  const hosts = outputs?.gpuHosts;
  // A stack's outputs: a mixed fleet's curves (its hosts' own sweeps), else the first host that compared.
  const mixed = outputs?.fleet?.mixed?.curves;
  const source = mixed
    ? { services: mixed }
    : hosts
      ? Object.values(hosts).find((h) => h?.comparison)?.comparison
      : json;
  const parsed = CurvesSchema.safeParse(source);
  if (!parsed.success)
    throw new UsageError(
      `--curves ${file} holds no comparison's curves (services[].sweep[]${hosts ? " in any gpuHosts.<host>.comparison" : ""}): ${schemaIssues(parsed.error)}`,
    );
  return parsed.data;
}

/** The roofline the flags describe, or undefined without --gpu and --model-config. */
async function physicsOf(
  values: PlanValues,
  throughput: number,
  outputTokens: number,
): Promise<{ roofline: Roofline; contextTokens: number } | undefined> {
  const physics = await hostPhysics(values, outputTokens, { concurrency: values.concurrency });
  if (!physics) return undefined;
  const measured =
    values.concurrency === undefined ? undefined : { concurrency: values.concurrency, tokensPerSecond: throughput };
  return { roofline: roofline(physics.model, physics.host, measured), contextTokens: physics.host.contextTokens };
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
