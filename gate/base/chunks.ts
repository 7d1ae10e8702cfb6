/**
 * The chat-chunk reader: what one SSE data payload of a streamed chat completion says, read the one
 * way both the readiness probe (readiness/probe.ts) and the benchmark's stream (run/stream.ts) read
 * it. A leaf: it imports only the transport's helpers and wire types.
 */
import { truncate } from "../transport/http";
import type { ChatCompletionChunk, Usage } from "../transport/wire";

/** One streamed event: the end marker, a payload that breaks the stream, or a chunk. */
export type ChunkEvent =
  | { kind: "done" }
  /** Not JSON, or an error event some servers send mid-stream instead of a chunk. */
  | { kind: "broken"; error: string }
  | {
      kind: "chunk";
      usage: Usage | null;
      /** The model the chunk names; null when it names none. */
      model: string | null;
      /** choices[0].delta's text; null when the chunk has no first choice. */
      delta: { content?: unknown; reasoning_content?: unknown } | null;
      finishReason: string | null;
    };

export function readChunk(payload: string): ChunkEvent {
  if (payload === "[DONE]") return { kind: "done" };
  let json: ChatCompletionChunk | null;
  try {
    json = JSON.parse(payload) as ChatCompletionChunk | null;
  } catch {
    return { kind: "broken", error: `unparseable SSE data: ${truncate(payload, 200)}` };
  }
  if (json?.error !== undefined && json?.error !== null)
    return { kind: "broken", error: `error event: ${truncate(JSON.stringify(json.error), 300)}` };
  const choice = json?.choices?.[0];
  return {
    kind: "chunk",
    usage: json?.usage ?? null,
    model: typeof json?.model === "string" && json.model.length > 0 ? json.model : null,
    delta: choice ? (choice.delta ?? {}) : null,
    finishReason: choice?.finish_reason ? String(choice.finish_reason) : null,
  };
}

/** Reasoning tokens of a usage: some servers report them at the top, others under completion_tokens_details. */
export function reasoningTokensOf(usage: Usage | null | undefined): number | null {
  const direct = usage?.reasoning_tokens;
  if (typeof direct === "number") return direct;
  const detailed = usage?.completion_tokens_details?.reasoning_tokens;
  return typeof detailed === "number" ? detailed : null;
}

export function nonEmpty(v: unknown): boolean {
  return typeof v === "string" && v.length > 0;
}
