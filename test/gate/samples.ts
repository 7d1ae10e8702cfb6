/**
 * A request's sample as the stream records it, for the tests that judge samples written by hand
 * rather than measured.
 */
import type { RequestSample } from "../../gate/base/samples";

/**
 * A request of TOKENS completion tokens that ran to max_tokens ("length"), one token per chunk of four
 * characters, its first token 0.1 s after it was sent and its end 1 s after; OVER changes any field.
 */
export function requestSample(tokens: number, over: Partial<RequestSample> = {}): RequestSample {
  return {
    maxTokens: tokens,
    startedAtSeconds: 0,
    ttftSeconds: 0.1,
    ttfaSeconds: 0.1,
    itlSeconds: [],
    e2eSeconds: 1,
    completionTokens: tokens,
    promptTokens: 10,
    reasoningTokens: null,
    finishReason: "length",
    outputChunks: tokens,
    reasoningChunks: 0,
    answerChunks: tokens,
    outputCharacters: tokens * 4,
    error: null,
    ...over,
  };
}

/** A request of max_tokens TOKENS that failed with ERROR before its first token: nothing received. */
export function failedSample(tokens: number, error: string): RequestSample {
  return requestSample(tokens, {
    ttftSeconds: null,
    ttfaSeconds: null,
    completionTokens: 0,
    finishReason: null,
    outputChunks: 0,
    answerChunks: 0,
    outputCharacters: 0,
    error,
  });
}
