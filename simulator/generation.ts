import type { ServerResponse } from "node:http";
import { drawLength, seededRandom } from "../seeded-draws";
import { sendError } from "./http-util";
import { mixSeed } from "./perf-model";
import type { SimRequest } from "./scheduler";
import type { SimState } from "./state";
import type { ContentKind } from "./speculative";
import { ANSWER_VOCAB, GARBLED_VOCAB, REASONING_VOCAB, classifyContent, knownAnswer } from "./text";
import { tableAnswer } from "./answers";

/** What one generation will produce, decided when it arrives (seeded, so reproducible). */
export interface CompletionPlan {
  promptTokens: number;
  /** Tokens to produce, max_tokens and faults applied. */
  limit: number;
  /** The first `reasoningTokens` of them are reasoning. */
  reasoningTokens: number;
  finishReason: "stop" | "length";
  /** Tokens of a known answer ("Say just 'OK'"), or null for filler text. */
  answer: string[] | null;
  /** reset-mid-stream: the connection is reset instead of finishing. */
  resetAtLimit: boolean;
  /** What the prompt is, for speculative acceptance. */
  content: ContentKind;
  /** garbled-answers: the answer's words are other words (GARBLED_VOCAB). */
  garbled?: boolean;
}

export interface PlanInput {
  promptTokens: number;
  promptText: string;
  maxTokens: number | undefined;
  thinking: boolean;
  ignoreEos: boolean;
  seed: number | undefined;
  /** Default: classified from promptText. */
  content?: ContentKind;
}

export function planCompletion(state: SimState, input: PlanInput): CompletionPlan {
  const { profile } = state;
  const sequence = ++state.clientGenerations;
  const random = seededRandom(mixSeed(profile.seed, input.seed ?? sequence));
  const maxTokens = input.maxTokens ?? Math.max(0, profile.model.contextLength - input.promptTokens);
  const reasoningOn = input.thinking && profile.model.reasoningParser !== null && profile.reasoning !== null;
  let reasoning = 0;
  if (reasoningOn) reasoning = state.has("thinking-budget") ? Infinity : drawLength(profile.reasoning!.tokens, random);
  const answer = tableAnswer(state, input.promptText) ?? knownAnswer(input.promptText);
  let answerLength = Infinity;
  if (answer) answerLength = answer.length;
  else if (profile.answer.tokens) answerLength = Math.max(1, drawLength(profile.answer.tokens, random));
  const natural = input.ignoreEos ? Infinity : reasoning + answerLength;
  let limit = Math.min(natural, maxTokens);
  const finishReason = natural <= maxTokens ? "stop" : "length";
  let resetAtLimit = false;
  const reset = profile.faultSettings.resetMidStream;
  if (state.has("reset-mid-stream") && sequence % reset.everyNth === 0 && limit > reset.afterTokens) {
    limit = reset.afterTokens;
    resetAtLimit = true;
  }
  return {
    promptTokens: input.promptTokens,
    limit,
    reasoningTokens: Math.min(reasoning, limit),
    finishReason,
    answer,
    resetAtLimit,
    content: input.content ?? classifyContent(input.promptText),
    garbled: state.has("garbled-answers"),
  };
}

/** Text of completion tokens [from, to), split into its reasoning and content parts. */
export function completionText(plan: CompletionPlan, from: number, to: number): { reasoning: string; content: string } {
  let reasoning = "";
  let content = "";
  for (let i = from; i < to; i++) {
    if (i < plan.reasoningTokens) reasoning += REASONING_VOCAB.words[i % REASONING_VOCAB.words.length];
    else content += contentToken(plan, i - plan.reasoningTokens);
  }
  return { reasoning, content };
}

export function contentToken(plan: CompletionPlan, j: number): string {
  if (plan.garbled) return GARBLED_VOCAB.words[j % GARBLED_VOCAB.words.length];
  return plan.answer ? (plan.answer[j] ?? "") : ANSWER_VOCAB.words[j % ANSWER_VOCAB.words.length];
}

/** JSON literal of completion token i: precomputed for filler, stringified for known answers. */
export function tokenJson(plan: CompletionPlan, i: number): string {
  if (i < plan.reasoningTokens) return REASONING_VOCAB.json[i % REASONING_VOCAB.json.length];
  const j = i - plan.reasoningTokens;
  if (plan.garbled) return GARBLED_VOCAB.json[j % GARBLED_VOCAB.json.length];
  return plan.answer ? JSON.stringify(plan.answer[j] ?? "") : ANSWER_VOCAB.json[j % ANSWER_VOCAB.json.length];
}

/**
 * Admission of a client generation: the faults that act before the scheduler sees it.
 * Calls `go` when the request may be submitted; otherwise the response is already answered.
 */
export function admitGeneration(state: SimState, res: ServerResponse, go: () => void): void {
  if (res.destroyed) {
    // The client gave up while its request was held (models-before-ready).
    state.truth.requestsAborted++;
    return;
  }
  if (state.status === "loading") {
    if (
      state.has("models-before-ready") &&
      state.profile.faultSettings.modelsBeforeReady.generationWhileLoading === "hang"
    ) {
      state.whenLoaded(() => admitGeneration(state, res, go));
      return;
    }
    state.truth.fail("loading-503");
    sendError(res, 503, "The server is still loading the model; retry later.");
    return;
  }
  const load = state.scheduler.running.filter((r) => !r.plan.internal).length + state.scheduler.queue.length;
  if (state.scheduler.queue.length >= state.maxQueuedRequests) {
    state.truth.fail("queue-full");
    sendError(res, 503, `The request queue is full (${state.scheduler.queue.length} waiting); retry later.`);
    return;
  }
  if (state.has("overload-500") && load >= state.profile.faultSettings.overload500.threshold) {
    state.truth.fail("overload-500");
    state.log(`ERROR: Internal server error: scheduler overloaded with ${load} requests`);
    sendError(res, 500, `Internal server error: too many requests in flight (${load})`);
    return;
  }
  if (!state.firstGenerationSeen) {
    state.firstGenerationSeen = true;
    if (state.has("jit-crash")) startJitCrash(state);
    else if (state.has("slow-first-request")) {
      // Submitted first: the compile starts once the request has arrived, so its e2e_latency holds
      // the whole compile as SGLang's does (stalling first lost the time between the two calls).
      go();
      const seconds = state.profile.faultSettings.slowFirstRequest.compileSeconds;
      state.log("flashinfer.jit: Loading JIT ops: sampling (first use; compiling)");
      state.scheduler.stall(seconds);
      state.clock.after(seconds, () =>
        state.log(`flashinfer.jit: Finished loading JIT ops: sampling (${seconds.toFixed(1)} s)`),
      );
      return;
    }
  }
  go();
}

/** FlashInfer compiles its sampling kernels on first use; without curand.h the compile dies, and the server with it. */
function startJitCrash(state: SimState): void {
  const { compileSeconds, exitCode } = state.profile.faultSettings.jitCrash;
  state.scheduler.stall(Infinity);
  state.log("flashinfer.jit: Loading JIT ops: sampling");
  state.clock.after(compileSeconds, () => {
    const cache = "/root/.cache/flashinfer/0.5.3/120a/generated/sampling";
    state.raw(
      `[1/3] /usr/local/cuda-13.0/bin/nvcc --generate-dependencies-with-compile -c ${cache}/sampling.cu -o ${cache}/sampling.cuda.o`,
    );
    state.raw(`FAILED: ${cache}/sampling.cuda.o`);
    state.raw(
      "In file included from /usr/local/lib/python3.12/dist-packages/flashinfer/data/include/flashinfer/sampling.cuh:19,",
    );
    state.raw(`                 from ${cache}/sampling.cu:16:`);
    state.raw(
      "/usr/local/lib/python3.12/dist-packages/flashinfer/data/include/flashinfer/sampling.cuh:25:10: fatal error: curand.h: No such file or directory",
    );
    state.raw("   25 | #include <curand.h>");
    state.raw("      |          ^~~~~~~~~~");
    state.raw("compilation terminated.");
    state.raw("ninja: build stopped: subcommand failed.");
    state.raw("RuntimeError: Ninja build failed.");
    state.log("Scheduler hit an exception: RuntimeError: Ninja build failed.");
    state.die(exitCode);
  });
}

/** Time from arrival to first token, to finish, and in the queue: simulated seconds, as reported. */
export function requestTimes(req: SimRequest): { ttft: number; e2e: number; queue: number } {
  return {
    ttft: Math.max(0, req.firstTokenSim - req.arrivalSim),
    e2e: Math.max(0, req.finishSim - req.arrivalSim),
    queue: Math.max(0, req.admitSim - req.arrivalSim),
  };
}
