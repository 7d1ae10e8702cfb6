/** `gpuhost plan`: days and hosts for a workload at a measured throughput, and where that throughput stands. */
import { capacity, type CapacityPlan } from "../gate/measurement/capacity";
import { roofline, rooflineLines, type Roofline } from "../physics/roofline";
import { WorkloadSchema } from "../gate/schema";
import { defaultIo, EXIT, runCommand, schemaDefault, schemaIssues, UsageError, type CliIo } from "./common";
import type { CommandSpec, Values } from "./options";
import { hostPhysics, PHYSICS_FLAGS } from "./physics-flags";

export const PLAN = {
  name: "plan",
  about: `Capacity plan: days = completions x tokens / (sustained tok/s x 86,400), hosts for the deadline,
raw storage; with --gpu and --model-config, the roofline it stands against: the bandwidth roofline at
batch 1 and at --concurrency, the compute bound, the KV-cache bound on concurrency, the share of the
roofline reached, and the limiter with its lever (docs/physics.md).`,
  flags: {
    throughput: {
      type: "number",
      value: "TOKS",
      min: 0,
      required: true,
      description: "the sustained aggregate output tok/s a benchmark measured",
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
    const plan = capacity(values.throughput, parsed.data);
    const physics = await physicsOf(values, parsed.data.outputTokensPerCompletion);
    io.stdout.write(
      values.json
        ? JSON.stringify({ ...plan, roofline: physics?.roofline ?? null }, null, 2) + "\n"
        : planText(plan) + (physics ? rooflineLines(physics.roofline, physics.contextTokens).join("\n") + "\n" : ""),
    );
    return EXIT.ok;
  });
}

type PlanValues = Values<typeof PLAN.flags>;

/** The roofline the flags describe, or undefined without --gpu and --model-config. */
async function physicsOf(
  values: PlanValues,
  outputTokens: number,
): Promise<{ roofline: Roofline; contextTokens: number } | undefined> {
  const physics = await hostPhysics(values, outputTokens, { concurrency: values.concurrency });
  if (!physics) return undefined;
  const measured =
    values.concurrency === undefined
      ? undefined
      : { concurrency: values.concurrency, tokensPerSecond: values.throughput };
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
