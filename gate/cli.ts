/**
 * `gpuhost verify | plan` (and `bench`, in bench-cli.ts): the gate's engine outside Pulumi. Each
 * *Main returns an exit status; cli/gpuhost.ts dispatches to them. JSON goes to stdout (or a
 * file), progress to stderr.
 */
import { parseArgs } from "node:util";
import { capacity, type CapacityPlan } from "./measurement/capacity";
import {
  API_KEY_USAGE,
  apiKeyOption,
  defaultIo,
  EXIT,
  numberOption,
  runCommand,
  schemaIssues,
  UsageError,
  type CliIo,
} from "./cli-common";
import { VerifyPolicySchema, WorkloadSchema } from "./schema";
import { verify } from "./readiness/verify";

export { benchMain } from "./bench-cli";
export type { CliIo } from "./cli-common";

const VERIFY_USAGE = `usage: gpuhost verify --endpoint URL [--model ID] [--deadline SECONDS] [--thinking-off] [--known-answer TEXT --prompt TEXT] [--api-key-file PATH] [--json]

Readiness gate: exit 0 only after the server listed the model and answered a chat completion with
visible content (and the known answer, when given), twice. --endpoint is an http(s) URL with a host,
e.g. http://127.0.0.1:30000. ${API_KEY_USAGE} Ctrl-C stops it.
exit status: 0 ready; 1 not ready (the diagnosis says why); 2 usage; 130 interrupted`;

export function verifyMain(argv: string[], io: CliIo = defaultIo()): Promise<number> {
  return runCommand(io, VERIFY_USAGE, argv, async (signal) => {
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
        "api-key-file": { type: "string" },
        json: { type: "boolean" },
      },
      strict: true,
    });
    if (!values.endpoint) throw new UsageError("--endpoint is required");
    const policy = VerifyPolicySchema.safeParse({
      deadlineSeconds: numberOption("deadline", values.deadline),
      thinkingToggle: values["thinking-off"] ?? undefined,
      knownAnswer: values["known-answer"],
      probePrompt: values.prompt,
    });
    if (!policy.success) throw new UsageError(schemaIssues(policy.error));
    const result = await verify(
      { url: values.endpoint, model: values.model, apiKey: apiKeyOption(values) },
      policy.data,
      { onPhase: (phase, detail) => io.stderr.write(`[verify] ${phase}: ${detail}\n`), signal },
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
    return result.ready ? EXIT.ok : EXIT.failed;
  });
}

const PLAN_USAGE = `usage: gpuhost plan --throughput TOKS [--completions N] [--tokens T] [--hosts H] [--deadline-days D] [--bytes-per-token B] [--json]

Capacity plan: days = completions x tokens / (sustained tok/s x 86,400), hosts for the deadline,
raw storage. --throughput is the sustained aggregate output tok/s a benchmark measured.
exit status: 0 ok; 2 usage`;

export function planMain(argv: string[], io: CliIo = defaultIo()): Promise<number> {
  return runCommand(io, PLAN_USAGE, argv, async () => {
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
    if (!parsed.success) throw new UsageError(schemaIssues(parsed.error));
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
