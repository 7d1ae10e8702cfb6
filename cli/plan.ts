/** `gpuhost plan`: days and hosts for a workload at a measured throughput. */
import { capacity, type CapacityPlan } from "../gate/measurement/capacity";
import { WorkloadSchema } from "../gate/schema";
import { defaultIo, EXIT, runCommand, schemaDefault, schemaIssues, UsageError, type CliIo } from "./common";
import type { CommandSpec } from "./options";

export const PLAN = {
  name: "plan",
  about: `Capacity plan: days = completions x tokens / (sustained tok/s x 86,400), hosts for the deadline,
raw storage.`,
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
    io.stdout.write(values.json ? JSON.stringify(plan, null, 2) + "\n" : planText(plan));
    return EXIT.ok;
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
