/**
 * `gpuhost verify`: the readiness gate outside Pulumi. JSON goes to stdout, progress to stderr;
 * cli/gpuhost.ts dispatches here.
 */
import { AnswersPolicySchema, VerifyPolicySchema, type AnswersPolicyInput } from "../gate/base/schema";
import { MAX_TIMER_SECONDS } from "../gate/transport/timers";
import { verify } from "../gate/readiness/verify";
import { answerSetOf } from "../gate/readiness/answers";
import {
  API_KEY_FLAGS,
  API_KEY_USAGE,
  apiKeyOption,
  defaultIo,
  EXIT,
  runCommand,
  schemaDefault,
  schemaIssues,
  UsageError,
  type CliIo,
} from "./common";
import type { CommandSpec } from "./options";

export type { CliIo } from "./common";

/** --answers, shared by verify and compare: the answer set, checked before any request. */
export const ANSWERS_FLAG = {
  answers: {
    type: "string",
    value: "FILE|none",
    description:
      'the answer check\'s set: a JSONL file of {"prompt", "expect": REGEX} lines, or none (skipped: "answers not checked"); default: the shipped set',
  },
  "answer-threshold": {
    type: "number",
    value: "FRACTION",
    description: "the share of the set that must be answered right (verification.answers.passThreshold)",
    shownDefault: schemaDefault(AnswersPolicySchema, "passThreshold"),
  },
} as const;

/**
 * The answers policy of --answers and --answer-threshold; a file that cannot be read or parsed, or a
 * threshold outside [0, 1], is a usage error, before any request.
 */
export function answersOption(values: { answers?: string; "answer-threshold"?: number }): AnswersPolicyInput {
  const parsed = AnswersPolicySchema.safeParse({ file: values.answers, passThreshold: values["answer-threshold"] });
  if (!parsed.success) throw new UsageError(`--answer-threshold: ${parsed.error.issues[0].message}`);
  try {
    answerSetOf(VerifyPolicySchema.parse({ answers: parsed.data }));
  } catch (e) {
    throw new UsageError((e as Error).message.replace(/^verification\.answers\.file/, "--answers"), { cause: e });
  }
  return { file: values.answers, passThreshold: values["answer-threshold"] };
}

export const VERIFY = {
  name: "verify",
  about: `Readiness gate: exit 0 only after the server listed the model and answered a chat completion with
visible content (and the known answer, when given), twice, and answered a fixed set of prompts with
checkable answers right (greedy; --answers). ${API_KEY_USAGE} Ctrl-C stops it.`,
  flags: {
    endpoint: {
      type: "string",
      value: "URL",
      required: true,
      description: "the server: an http(s) URL with a host, e.g. http://127.0.0.1:30000",
    },
    model: { type: "string", value: "ID", description: "the model to expect (default: the first listed)" },
    deadline: {
      type: "number",
      value: "SECONDS",
      max: MAX_TIMER_SECONDS,
      description: "one deadline for the whole gate",
      shownDefault: schemaDefault(VerifyPolicySchema, "deadlineSeconds"),
    },
    "thinking-off": { type: "boolean", description: "ask the server not to think (chat_template_kwargs)" },
    "known-answer": { type: "string", value: "TEXT", description: "text the answer must contain (with --prompt)" },
    prompt: { type: "string", value: "TEXT", description: "the probe's prompt" },
    ...ANSWERS_FLAG,
    ...API_KEY_FLAGS,
    json: { type: "boolean", description: "print the result as JSON" },
  },
  exits: [
    [EXIT.ok, "ready"],
    [EXIT.failed, "not ready (the diagnosis says why)"],
    [EXIT.usage, "usage"],
    [EXIT.interrupted, "interrupted"],
  ],
} as const satisfies CommandSpec;

export function verifyMain(argv: string[], io: CliIo = defaultIo()): Promise<number> {
  return runCommand(VERIFY, argv, io, async (values, signal) => {
    const policy = VerifyPolicySchema.safeParse({
      deadlineSeconds: values.deadline,
      thinkingToggle: values["thinking-off"] ?? undefined,
      knownAnswer: values["known-answer"],
      probePrompt: values.prompt,
      answers: answersOption(values),
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
            answers: result.answers,
          },
          null,
          2,
        ) + "\n",
      );
    } else if (result.ready) {
      io.stdout.write(
        `ready: ${result.model} generated (${result.probe?.completionTokens} tokens, finish_reason ${result.probe?.finishReason}) after ${result.elapsedSeconds.toFixed(2)} s; ${result.answers.note}\n`,
      );
    } else {
      io.stdout.write(`NOT ready\n${result.diagnosis}\n`);
    }
    return result.ready ? EXIT.ok : EXIT.failed;
  });
}
