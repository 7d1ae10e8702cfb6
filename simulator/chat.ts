import { randomBytes } from "node:crypto";
import type { ServerResponse } from "node:http";
import {
  admitGeneration,
  completionText,
  planCompletion,
  requestTimes,
  tokenJson,
  type CompletionPlan,
} from "./generation";
import { BodyError, optionalInt, resetConnection, sendJson } from "./http-util";
import { mixSeed } from "./perf-model";
import { SimRequest } from "./scheduler";
import type { SimState } from "./state";
import { classifyContent, countChatPromptTokens, messageText, type ChatMessageLike } from "./text";

/** POST /v1/chat/completions, as SGLang's OpenAI-compatible server answers it. */
export function handleChat(state: SimState, body: Record<string, unknown>, res: ServerResponse): void {
  const messages = body.messages;
  if (!Array.isArray(messages) || messages.length === 0) throw new BodyError("messages: must be a non-empty array");
  messages.forEach((m, i) => {
    // What pydantic's validation in SGLang's protocol answers with 400, not a crash into a 500.
    if (m === null || typeof m !== "object" || Array.isArray(m))
      throw new BodyError(`messages.${i}: must be an object with role and content`);
    const { role, content } = m as { role?: unknown; content?: unknown };
    if (typeof role !== "string") throw new BodyError(`messages.${i}.role: must be a string`);
    if (content !== undefined && content !== null && typeof content !== "string" && !Array.isArray(content))
      throw new BodyError(`messages.${i}.content: must be a string or a list of content parts`);
  });
  const maxTokens = optionalInt(body, "max_completion_tokens") ?? optionalInt(body, "max_tokens");
  const promptTokens = countChatPromptTokens(messages as ChatMessageLike[]);
  if (maxTokens !== undefined && promptTokens + maxTokens > state.profile.model.contextLength) {
    throw new BodyError(
      `Requested token count exceeds the model's maximum context length of ${state.profile.model.contextLength} tokens. You requested a total of ${promptTokens + maxTokens} tokens: ${promptTokens} tokens from the input messages and ${maxTokens} tokens for the completion. Please reduce the number of tokens in the input messages or the completion to fit within the limit.`,
    );
  }
  const kwargs = (body.chat_template_kwargs ?? {}) as Record<string, unknown>;
  let thinking = state.profile.model.thinkingByDefault;
  if (typeof kwargs.thinking === "boolean") thinking = kwargs.thinking;
  if (typeof kwargs.enable_thinking === "boolean") thinking = kwargs.enable_thinking;
  const stream = body.stream === true;
  const streamOptions = (body.stream_options ?? {}) as Record<string, unknown>;
  const includeUsage = stream && streamOptions.include_usage === true;
  const last = messages[messages.length - 1] as ChatMessageLike;
  // Greedy decoding (temperature 0) is deterministic: the same messages get the same answer, its
  // length included, as a real engine's do (a refresh's health check compares them).
  const greedySeed =
    body.temperature === 0 ? textSeed((messages as ChatMessageLike[]).map(messageText).join("\n")) : undefined;
  const seed = typeof body.seed === "number" ? body.seed : greedySeed;
  const ignoreEos = body.ignore_eos === true;

  state.truth.requestsReceived++;
  admitGeneration(state, res, () => {
    const plan = planCompletion(state, {
      promptTokens,
      promptText: messageText(last),
      content: classifyContent((messages as ChatMessageLike[]).map(messageText).join("\n")),
      maxTokens,
      thinking,
      ignoreEos,
      seed,
    });
    const id = `chatcmpl-${randomBytes(12).toString("hex")}`;
    const created = Math.floor(Date.now() / 1000);
    if (stream) streamChat(state, res, plan, id, created, includeUsage);
    else completeChat(state, res, plan, id, created);
  });
}

function usageOf(state: SimState, plan: CompletionPlan, completionTokens: number) {
  const reasoning = state.profile.model.reportReasoningTokens ? Math.min(plan.reasoningTokens, completionTokens) : 0;
  return {
    prompt_tokens: plan.promptTokens,
    total_tokens: plan.promptTokens + completionTokens,
    completion_tokens: completionTokens,
    prompt_tokens_details: null,
    reasoning_tokens: reasoning,
    completion_tokens_details: { reasoning_tokens: reasoning },
  };
}

function record(state: SimState, req: SimRequest, plan: CompletionPlan, id: string, stream: boolean): void {
  const t = requestTimes(req);
  state.truth.complete({
    id,
    endpoint: "chat",
    stream,
    promptTokens: plan.promptTokens,
    completionTokens: req.emitted,
    reasoningTokens: Math.min(plan.reasoningTokens, req.emitted),
    finishReason: plan.finishReason,
    queueSeconds: t.queue,
    timeToFirstTokenSeconds: t.ttft,
    e2eLatencySeconds: t.e2e,
    specVerifyCount: state.profile.speculative ? req.steps : null,
  });
}

/** Client went away before the end: SGLang aborts the request and frees its slot. */
function abortOnClose(state: SimState, res: ServerResponse, req: SimRequest): void {
  res.on("close", () => {
    if (req.phase !== "done" && req.phase !== "aborted") {
      state.scheduler.abort(req);
      state.truth.requestsAborted++;
    }
  });
}

function completeChat(state: SimState, res: ServerResponse, plan: CompletionPlan, id: string, created: number): void {
  const req = new SimRequest(
    { promptTokens: plan.promptTokens, limit: plan.limit, internal: false, content: plan.content },
    () => {},
    (done) => {
      if (plan.resetAtLimit) {
        state.truth.fail("reset-mid-stream");
        resetConnection(res);
        return;
      }
      const text = completionText(plan, 0, done.emitted);
      const hasParser = state.profile.model.reasoningParser !== null;
      record(state, done, plan, id, false);
      sendJson(res, 200, {
        id,
        object: "chat.completion",
        created,
        model: state.servedModelName,
        choices: [
          {
            index: 0,
            message: {
              role: "assistant",
              content: text.content.length ? text.content : null,
              reasoning_content: hasParser && text.reasoning.length ? text.reasoning : null,
              tool_calls: null,
            },
            logprobs: null,
            finish_reason: plan.finishReason,
            matched_stop: plan.finishReason === "stop" ? 163586 : null,
          },
        ],
        usage: usageOf(state, plan, done.emitted),
        metadata: { weight_version: "default" },
      });
    },
  );
  abortOnClose(state, res, req);
  state.submit(req);
}

function streamChat(
  state: SimState,
  res: ServerResponse,
  plan: CompletionPlan,
  id: string,
  created: number,
  includeUsage: boolean,
): void {
  res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache", connection: "keep-alive" });
  res.socket?.setNoDelay(true);
  const head = `data: {"id":"${id}","object":"chat.completion.chunk","created":${created},"model":${JSON.stringify(state.servedModelName)},"choices":[{"index":0,"delta":{`;
  const tail = `},"logprobs":null,"finish_reason":null}],"usage":null}\n\n`;
  const reasoningHead = `${head}"reasoning_content":`;
  const contentHead = `${head}"content":`;
  res.write(`${head}"role":"assistant","content":""${tail}`);
  let next = 0;
  const req = new SimRequest(
    { promptTokens: plan.promptTokens, limit: plan.limit, internal: false, content: plan.content },
    (_r, steps) => {
      // One write per tick: every step of this tick becomes one SSE event (two where a step
      // crosses from reasoning into the answer), concatenated.
      let out = "";
      for (const size of steps) {
        const end = next + size;
        if (size === 1) {
          out += (next < plan.reasoningTokens ? reasoningHead : contentHead) + tokenJson(plan, next) + tail;
        } else {
          const text = completionText(plan, next, end);
          if (text.reasoning.length) out += reasoningHead + JSON.stringify(text.reasoning) + tail;
          if (text.content.length) out += contentHead + JSON.stringify(text.content) + tail;
        }
        next = end;
      }
      res.write(out);
    },
    (done) => {
      if (plan.resetAtLimit) {
        state.truth.fail("reset-mid-stream");
        resetConnection(res);
        return;
      }
      record(state, done, plan, id, true);
      const base = { id, object: "chat.completion.chunk", created, model: state.servedModelName };
      let out = `data: ${JSON.stringify({
        ...base,
        choices: [
          {
            index: 0,
            delta: {},
            logprobs: null,
            finish_reason: plan.finishReason,
            matched_stop: plan.finishReason === "stop" ? 163586 : null,
          },
        ],
        usage: null,
      })}\n\n`;
      if (includeUsage)
        out += `data: ${JSON.stringify({ ...base, choices: [], usage: usageOf(state, plan, done.emitted) })}\n\n`;
      res.end(`${out}data: [DONE]\n\n`);
    },
  );
  abortOnClose(state, res, req);
  state.submit(req);
}

/** A seed from TEXT (its UTF-16 code units, mixed): the same text, the same seed. */
function textSeed(text: string): number {
  let h = 0;
  for (let i = 0; i < text.length; i++) h = mixSeed(h, text.charCodeAt(i));
  return h;
}
