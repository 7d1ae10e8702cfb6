/**
 * One probe generation, judged the way a caller would judge it: only visible content counts. The
 * probe streams and stops reading at the first answer token (or, with a known answer, once the
 * answer appeared), so the gate answers as soon as the server does, even at ~42 tok/s per stream,
 * instead of waiting for max_tokens. Reasoning that fills the whole budget is no answer. Shared by
 * the gate's generate and stability phases and by the provider's cheap read.
 */
import { request, type Dispatcher } from "undici";
import { describeError, errorKind, fatalNetworkError, headers, truncate } from "../transport/http";
import type { VerifyPolicy } from "../base/schema";
import { SseParser } from "../transport/sse";
import { armTimeout } from "../transport/timers";
import type { ChatCompletion, ChatCompletionChunk, Usage } from "../transport/wire";

export interface ProbeResult {
  /** usage.completion_tokens when the response ran to its end (the probe stops early otherwise). */
  completionTokens: number | null;
  reasoningTokens: number | null;
  /** finish_reason when the response ran to its end; null when the probe stopped at the answer. */
  finishReason: string | null;
  /** The start of the answer (never empty: a probe without visible content fails). */
  content: string;
  reasoningCharacters: number;
  /** Seconds to the first output of any kind, and to the first visible answer token. */
  timeToFirstTokenSeconds: number | null;
  timeToFirstAnswerSeconds: number;
  latencySeconds: number;
}

export type ProbeOutcome =
  | { ok: true; result: ProbeResult; response: string }
  | {
      ok: false;
      /**
       * connection: no HTTP exchange; http: a status other than 200; invalid: a 200 that is no
       * generation; no-answer: reasoning only; wrong-answer: the known answer is missing.
       */
      kind: "connection" | "http" | "invalid" | "no-answer" | "wrong-answer";
      /** Whether waiting may help (a server that is still starting). */
      retryable: boolean;
      /** Short and stable across runs, e.g. "HTTP 503" or "connection refused". */
      summary: string;
      message: string;
      response: string | null;
      error: unknown;
    };

export function probeMaxTokens(policy: VerifyPolicy): number {
  return policy.thinkingToggle ? policy.probeMaxTokens : policy.probeMaxTokensThinking;
}

export function probeRequestBody(model: string, policy: VerifyPolicy, sampling: boolean): Record<string, unknown> {
  const body: Record<string, unknown> = {
    model,
    messages: [{ role: "user", content: policy.probePrompt }],
    max_tokens: probeMaxTokens(policy),
    stream: true,
    stream_options: { include_usage: true },
  };
  // Greedy for the known answer; sampling for stability probes, because kernels used only for
  // sampling (FlashInfer's, compiled lazily on first use) never run under temperature 0.
  if (sampling) Object.assign(body, { temperature: 0.7, top_p: 0.9 });
  else body.temperature = 0;
  if (policy.thinkingToggle) body.chat_template_kwargs = { thinking: false };
  return body;
}

/** What arrived so far, fed by SSE events or by one JSON body (a server that ignores stream). */
class Answer {
  content = "";
  reasoning = "";
  usage: Usage | null = null;
  finishReason: string | null = null;
  done = false;
  ttft: number | null = null;
  ttfa: number | null = null;
  streamError: string | null = null;
  constructor(private readonly t0: number) {}

  add(content: unknown, reasoning: unknown): void {
    const now = (performance.now() - this.t0) / 1000;
    if (typeof reasoning === "string" && reasoning.length > 0) {
      this.reasoning += reasoning;
      this.ttft ??= now;
    }
    if (typeof content === "string" && content.length > 0) {
      this.content += content;
      this.ttft ??= now;
      if (this.ttfa === null && this.content.trim() !== "") this.ttfa = now;
    }
  }
}

export async function probeGeneration(
  dispatcher: Dispatcher,
  base: string,
  model: string,
  policy: VerifyPolicy,
  opts: { signal: AbortSignal; apiKey?: string; sampling: boolean },
): Promise<ProbeOutcome> {
  const url = `${base}/v1/chat/completions`;
  const t0 = performance.now();
  const want = policy.knownAnswer !== undefined && !opts.sampling ? policy.knownAnswer.toLowerCase() : null;
  const answer = new Answer(t0);
  // Enough seen: the answer started (and holds the known answer, when one is asked for).
  const enough = () => answer.ttfa !== null && (want === null || answer.content.toLowerCase().includes(want));
  // A benchmark follows that counts tokens from usage: a stability probe reads to the end to see it.
  const toEnd = policy.requireUsage && opts.sampling;
  // Stopping early aborts only this request; the caller's signal stays untouched.
  const local = armTimeout([opts.signal], null);
  let status = 0;
  let contentType = "";
  let raw = "";
  // The stream's own last words, for a diagnosis when it is cut (a crash mid-generation).
  let events = 0;
  let lastEvent: string | null = null;
  try {
    const res = await request(url, {
      method: "POST",
      dispatcher,
      signal: local.signal,
      headers: headers(opts.apiKey, true),
      body: JSON.stringify(probeRequestBody(model, policy, opts.sampling)),
    });
    status = res.statusCode;
    contentType = String(res.headers["content-type"] ?? "");
    if (status !== 200 || !contentType.includes("text/event-stream")) {
      raw = await res.body.text();
    } else {
      const parser = new SseParser();
      const onData = (payload: string) => {
        events++;
        lastEvent = payload;
        onEvent(answer, payload);
      };
      const body = res.body as AsyncIterable<Buffer>;
      for await (const chunk of body) {
        if (raw.length < 2000) raw += chunk.toString("utf8");
        parser.push(chunk, onData);
        if ((enough() && !toEnd) || answer.streamError !== null) break;
      }
      if (!enough() || toEnd) parser.end(onData);
      if (enough() && !toEnd) res.body.destroy();
    }
  } catch (err) {
    if (!enough() || toEnd) {
      const fatal = fatalNetworkError(err, url);
      return {
        ok: false,
        kind: "connection",
        retryable: fatal === null,
        summary: errorKind(err),
        message: fatal ?? `POST ${url}: ${describeError(err)}`,
        // Cut mid-stream: what the server said last, not an earlier request's answer.
        response:
          status === 0
            ? null
            : `HTTP ${status}, the stream was cut (${describeError(err)}) after ${events} event(s)${lastEvent === null ? "" : `; last event: ${truncate(lastEvent, 300)}`}`,
        error: err,
      };
    }
  } finally {
    local.clear();
  }
  const response = `HTTP ${status} ${truncate(raw)}`;
  if (status !== 200) {
    // 4xx other than timeout/rate-limit means the request itself is wrong (model name, key): waiting cannot fix it.
    const retryable = status >= 500 || status === 408 || status === 429;
    return fail("http", retryable, `HTTP ${status}`, `POST ${url} answered ${response}`, response);
  }
  const invalid = (why: string, retryable = true) =>
    fail(
      "invalid",
      retryable,
      "invalid completion",
      `POST ${url} answered HTTP 200 but no valid generation: ${why}`,
      response,
    );
  if (/text\/html/i.test(contentType) || /^\s*</.test(raw))
    return invalid("the body is an HTML page, not the OpenAI API (a login page or a proxy in front of it?)", false);
  if (!contentType.includes("text/event-stream")) {
    // A server that ignores `stream` answers one JSON completion: judge that the same way.
    let json: ChatCompletion | null;
    try {
      json = JSON.parse(raw) as ChatCompletion | null;
    } catch {
      return invalid("the body is neither an event stream nor JSON");
    }
    const choice = json?.choices?.[0];
    if (json === null || !choice) return invalid("no choices[0]");
    answer.add(choice.message?.content, choice.message?.reasoning_content);
    answer.usage = json.usage ?? null;
    answer.finishReason = choice.finish_reason ?? null;
    answer.done = true;
  }
  if (answer.streamError !== null) return invalid(answer.streamError);
  if (answer.finishReason !== null && answer.finishReason !== "stop" && answer.finishReason !== "length")
    return invalid(`finish_reason is ${JSON.stringify(answer.finishReason)}`);
  if (answer.ttfa === null) {
    if (answer.reasoning.trim() !== "" && answer.finishReason === "length") {
      return fail(
        "no-answer",
        false,
        "no answer",
        `POST ${url}: reasoning used the whole max_tokens budget (${probeMaxTokens(policy)}) and no visible answer came (finish_reason ${JSON.stringify(answer.finishReason)}); set thinkingToggle for a family whose template accepts it, or raise probeMaxTokensThinking`,
        response,
      );
    }
    if (!answer.done && answer.finishReason === null) return invalid("the stream ended before any answer");
    return invalid(
      answer.reasoning.trim() !== ""
        ? "the completion has reasoning but no visible content"
        : "the completion has no visible content",
    );
  }
  if (toEnd && answer.usage === null)
    return fail(
      "invalid",
      false,
      "no usage",
      `POST ${url}: the stream carried no usage although stream_options.include_usage was asked: the benchmark counts tokens from usage, so every benchmark request would fail; a server that reports usage in streams is needed`,
      response,
    );
  const completionTokens = answer.usage ? Number(answer.usage.completion_tokens) : null;
  if (completionTokens !== null && !(completionTokens > 0)) return invalid("usage.completion_tokens is 0");
  const result: ProbeResult = {
    completionTokens: completionTokens !== null && Number.isFinite(completionTokens) ? completionTokens : null,
    reasoningTokens: answer.usage ? reasoningTokensOf(answer.usage) : null,
    finishReason: answer.finishReason,
    content: truncate(answer.content, 200),
    reasoningCharacters: answer.reasoning.length,
    timeToFirstTokenSeconds: answer.ttft,
    timeToFirstAnswerSeconds: answer.ttfa,
    latencySeconds: (performance.now() - t0) / 1000,
  };
  if (want !== null && !answer.content.toLowerCase().includes(want)) {
    return fail(
      "wrong-answer",
      false,
      "wrong answer",
      `the known-answer probe (POST ${url}) expected ${JSON.stringify(policy.knownAnswer)} in the content, got ${JSON.stringify(truncate(answer.content, 200))}`,
      response,
    );
  }
  return { ok: true, result, response: `HTTP 200 ${truncate(JSON.stringify({ content: result.content }))}` };
}

function onEvent(answer: Answer, payload: string): void {
  if (payload === "[DONE]") {
    answer.done = true;
    return;
  }
  let json: ChatCompletionChunk | null;
  try {
    json = JSON.parse(payload) as ChatCompletionChunk | null;
  } catch {
    answer.streamError = `unparseable SSE data: ${truncate(payload, 200)}`;
    return;
  }
  if (json?.error !== undefined && json?.error !== null) {
    answer.streamError = `error event: ${truncate(JSON.stringify(json.error), 300)}`;
    return;
  }
  if (json?.usage) answer.usage = json.usage;
  const choice = json?.choices?.[0];
  if (!choice) return;
  answer.add(choice.delta?.content, choice.delta?.reasoning_content);
  if (choice.finish_reason) answer.finishReason = String(choice.finish_reason);
}

function fail(
  kind: "http" | "invalid" | "no-answer" | "wrong-answer",
  retryable: boolean,
  summary: string,
  message: string,
  response: string,
): ProbeOutcome {
  return { ok: false, kind, retryable, summary, message, response, error: null };
}

export function reasoningTokensOf(usage: Usage | null | undefined): number | null {
  const direct = usage?.reasoning_tokens;
  if (typeof direct === "number") return direct;
  const detailed = usage?.completion_tokens_details?.reasoning_tokens;
  return typeof detailed === "number" ? detailed : null;
}
