/**
 * One probe generation: a real, non-streaming chat completion, validated the way a caller would
 * judge it. Shared by the gate's generate and stability phases and by the provider's cheap read.
 */
import type { Dispatcher } from "undici";
import { describeError, errorKind, fetchText, truncate } from "./http";
import type { VerifyPolicy } from "./schema";

export interface ProbeResult {
  completionTokens: number;
  reasoningTokens: number | null;
  finishReason: string;
  /** The start of the answer (empty when reasoning used the whole budget). */
  content: string;
  reasoningCharacters: number;
  /** Reasoning spent all of max_tokens: generation works, but the answer never started. */
  reasoningExhaustedBudget: boolean;
  latencySeconds: number;
}

export type ProbeOutcome =
  | { ok: true; result: ProbeResult; response: string }
  | {
      ok: false;
      /** connection: no HTTP exchange; http: a status other than 200; invalid: a 200 that is no generation; wrong-answer. */
      kind: "connection" | "http" | "invalid" | "wrong-answer";
      /** Whether waiting may help (a server that is still starting). */
      retryable: boolean;
      /** Short and stable across runs, e.g. "HTTP 503" or "connection refused". */
      summary: string;
      message: string;
      response: string | null;
      error: unknown;
    };

export function probeRequestBody(model: string, policy: VerifyPolicy, sampling: boolean): Record<string, unknown> {
  const body: Record<string, unknown> = {
    model,
    messages: [{ role: "user", content: policy.probePrompt }],
    max_tokens: policy.thinkingToggle ? policy.probeMaxTokens : policy.probeMaxTokensThinking,
    stream: false,
  };
  // Greedy for the known answer; sampling for stability probes, because kernels used only for
  // sampling (FlashInfer's, compiled lazily on first use) never run under temperature 0.
  if (sampling) Object.assign(body, { temperature: 0.7, top_p: 0.9 });
  else body.temperature = 0;
  if (policy.thinkingToggle) body.chat_template_kwargs = { thinking: false };
  return body;
}

export async function probeGeneration(
  dispatcher: Dispatcher,
  base: string,
  model: string,
  policy: VerifyPolicy,
  opts: { signal: AbortSignal; apiKey?: string; sampling: boolean },
): Promise<ProbeOutcome> {
  const started = performance.now();
  let reply;
  try {
    reply = await fetchText(dispatcher, `${base}/v1/chat/completions`, {
      method: "POST",
      body: probeRequestBody(model, policy, opts.sampling),
      apiKey: opts.apiKey,
      signal: opts.signal,
    });
  } catch (err) {
    const kind = errorKind(err);
    return {
      ok: false,
      kind: "connection",
      retryable: true,
      summary: kind,
      message: describeError(err),
      response: null,
      error: err,
    };
  }
  const response = `HTTP ${reply.status} ${truncate(reply.text)}`;
  if (reply.status !== 200) {
    // 4xx other than timeout/rate-limit means the request itself is wrong (model name, key): waiting cannot fix it.
    const retryable = reply.status >= 500 || reply.status === 408 || reply.status === 429;
    const summary = `HTTP ${reply.status}`;
    return {
      ok: false,
      kind: "http",
      retryable,
      summary,
      message: `chat completion answered ${response}`,
      response,
      error: null,
    };
  }
  const invalid = (why: string): ProbeOutcome => ({
    ok: false,
    kind: "invalid",
    retryable: true,
    summary: "invalid completion",
    message: `HTTP 200 but no valid generation: ${why}`,
    response,
    error: null,
  });
  let json: any;
  try {
    json = JSON.parse(reply.text);
  } catch {
    return invalid("the body is not JSON");
  }
  const choice = json?.choices?.[0];
  const usage = json?.usage;
  const completionTokens = Number(usage?.completion_tokens);
  if (!choice) return invalid("no choices[0]");
  if (!Number.isFinite(completionTokens) || completionTokens <= 0)
    return invalid("usage.completion_tokens is missing or 0");
  const content = typeof choice.message?.content === "string" ? choice.message.content : "";
  const reasoning = typeof choice.message?.reasoning_content === "string" ? choice.message.reasoning_content : "";
  if (content.trim() === "" && reasoning.trim() === "") return invalid("both content and reasoning_content are empty");
  const finishReason = String(choice.finish_reason);
  if (finishReason !== "stop" && finishReason !== "length")
    return invalid(`finish_reason is ${JSON.stringify(choice.finish_reason)}`);
  const reasoningTokens = reasoningTokensOf(usage);
  const result: ProbeResult = {
    completionTokens,
    reasoningTokens,
    finishReason,
    content: truncate(content, 200),
    reasoningCharacters: reasoning.length,
    reasoningExhaustedBudget: content.trim() === "" && finishReason === "length",
    latencySeconds: (performance.now() - started) / 1000,
  };
  if (
    policy.knownAnswer !== undefined &&
    !opts.sampling &&
    !content.toLowerCase().includes(policy.knownAnswer.toLowerCase())
  ) {
    const hint = result.reasoningExhaustedBudget
      ? " (reasoning used the whole max_tokens budget before answering: set thinkingToggle for a model family that supports it, or raise probeMaxTokensThinking)"
      : "";
    return {
      ok: false,
      kind: "wrong-answer",
      retryable: false,
      summary: "wrong answer",
      message: `the known-answer probe expected ${JSON.stringify(policy.knownAnswer)} in the content, got ${JSON.stringify(truncate(content, 200))}${hint}`,
      response,
      error: null,
    };
  }
  return { ok: true, result, response };
}

export function reasoningTokensOf(usage: any): number | null {
  const direct = usage?.reasoning_tokens;
  if (typeof direct === "number") return direct;
  const detailed = usage?.completion_tokens_details?.reasoning_tokens;
  return typeof detailed === "number" ? detailed : null;
}
