/**
 * The answer check: the gate's "answers" phase. A server that generates can still answer wrong (a
 * wrong chat template, a broken quantization, a speculative kernel bug: EAGLE-3 gibberish on RTX PRO
 * 6000 Blackwell, TensorRT-LLM #11125). So after readiness the gate sends a fixed set of prompts
 * with checkable answers, greedy (temperature 0), reads each answer complete (a streaming probe
 * that stops at the first token sees neither a loop nor a wrong answer), and scores them.
 *
 * Its result is the answer certificate, beside the throughput certificate in the stack outputs. The
 * one judgement (`answersFailure`) is used by verify, up, the comparison, the fleet and the refresh.
 */
import { Agent } from "undici";
import { describeError, fetchText } from "../transport/http";
import { withTimeout } from "../transport/timers";
import type { ChatCompletion } from "../transport/wire";
import type { VerifyPolicy } from "../base/schema";
import { probeRequestBody } from "./probe";
import {
  answerFailure,
  DEFAULT_ANSWER_SET,
  readAnswerSet,
  repetitionLoop,
  visibleAnswer,
  type AnswerItem,
  type AnswerSet,
} from "../base/answer-set";

export const NOT_CHECKED = "answers not checked";
const FILE_PATH = "verification.answers.file";
const THRESHOLD_PATH = "verification.answers.passThreshold";
/** Answers kept in the certificate are cut here: the state holds the evidence, not essays. */
const KEEP_CHARACTERS = 200;

/** One prompt's greedy answer and its judgement. */
export interface AnswerRecord {
  prompt: string;
  /** The visible answer (content, reasoning excluded), cut to KEEP_CHARACTERS. */
  answer: string;
  finishReason: string | null;
  right: boolean;
  /** Why it is wrong: the failed check, "a repetition loop ...", "everything in reasoning ...". */
  why: string | null;
  degenerate: boolean;
}

/** What the answer check established: evidence of its own, next to the throughput certificate. */
export interface AnswerCertificate {
  checked: boolean;
  /** One sentence: the score and the threshold, or "answers not checked" and why. */
  note: string;
  set: string | null;
  digest: string | null;
  prompts: number;
  right: number;
  /** right / prompts; null when not checked. */
  score: number | null;
  threshold: number | null;
  /** Answers in a repetition loop or only in reasoning. */
  degenerate: number;
  /** The check passed; null when not checked. */
  passed: boolean | null;
  records: AnswerRecord[];
}

export function answersNotChecked(why: string): AnswerCertificate {
  return {
    checked: false,
    note: `${NOT_CHECKED} (${why})`,
    set: null,
    digest: null,
    prompts: 0,
    right: 0,
    score: null,
    threshold: null,
    degenerate: 0,
    passed: null,
    records: [],
  };
}

/** The set the policy names; null for "none". A file that cannot be read throws naming the config path. */
export function answerSetOf(policy: VerifyPolicy): AnswerSet | null {
  const file = policy.answers.file;
  if (file === "none") return null;
  if (file === "default") return DEFAULT_ANSWER_SET;
  return readAnswerSet(file, FILE_PATH);
}

/** A judgement of one complete answer: degenerate output first, then the item's checks. */
export function judgeAnswer(
  item: AnswerItem,
  content: string,
  reasoning: string,
  finishReason: string | null,
): AnswerRecord {
  const answer = visibleAnswer(content);
  const record = (why: string | null, degenerate = false): AnswerRecord => ({
    prompt: item.prompt,
    answer: answer.slice(0, KEEP_CHARACTERS),
    finishReason,
    right: why === null,
    why,
    degenerate,
  });
  if (answer === "" && reasoning.trim() !== "")
    return record(
      `everything in reasoning and nothing in content (${reasoning.length} characters of reasoning, finish_reason ${finishReason ?? "none"})`,
      true,
    );
  if (answer === "") return record("no visible answer");
  const loop = repetitionLoop(answer);
  if (loop !== null) return record(`a repetition loop: ${loop}`, true);
  return record(answerFailure(item, answer));
}

/** Sends one prompt greedy and reads the complete answer; throws when no completion came back. */
async function answerOne(
  agent: Agent,
  endpoint: { base: string; model: string; apiKey?: string },
  policy: VerifyPolicy,
  item: AnswerItem,
  signal: AbortSignal,
): Promise<AnswerRecord> {
  const maxTokens = policy.thinkingToggle ? policy.answers.maxTokens : policy.answers.maxTokensThinking;
  // The probe's greedy body (thinking off where the template allows): only prompt, length and streaming differ.
  const body = {
    ...probeRequestBody(endpoint.model, { ...policy, probePrompt: item.prompt }, false),
    max_tokens: maxTokens,
    stream: false,
    stream_options: undefined,
  };
  const seconds = policy.answers.timeoutSeconds;
  const url = `${endpoint.base}/v1/chat/completions`;
  const reply = await withTimeout(
    [signal],
    seconds * 1000,
    () => `POST ${url} (answer check): no answer within ${seconds} s`,
    (s) => fetchText(agent, url, { method: "POST", body, apiKey: endpoint.apiKey, signal: s }),
  );
  if (reply.status !== 200) throw new Error(`POST ${url} (answer check) answered HTTP ${reply.status}`);
  let choice: NonNullable<ChatCompletion["choices"]>[number] | undefined;
  try {
    choice = (JSON.parse(reply.text) as ChatCompletion | null)?.choices?.[0];
  } catch {
    throw new Error(`POST ${url} (answer check) answered HTTP 200 with a body that is not JSON`);
  }
  if (!choice) throw new Error(`POST ${url} (answer check) answered with no choices[0]`);
  const message = (choice.message ?? {}) as { content?: unknown; reasoning_content?: unknown; reasoning?: unknown };
  const text = (v: unknown) => (typeof v === "string" ? v : "");
  const reasoning = text(message.reasoning_content) || text(message.reasoning);
  return judgeAnswer(item, text(message.content), reasoning, choice.finish_reason ?? null);
}

/**
 * The answers of SET, POLICY.answers.concurrency at once, in the set's order. Throws (one sentence
 * naming the request) when a request got no completion: a server that stopped answering is not a
 * score.
 */
export async function collectAnswers(
  endpoint: { base: string; model: string; apiKey?: string },
  policy: VerifyPolicy,
  set: AnswerSet,
  signal: AbortSignal,
): Promise<AnswerRecord[]> {
  const width = Math.min(policy.answers.concurrency, set.items.length);
  const agent = new Agent({ connections: width, keepAliveTimeout: 4_000 });
  const records = new Array<AnswerRecord>(set.items.length);
  let next = 0;
  try {
    const worker = async () => {
      while (next < set.items.length && !signal.aborted) {
        const i = next++;
        records[i] = await answerOne(agent, endpoint, policy, set.items[i], signal);
      }
    };
    await Promise.all(Array.from({ length: width }, worker));
    if (signal.aborted) throw signal.reason;
    return records;
  } finally {
    void agent.destroy().catch(() => undefined);
  }
}

/** The certificate of a set's records, judged against the policy's threshold. */
export function certifyAnswers(set: AnswerSet, records: AnswerRecord[], threshold: number): AnswerCertificate {
  const right = records.filter((r) => r.right).length;
  const score = records.length === 0 ? 0 : right / records.length;
  const degenerate = records.filter((r) => r.degenerate).length;
  const passed = score >= threshold;
  const loops = degenerate > 0 ? `, ${degenerate} degenerate` : "";
  return {
    checked: true,
    note: `answers checked: ${right} of ${records.length} right (score ${score.toFixed(2)}, ${THRESHOLD_PATH} ${threshold}${loops}) on the ${set.name === "default" ? "shipped" : set.name} answer set`,
    set: set.name,
    digest: set.digest,
    prompts: records.length,
    right,
    score,
    threshold,
    degenerate,
    passed,
    records,
  };
}

/** The answer check of the gate and of the refresh: the policy's set, answered and certified. */
export async function checkAnswers(
  endpoint: { base: string; model: string; apiKey?: string },
  policy: VerifyPolicy,
  signal: AbortSignal,
): Promise<AnswerCertificate> {
  const set = answerSetOf(policy);
  if (set === null) return answersNotChecked(`${FILE_PATH} is "none"`);
  const records = await collectAnswers(endpoint, policy, set, signal).catch((e: unknown) => {
    if (signal.aborted) throw e;
    throw new Error(`the answer check got no answer: ${describeError(e)}`);
  });
  return certifyAnswers(set, records, policy.answers.passThreshold);
}

/** Why a certificate fails the gate, one sentence with examples; null when it passes or was not checked. */
export function answersFailure(cert: AnswerCertificate): string | null {
  if (!cert.checked || cert.passed !== false) return null;
  const wrong = cert.records.filter((r) => !r.right);
  const examples = wrong
    .slice(0, 3)
    .map((r) => `${JSON.stringify(r.prompt)} got ${JSON.stringify(r.answer.slice(0, 80))} (${r.why})`)
    .join("; ");
  return `the answers failed: ${cert.right} of ${cert.prompts} right (score ${cert.score!.toFixed(2)}), under ${THRESHOLD_PATH} ${cert.threshold}${cert.degenerate > 0 ? `; ${cert.degenerate} degenerate (a repetition loop or an answer only in reasoning)` : ""}; for example ${examples}`;
}

/** The speculative service's greedy answers against the autoregressive service's on the same prompts. */
export interface AnswerAgreement {
  /** Prompts both answered, in the same set (same digest); 0 when either was not checked. */
  prompts: number;
  /** Fraction of those answered with the same visible text (whitespace-normalized). */
  exactMatchRate: number | null;
  speculativeScore: number | null;
  autoregressiveScore: number | null;
  /** The speculative service answers worse: a lower score, or a failed check. */
  worse: boolean;
  note: string;
}

export function answerAgreement(speculative: AnswerCertificate, autoregressive: AnswerCertificate): AnswerAgreement {
  const same = speculative.checked && autoregressive.checked && speculative.digest === autoregressive.digest;
  const norm = (s: string) => s.replace(/\s+/g, " ").trim();
  const n = same ? Math.min(speculative.records.length, autoregressive.records.length) : 0;
  let equal = 0;
  for (let i = 0; i < n; i++)
    if (norm(speculative.records[i].answer) === norm(autoregressive.records[i].answer)) equal++;
  const worse =
    speculative.passed === false ||
    (same && speculative.score !== null && autoregressive.score !== null && speculative.score < autoregressive.score);
  const exactMatchRate = n > 0 ? equal / n : null;
  const note = !same
    ? NOT_CHECKED
    : `greedy answers equal to the autoregressive service's on ${equal} of ${n} prompts; score ${speculative.score!.toFixed(2)} vs ${autoregressive.score!.toFixed(2)}${worse ? ": answers worse" : ""}`;
  return {
    prompts: n,
    exactMatchRate,
    speculativeScore: speculative.score,
    autoregressiveScore: autoregressive.score,
    worse,
    note,
  };
}
