/**
 * One streamed chat completion, measured: time to first token, inter-token latencies, end-to-end
 * latency, and the token counts from the final usage chunk. Tokens are never counted from content
 * chunks: reasoning arrives in reasoning_content and speculative decoding sends several tokens per
 * chunk. A failure becomes the sample's error and never throws.
 *
 * Inter-token latency is per token, as SGLang's bench_serving computes it where it knows each chunk's
 * tokens (its native backend): an arrival's gap since the previous arrival is spread over the tokens
 * it carried. An arrival is one read from the socket, so several events written at once (a stream
 * interval) are one arrival, not gaps of 0 s. The OpenAI stream does not say how many tokens an event
 * holds: each event is taken to hold the request's mean, usage.completion_tokens / output events.
 */
import { request, type Dispatcher } from "undici";
import { describeError, headers, truncate } from "../transport/http";
import { reasoningTokensOf } from "../readiness/probe";
import { SseParser } from "../transport/sse";
import type { ChatCompletionChunk, Usage } from "../transport/wire";

/** The raw measurement of one request. Summaries are computed from these, never the other way round. */
export interface RequestSample {
  maxTokens: number;
  /** Seconds from the start of the run to sending the request. */
  startedAtSeconds: number;
  /**
   * Open loop: seconds from the start of the run to when the schedule had the request leave; sent
   * (startedAtSeconds) minus this is how late the client sent it. Absent in a closed loop.
   */
  scheduledAtSeconds?: number;
  /** Seconds to the first chunk with content or reasoning; null when none arrived. */
  ttftSeconds: number | null;
  /** Seconds to the first chunk with visible content (time to first answer token); null: no answer. */
  ttfaSeconds: number | null;
  /**
   * Per token after the first arrival: each arrival's gap since the previous one, divided by the
   * tokens it carried, once per token (see the file's comment). Empty until the request succeeds.
   */
  itlSeconds: number[];
  e2eSeconds: number;
  /** usage.completion_tokens of a successful request (reasoning included); 0 on error. */
  completionTokens: number;
  promptTokens: number;
  reasoningTokens: number | null;
  finishReason: string | null;
  /** Chunks that carried output, for comparison with completionTokens (speculative: fewer chunks). */
  outputChunks: number;
  /** Of those, chunks with reasoning_content and chunks with visible content. */
  reasoningChunks: number;
  answerChunks: number;
  /** Characters of those chunks' content and reasoning, as JavaScript counts them (UTF-16 units). */
  outputCharacters: number;
  error: string | null;
  /** The `model` the server's chunks named; null when they named none. */
  servedModel?: string | null;
}

export interface StreamRequest {
  url: string;
  body: Record<string, unknown>;
  apiKey?: string;
  signal: AbortSignal;
  dispatcher: Dispatcher;
  /** performance.now() of the run's start. */
  origin: number;
  onOutputChunk?: () => void;
}

export async function streamChat(req: StreamRequest): Promise<RequestSample> {
  const t0 = performance.now();
  const maxTokens = Number(req.body.max_tokens);
  const sample: RequestSample = {
    maxTokens,
    startedAtSeconds: (t0 - req.origin) / 1000,
    ttftSeconds: null,
    ttfaSeconds: null,
    itlSeconds: [],
    e2eSeconds: 0,
    completionTokens: 0,
    promptTokens: 0,
    reasoningTokens: null,
    finishReason: null,
    outputChunks: 0,
    reasoningChunks: 0,
    answerChunks: 0,
    outputCharacters: 0,
    error: null,
    servedModel: null,
  };
  // Assigned inside onData, which flow analysis does not see: without the assertion TypeScript takes it for always null.
  let usage = null as Usage | null;
  let done = false;
  let streamError: string | null = null;
  // When the socket read being parsed arrived; the output arrivals after the first, each with its gap
  // since the previous one and the output events it carried.
  let readAt = t0;
  let last = t0;
  const arrivals: { gapSeconds: number; events: number }[] = [];
  let headersCame = false;
  const onData = (payload: string) => {
    if (payload === "[DONE]") {
      done = true;
      return;
    }
    let json: ChatCompletionChunk;
    try {
      json = JSON.parse(payload) as ChatCompletionChunk;
    } catch {
      streamError = `unparseable SSE data: ${truncate(payload, 200)}`;
      return;
    }
    if (json.error !== undefined && json.error !== null) {
      streamError = `error event: ${truncate(JSON.stringify(json.error), 300)}`;
      return;
    }
    if (json.usage) usage = json.usage;
    if (typeof json.model === "string" && json.model.length > 0) sample.servedModel = json.model;
    const choice = json.choices?.[0];
    if (choice === undefined) return;
    const delta = choice.delta;
    if (delta && (nonEmpty(delta.content) || nonEmpty(delta.reasoning_content))) {
      const now = readAt;
      if (sample.outputChunks === 0) sample.ttftSeconds = (now - t0) / 1000;
      else if (now !== last) arrivals.push({ gapSeconds: (now - last) / 1000, events: 1 });
      // Another event of the same read (of the first arrival, whose tokens TTFT covers, when none is kept).
      else if (arrivals.length > 0) arrivals[arrivals.length - 1].events++;
      last = now;
      sample.outputChunks++;
      sample.outputCharacters += lengthOf(delta.content) + lengthOf(delta.reasoning_content);
      if (nonEmpty(delta.reasoning_content)) sample.reasoningChunks++;
      if (nonEmpty(delta.content)) {
        if (sample.answerChunks === 0) sample.ttfaSeconds = (now - t0) / 1000;
        sample.answerChunks++;
      }
      req.onOutputChunk?.();
    }
    if (choice.finish_reason) sample.finishReason = choice.finish_reason;
  };
  try {
    const res = await request(req.url, {
      method: "POST",
      dispatcher: req.dispatcher,
      signal: req.signal,
      headers: headers(req.apiKey, true),
      body: JSON.stringify(req.body),
    });
    headersCame = true;
    if (res.statusCode !== 200) {
      const text = await res.body.text();
      sample.error = `HTTP ${res.statusCode} ${truncate(text, 300)}`;
    } else {
      const parser = new SseParser();
      for await (const chunk of res.body as AsyncIterable<Buffer>) {
        readAt = performance.now();
        parser.push(chunk, onData);
      }
      parser.end(onData);
      sample.error = streamEnd(streamError, done, usage !== null, sample.outputChunks);
    }
  } catch (err) {
    // What came before it failed: a hung server is told apart from one that stalled mid-answer.
    const seen = !headersCame
      ? "no response headers came"
      : sample.outputChunks === 0
        ? "the response headers came, then no token"
        : `${sample.outputChunks} output chunk${sample.outputChunks === 1 ? "" : "s"} came, then nothing`;
    sample.error = `${describeError(err)}: ${seen}`;
  }
  sample.e2eSeconds = (performance.now() - t0) / 1000;
  if (sample.error === null && usage !== null) {
    sample.completionTokens = Number(usage.completion_tokens) || 0;
    sample.promptTokens = Number(usage.prompt_tokens) || 0;
    sample.reasoningTokens = reasoningTokensOf(usage);
    if (sample.completionTokens <= 0) sample.error = "usage.completion_tokens is 0";
    else sample.itlSeconds = perTokenItl(arrivals, sample.completionTokens / sample.outputChunks);
  }
  if (sample.error !== null) sample.completionTokens = 0;
  return sample;
}

/** What a stream that came with HTTP 200 lacked at its end, or null: it was whole. */
function streamEnd(streamError: string | null, done: boolean, usage: boolean, outputChunks: number): string | null {
  if (streamError !== null) return streamError;
  if (!done) return "the stream ended without [DONE] (connection cut mid-stream)";
  if (!usage) return "the stream carried no usage (stream_options.include_usage ignored?)";
  // A reasoning model streams its thinking in reasoning_content: nothing at all is no answer of any kind.
  if (outputChunks === 0)
    return "HTTP 200 with nothing streamed (no choice carried content or reasoning): a failed request";
  return null;
}

/** Each arrival's gap spread over its tokens (events x tokens per event), one value per token. */
function perTokenItl(arrivals: { gapSeconds: number; events: number }[], tokensPerEvent: number): number[] {
  const out: number[] = [];
  for (const a of arrivals) {
    const tokens = a.events * tokensPerEvent;
    const each = a.gapSeconds / tokens;
    for (let i = Math.max(1, Math.round(tokens)); i > 0; i--) out.push(each);
  }
  return out;
}

function nonEmpty(v: unknown): boolean {
  return typeof v === "string" && v.length > 0;
}

function lengthOf(v: unknown): number {
  return typeof v === "string" ? v.length : 0;
}
