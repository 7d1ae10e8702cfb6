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
import { readChunk, reasoningTokensOf } from "../base/chunks";
import { SseParser } from "../transport/sse";
import { armTimeout } from "../transport/timers";
import type { ChatCompletion, Usage } from "../transport/wire";

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

/** One probe's request and what decides when its reading may stop. */
interface Probe {
  dispatcher: Dispatcher;
  url: string;
  body: Record<string, unknown>;
  apiKey?: string;
  signal: AbortSignal;
  answer: Answer;
  /** Enough seen: the answer started (and holds the known answer, when one is asked for). */
  enough: () => boolean;
  /** Read to the end whatever was seen (a stability probe that must see usage). */
  toEnd: boolean;
}

/** The HTTP exchange as read: its status, its content type and the start of its body. */
interface Exchange {
  status: number;
  contentType: string;
  raw: string;
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
  const exchange = await readExchange({
    dispatcher,
    url,
    body: probeRequestBody(model, policy, opts.sampling),
    apiKey: opts.apiKey,
    signal: opts.signal,
    answer,
    enough: () => answer.ttfa !== null && (want === null || answer.content.toLowerCase().includes(want)),
    // A benchmark follows that counts tokens from usage: a stability probe reads to the end to see it.
    toEnd: policy.requireUsage && opts.sampling,
  });
  if ("ok" in exchange) return exchange;
  const response = `HTTP ${exchange.status} ${truncate(exchange.raw)}`;
  const failure =
    judgeExchange(url, exchange, answer, response) ??
    judgeProbeAnswer(url, policy, answer, policy.requireUsage && opts.sampling, response);
  if (failure !== null) return failure;
  const result = probeResult(answer, t0);
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

/**
 * Sends the probe and reads its answer: an event stream until enough is seen (then only this
 * request is aborted; the caller's signal stays untouched), any other body whole. A failure before
 * enough was seen is the connection's outcome, naming the stream's last words when it was cut.
 */
async function readExchange(p: Probe): Promise<Exchange | ProbeOutcome> {
  const { answer, enough, toEnd, url } = p;
  const local = armTimeout([p.signal], null);
  const ex: Exchange = { status: 0, contentType: "", raw: "" };
  // The stream's own last words, for a diagnosis when it is cut (a crash mid-generation).
  const seen = { events: 0, last: null as string | null };
  try {
    const res = await request(url, {
      method: "POST",
      dispatcher: p.dispatcher,
      signal: local.signal,
      headers: headers(p.apiKey, true),
      body: JSON.stringify(p.body),
    });
    ex.status = res.statusCode;
    ex.contentType = String(res.headers["content-type"] ?? "");
    if (ex.status !== 200 || !ex.contentType.includes("text/event-stream")) {
      ex.raw = await res.body.text();
    } else {
      const parser = new SseParser();
      const onData = (payload: string) => {
        seen.events++;
        seen.last = payload;
        onEvent(answer, payload);
      };
      const body = res.body as AsyncIterable<Buffer>;
      for await (const chunk of body) {
        if (ex.raw.length < 2000) ex.raw += chunk.toString("utf8");
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
          ex.status === 0
            ? null
            : `HTTP ${ex.status}, the stream was cut (${describeError(err)}) after ${seen.events} event(s)${seen.last === null ? "" : `; last event: ${truncate(seen.last, 300)}`}`,
        error: err,
      };
    }
  } finally {
    local.clear();
  }
  return ex;
}

const invalid = (url: string, why: string, response: string, retryable = true): ProbeOutcome =>
  fail(
    "invalid",
    retryable,
    "invalid completion",
    `POST ${url} answered HTTP 200 but no valid generation: ${why}`,
    response,
  );

/**
 * The exchange itself: a status other than 200, an HTML page, a body neither a stream nor JSON.
 * A server that ignores `stream` answers one JSON completion: it is read into ANSWER, judged the same way.
 */
function judgeExchange(url: string, ex: Exchange, answer: Answer, response: string): ProbeOutcome | null {
  if (ex.status !== 200) {
    // 4xx other than timeout/rate-limit means the request itself is wrong (model name, key): waiting cannot fix it.
    const retryable = ex.status >= 500 || ex.status === 408 || ex.status === 429;
    return fail("http", retryable, `HTTP ${ex.status}`, `POST ${url} answered ${response}`, response);
  }
  if (/text\/html/i.test(ex.contentType) || /^\s*</.test(ex.raw))
    return invalid(
      url,
      "the body is an HTML page, not the OpenAI API (a login page or a proxy in front of it?)",
      response,
      false,
    );
  if (ex.contentType.includes("text/event-stream")) return null;
  let json: ChatCompletion | null;
  try {
    json = JSON.parse(ex.raw) as ChatCompletion | null;
  } catch {
    return invalid(url, "the body is neither an event stream nor JSON", response);
  }
  const choice = json?.choices?.[0];
  if (json === null || !choice) return invalid(url, "no choices[0]", response);
  answer.add(choice.message?.content, choice.message?.reasoning_content);
  answer.usage = json.usage ?? null;
  answer.finishReason = choice.finish_reason ?? null;
  answer.done = true;
  return null;
}

/** The generation: an error event, an odd finish, reasoning without an answer, usage missing or zero. */
function judgeProbeAnswer(
  url: string,
  policy: VerifyPolicy,
  answer: Answer,
  toEnd: boolean,
  response: string,
): ProbeOutcome | null {
  if (answer.streamError !== null) return invalid(url, answer.streamError, response);
  if (answer.finishReason !== null && answer.finishReason !== "stop" && answer.finishReason !== "length")
    return invalid(url, `finish_reason is ${JSON.stringify(answer.finishReason)}`, response);
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
    if (!answer.done && answer.finishReason === null)
      return invalid(url, "the stream ended before any answer", response);
    return invalid(
      url,
      answer.reasoning.trim() !== ""
        ? "the completion has reasoning but no visible content"
        : "the completion has no visible content",
      response,
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
  if (completionTokens !== null && !(completionTokens > 0))
    return invalid(url, "usage.completion_tokens is 0", response);
  return null;
}

/** The figures of a probe that answered (its answer judged above). */
function probeResult(answer: Answer, t0: number): ProbeResult {
  const completionTokens = answer.usage ? Number(answer.usage.completion_tokens) : null;
  return {
    completionTokens: completionTokens !== null && Number.isFinite(completionTokens) ? completionTokens : null,
    reasoningTokens: answer.usage ? reasoningTokensOf(answer.usage) : null,
    finishReason: answer.finishReason,
    content: truncate(answer.content, 200),
    reasoningCharacters: answer.reasoning.length,
    timeToFirstTokenSeconds: answer.ttft,
    timeToFirstAnswerSeconds: answer.ttfa!,
    latencySeconds: (performance.now() - t0) / 1000,
  };
}

function onEvent(answer: Answer, payload: string): void {
  const e = readChunk(payload);
  if (e.kind === "done") answer.done = true;
  else if (e.kind === "broken") answer.streamError = e.error;
  else {
    if (e.usage) answer.usage = e.usage;
    if (!e.delta) return;
    answer.add(e.delta.content, e.delta.reasoning_content);
    if (e.finishReason) answer.finishReason = e.finishReason;
  }
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
