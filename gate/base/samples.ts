/**
 * What a run gathers and the judges read: each request's raw measurement, and the server's own
 * counters at a read. Declared here, below both, so that the judges (gate/judge) read what the run
 * (gate/run) gathers without importing it.
 */

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
  /**
   * Where the server stated its own timing of the request (parseServerTiming), the seconds from its
   * receiving the request to writing its first and last output events, beside when the client
   * received its last output (its first is ttftSeconds): the client's lag behind the server is the
   * difference. Absent where the server stated none.
   */
  serverTiming?: { firstTokenSeconds: number; lastTokenSeconds: number; clientLastTokenSeconds: number };
}

/**
 * The counters each server keeps, by name: generated tokens, prompt tokens, requests finished (null:
 * not kept); and the gauges of the requests it holds now, running and waiting (the load applied).
 */
export const SERVER_COUNTERS = {
  sglang: {
    generated: "sglang:generation_tokens_total",
    prompt: "sglang:prompt_tokens_total",
    requests: "sglang:num_requests_total",
    held: ["sglang:num_running_reqs", "sglang:num_queue_reqs"],
  },
  // llama-server --metrics counts tokens, not finished requests; its slots run, the rest are deferred.
  llamacpp: {
    generated: "llamacpp:tokens_predicted_total",
    prompt: "llamacpp:prompt_tokens_total",
    requests: null,
    held: ["llamacpp:requests_processing", "llamacpp:requests_deferred"],
  },
} as const;

export type ServerDialect = keyof typeof SERVER_COUNTERS;

/** What the counters said at one read, summed over the series of the model measured. */
export interface CounterSnapshot {
  dialect: ServerDialect;
  generatedTokens: number;
  promptTokens: number | null;
  /** Null where the server keeps no request counter (llama.cpp). */
  requests: number | null;
  /** Generated tokens of every model the server labels (model_name), the one measured included. */
  generatedByModel: Record<string, number>;
  /** process_start_time_seconds where the server exposes it: a change is a restart. */
  processStartSeconds: number | null;
  /** Requests the server holds at the read, running and waiting (its gauges); null where it keeps neither. */
  heldRequests: number | null;
}

export type CounterRead = { ok: true; snapshot: CounterSnapshot } | { ok: false; reason: string };
