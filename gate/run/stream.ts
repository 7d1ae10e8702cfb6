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
import { nonEmpty, readChunk, reasoningTokensOf } from "../base/chunks";
import { SseParser } from "../transport/sse";
import type { Usage } from "../transport/wire";
import type { RequestSample } from "../base/samples";

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
  const sample = emptySample(Number(req.body.max_tokens), (t0 - req.origin) / 1000);
  const reader = new StreamReader(sample, t0, req.onOutputChunk);
  let headersCame = false;
  try {
    const res = await request(req.url, {
      method: "POST",
      dispatcher: req.dispatcher,
      signal: req.signal,
      headers: headers(req.apiKey, true),
      body: JSON.stringify(req.body),
    });
    headersCame = true;
    sample.error = await reader.read(res);
  } catch (err) {
    sample.error = `${describeError(err)}: ${whatCame(headersCame, sample.outputChunks)}`;
  }
  sample.e2eSeconds = (performance.now() - t0) / 1000;
  reader.finish();
  return sample;
}

function emptySample(maxTokens: number, startedAtSeconds: number): RequestSample {
  return {
    maxTokens,
    startedAtSeconds,
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
}

/** What came before a request failed: a hung server is told apart from one that stalled mid-answer. */
function whatCame(headersCame: boolean, outputChunks: number): string {
  if (!headersCame) return "no response headers came";
  if (outputChunks === 0) return "the response headers came, then no token";
  return `${outputChunks} output chunk${outputChunks === 1 ? "" : "s"} came, then nothing`;
}

/** One response's events, parsed into its sample as they arrive. */
class StreamReader {
  private usage: Usage | null = null;
  private done = false;
  private streamError: string | null = null;
  /** When the socket read being parsed arrived, and the last output arrival. */
  private readAt: number;
  private last: number;
  /** The output arrivals after the first, each with its gap since the previous one and the output events it carried. */
  private readonly arrivals: { gapSeconds: number; events: number }[] = [];

  constructor(
    private readonly sample: RequestSample,
    private readonly t0: number,
    private readonly onOutputChunk?: () => void,
  ) {
    this.readAt = t0;
    this.last = t0;
  }

  /** Reads a response to its end; what it lacked, or null: it was whole. */
  async read(res: Dispatcher.ResponseData): Promise<string | null> {
    if (res.statusCode !== 200) return `HTTP ${res.statusCode} ${truncate(await res.body.text(), 300)}`;
    const parser = new SseParser();
    const onData = (payload: string) => this.onEvent(payload);
    for await (const chunk of res.body as AsyncIterable<Buffer>) {
      this.readAt = performance.now();
      parser.push(chunk, onData);
    }
    parser.end(onData);
    this.serverTiming(res.trailers, res.headers);
    return streamEnd(this.streamError, this.done, this.usage !== null, this.sample.outputChunks);
  }

  private onEvent(payload: string): void {
    const e = readChunk(payload);
    if (e.kind === "done") this.done = true;
    else if (e.kind === "broken") this.streamError = e.error;
    else {
      if (e.usage) this.usage = e.usage;
      if (e.model !== null) this.sample.servedModel = e.model;
      if (!e.delta) return;
      if (nonEmpty(e.delta.content) || nonEmpty(e.delta.reasoning_content)) this.onOutput(e.delta);
      if (e.finishReason) this.sample.finishReason = e.finishReason;
    }
  }

  private onOutput(delta: { content?: unknown; reasoning_content?: unknown }): void {
    const sample = this.sample;
    const now = this.readAt;
    if (sample.outputChunks === 0) sample.ttftSeconds = (now - this.t0) / 1000;
    else if (now !== this.last) this.arrivals.push({ gapSeconds: (now - this.last) / 1000, events: 1 });
    // Another event of the same read (of the first arrival, whose tokens TTFT covers, when none is kept).
    else if (this.arrivals.length > 0) this.arrivals[this.arrivals.length - 1].events++;
    this.last = now;
    sample.outputChunks++;
    sample.outputCharacters += lengthOf(delta.content) + lengthOf(delta.reasoning_content);
    if (nonEmpty(delta.reasoning_content)) sample.reasoningChunks++;
    if (nonEmpty(delta.content)) {
      if (sample.answerChunks === 0) sample.ttfaSeconds = (now - this.t0) / 1000;
      sample.answerChunks++;
    }
    this.onOutputChunk?.();
  }

  /** The server's own timing of this request, where it states one (a Server-Timing trailer or header). */
  private serverTiming(trailers: Record<string, string> | undefined, head: Dispatcher.ResponseData["headers"]): void {
    const raw = trailers?.["server-timing"] ?? head["server-timing"];
    const timing = parseServerTiming(Array.isArray(raw) ? raw.join(",") : raw);
    if (timing === null || this.sample.ttftSeconds === null) return;
    this.sample.serverTiming = {
      ...timing,
      clientLastTokenSeconds: (this.last - this.t0) / 1000,
    };
  }

  /** The token counts of a request that succeeded; a failed one counts none. */
  finish(): void {
    const { sample, usage } = this;
    if (sample.error === null && usage !== null) {
      sample.completionTokens = Number(usage.completion_tokens) || 0;
      sample.promptTokens = Number(usage.prompt_tokens) || 0;
      sample.reasoningTokens = reasoningTokensOf(usage);
      if (sample.completionTokens <= 0) sample.error = "usage.completion_tokens is 0";
      else sample.itlSeconds = perTokenItl(this.arrivals, sample.completionTokens / sample.outputChunks);
    }
    if (sample.error !== null) sample.completionTokens = 0;
  }
}

/**
 * The Server-Timing metrics a server may state for a request (W3C Server Timing, as a trailer
 * after its last event or as a header): SERVER_FIRST_TOKEN and SERVER_LAST_TOKEN, each `dur` in
 * milliseconds from when it received the request to when it wrote its first, and its last, output
 * event. Null unless both are there and are numbers.
 */
export function parseServerTiming(
  value: string | undefined,
): { firstTokenSeconds: number; lastTokenSeconds: number } | null {
  if (value === undefined) return null;
  const dur = new Map<string, number>();
  for (const metric of value.split(",")) {
    const [name, ...params] = metric.split(";").map((p) => p.trim());
    const d = params.find((p) => p.startsWith("dur="));
    if (d !== undefined) dur.set(name, Number(d.slice(4)));
  }
  const first = dur.get(SERVER_FIRST_TOKEN);
  const last = dur.get(SERVER_LAST_TOKEN);
  if (first === undefined || last === undefined || !Number.isFinite(first) || !Number.isFinite(last)) return null;
  return { firstTokenSeconds: first / 1000, lastTokenSeconds: last / 1000 };
}

/** The Server-Timing metric names a server states its own timing of a request with (parseServerTiming). */
export const SERVER_FIRST_TOKEN = "first-token";
export const SERVER_LAST_TOKEN = "last-token";

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

function lengthOf(v: unknown): number {
  return typeof v === "string" ? v.length : 0;
}
