/**
 * The servers' JSON bodies, as far as the gate reads them: the fields a compliant OpenAI-compatible
 * (or SGLang) server sends. These types are declared on JSON.parse results, not validated: every read
 * stays defensive (optional chaining, typeof checks, Number and String coercion), so a server that
 * sends something else is judged by those checks exactly as before, and a benchmark pays nothing per
 * streamed event.
 */

/** `usage` of a chat completion or of the final streamed chunk. */
export interface Usage {
  prompt_tokens?: number;
  completion_tokens?: number;
  /** Some servers report reasoning tokens here, others under completion_tokens_details. */
  reasoning_tokens?: number;
  completion_tokens_details?: { reasoning_tokens?: number } | null;
}

/** One event of POST /v1/chat/completions with stream: true. */
export interface ChatCompletionChunk {
  /** An error event some servers send mid-stream instead of a chunk. */
  error?: unknown;
  /** The model the server says answered (a server that ignores the request's `model` names its own). */
  model?: unknown;
  usage?: Usage | null;
  choices?: {
    delta?: { content?: string | null; reasoning_content?: string | null } | null;
    finish_reason?: string | null;
  }[];
}

/** POST /v1/chat/completions answered by a server that ignores stream: one JSON completion. */
export interface ChatCompletion {
  usage?: Usage | null;
  choices?: {
    message?: { content?: string | null; reasoning_content?: string | null } | null;
    finish_reason?: string | null;
  }[];
}

/** GET /v1/models. */
export interface ModelList {
  data?: ({ id?: string } | null)[] | null;
}

/** SGLang's POST /generate. */
export interface GenerateReply {
  meta_info?: { completion_tokens?: number; spec_verify_ct?: number } | null;
}

/** SGLang's GET /server_info (or /get_server_info on older servers). */
export interface ServerInfo {
  internal_states?: ({ avg_spec_accept_length?: number } | null)[] | null;
}
