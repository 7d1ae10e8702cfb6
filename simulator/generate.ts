import { randomBytes } from "node:crypto";
import type { ServerResponse } from "node:http";
import { admitGeneration, completionText, planCompletion, requestTimes, type CompletionPlan } from "./generation";
import { BodyError, optionalInt, resetConnection, sendJson } from "./http-util";
import { SimRequest } from "./scheduler";
import type { SimState } from "./state";
import { countTextTokens } from "./text";

/**
 * POST /generate, SGLang's native API. Raw text in, no chat template, so no reasoning: the text
 * is what the model continues. Streaming sends the cumulative text, as SGLang does by default.
 */
export function handleGenerate(state: SimState, body: Record<string, unknown>, res: ServerResponse): void {
  let promptText = "";
  let promptTokens: number;
  if (typeof body.text === "string") {
    promptText = body.text;
    promptTokens = countTextTokens(promptText);
  } else if (Array.isArray(body.input_ids)) {
    promptTokens = body.input_ids.length;
  } else {
    throw new BodyError("text or input_ids: one of them is required");
  }
  const sampling = (body.sampling_params ?? {}) as Record<string, unknown>;
  // SGLang's default max_new_tokens for the native API.
  const maxTokens = optionalInt(sampling, "max_new_tokens") ?? 128;
  const context = state.profile.model.contextLength;
  if (promptTokens + maxTokens > context) {
    throw new BodyError(
      `Requested token count exceeds the model's maximum context length of ${context} tokens: ${promptTokens} prompt tokens + ${maxTokens} max_new_tokens.`,
    );
  }
  const ignoreEos = sampling.ignore_eos === true;
  const stream = body.stream === true;

  state.truth.requestsReceived++;
  admitGeneration(state, res, () => {
    const plan = planCompletion(state, {
      promptTokens,
      promptText,
      maxTokens,
      thinking: false,
      ignoreEos,
      seed: undefined,
      // Token ids with no text are what bench_serving's random dataset sends.
      content: typeof body.text === "string" ? undefined : "random",
    });
    const id = randomBytes(16).toString("hex");
    if (stream) {
      res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache" });
      res.socket?.setNoDelay(true);
    }
    let text = "";
    const req = new SimRequest(
      { promptTokens, limit: plan.limit, internal: false, content: plan.content },
      (r) => {
        if (!stream) return;
        text = completionText(plan, 0, r.emitted).content;
        res.write(`data: ${JSON.stringify({ text, meta_info: metaInfo(state, plan, r, id, false) })}\n\n`);
      },
      (done) => {
        if (plan.resetAtLimit) {
          state.truth.fail("reset-mid-stream");
          resetConnection(res);
          return;
        }
        const t = requestTimes(done);
        state.truth.complete({
          id,
          endpoint: "generate",
          stream,
          promptTokens,
          completionTokens: done.emitted,
          reasoningTokens: 0,
          finishReason: plan.finishReason,
          queueSeconds: t.queue,
          timeToFirstTokenSeconds: t.ttft,
          e2eLatencySeconds: t.e2e,
          specVerifyCount: state.profile.speculative ? done.steps : null,
        });
        const final = {
          text: completionText(plan, 0, done.emitted).content,
          meta_info: metaInfo(state, plan, done, id, true),
        };
        if (stream) res.end(`data: ${JSON.stringify(final)}\n\ndata: [DONE]\n\n`);
        else sendJson(res, 200, final);
      },
    );
    res.on("close", () => {
      if (req.phase !== "done" && req.phase !== "aborted") {
        state.scheduler.abort(req);
        state.truth.requestsAborted++;
      }
    });
    state.submit(req);
  });
}

function metaInfo(
  state: SimState,
  plan: CompletionPlan,
  req: SimRequest,
  id: string,
  finished: boolean,
): Record<string, unknown> {
  const t = requestTimes(req);
  const meta: Record<string, unknown> = {
    id,
    finish_reason: finished
      ? plan.finishReason === "length"
        ? { type: "length", length: req.emitted }
        : { type: "stop", matched: 163586 }
      : null,
    prompt_tokens: plan.promptTokens,
    completion_tokens: req.emitted,
    cached_tokens: 0,
    e2e_latency: finished ? t.e2e : Math.max(0, state.clock.now() - req.arrivalSim),
  };
  if (state.profile.speculative) {
    const verify = Math.max(1, req.steps);
    meta.spec_verify_ct = verify;
    meta.spec_accept_length = req.emitted / verify;
  }
  return meta;
}
