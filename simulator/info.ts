import type { ServerResponse } from "node:http";
import { sendJson, sendText } from "./http-util";
import { expectedRun, theoreticalLevel } from "./perf-model";
import { SimRequest } from "./scheduler";
import type { Histogram, SimState } from "./state";

/** How long SGLang's health check waits for any output (SGLANG_HEALTH_CHECK_TIMEOUT), simulated seconds. */
export const HEALTH_CHECK_TIMEOUT_SECONDS = 20;

/** GET /v1/models: a card built from memory. It proves nothing about generation, exactly as in SGLang. */
export function handleModels(state: SimState, res: ServerResponse): void {
  sendJson(res, 200, {
    object: "list",
    data: [
      {
        id: state.servedModelName,
        object: "model",
        created: Math.floor(Date.now() / 1000),
        owned_by: "sglang",
        root: state.servedModelName,
        max_model_len: state.profile.model.contextLength,
      },
    ],
  });
}

/**
 * GET /health and /health_generate (one handler in SGLang): 503 while starting; otherwise a
 * 1-token internal generation, then once a second: healthy as soon as the scheduler has sent
 * *any* output since the check began. The output itself is never looked at.
 */
export function handleHealth(state: SimState, res: ServerResponse): void {
  if (state.status !== "ready") {
    res.writeHead(503).end();
    return;
  }
  const tic = state.clock.now();
  const probe = new SimRequest(
    { promptTokens: 4, limit: 1, internal: true },
    () => {},
    () => {},
  );
  state.submit(probe);
  let waited = 0;
  const poll = (): void => {
    waited += 1;
    if (state.scheduler.lastTokenSim > tic) {
      state.scheduler.abort(probe);
      res.writeHead(200).end();
    } else if (waited >= HEALTH_CHECK_TIMEOUT_SECONDS) {
      state.scheduler.abort(probe);
      state.log(
        `Health check failed. Server couldn't get a response from detokenizer for last ${HEALTH_CHECK_TIMEOUT_SECONDS} seconds.`,
      );
      res.writeHead(503).end();
    } else {
      timer = state.clock.after(1, poll);
    }
  };
  let timer = state.clock.after(1, poll);
  res.on("close", () => {
    clearTimeout(timer);
    state.scheduler.abort(probe);
  });
}

export function handleServerInfo(state: SimState, res: ServerResponse): void {
  const p = state.profile;
  const spec = p.speculative;
  const recent = state.scheduler.recentRates(10);
  const internal: Record<string, unknown> = {
    last_gen_throughput: recent.tokensPerSecond,
    memory_usage: {
      weight: (p.model.weightsGB / p.hardware.count) * 0.931,
      kvcache: p.hardware.memoryGiBPerGpu * 0.25,
      token_capacity: 1_000_000,
    },
  };
  if (spec) internal.avg_spec_accept_length = recent.acceptLength ?? 0;
  sendJson(res, 200, {
    model_path: p.model.path,
    tokenizer_path: p.model.path,
    served_model_name: state.servedModelName,
    host: state.host,
    port: state.port,
    tp_size: p.hardware.count,
    context_length: p.model.contextLength,
    mem_fraction_static: p.memFractionStatic,
    max_running_requests: p.decode.maxRunningRequests,
    reasoning_parser: p.model.reasoningParser,
    tool_call_parser: p.model.toolCallParser,
    trust_remote_code: true,
    enable_metrics: p.enableMetrics,
    api_key: state.apiKey === null ? null : "<redacted>",
    speculative_algorithm: spec?.algorithm ?? null,
    speculative_draft_model_path: spec?.draftModelPath ?? null,
    speculative_num_steps: spec?.numSteps ?? null,
    speculative_eagle_topk: spec?.eagleTopk ?? null,
    speculative_num_draft_tokens: spec?.numDraftTokens ?? null,
    internal_states: [internal],
    version: "0.5.6-sim",
  });
}

export function handleModelInfo(state: SimState, res: ServerResponse): void {
  sendJson(res, 200, {
    model_path: state.profile.model.path,
    tokenizer_path: state.profile.model.path,
    is_generation: true,
  });
}

/** GET /metrics: Prometheus text with SGLang's metric names; every duration in simulated seconds. */
export function handleMetrics(state: SimState, res: ServerResponse): void {
  if (!state.profile.enableMetrics) {
    sendJson(res, 404, { detail: "Not Found" });
    return;
  }
  const labels = `model_name=${JSON.stringify(state.servedModelName)}`;
  const s = state.scheduler;
  const recent = s.recentRates(10);
  const out: string[] = [];
  const metric = (name: string, type: string, help: string, value: number): void => {
    out.push(`# HELP sglang:${name} ${help}`, `# TYPE sglang:${name} ${type}`, `sglang:${name}{${labels}} ${value}`);
  };
  metric("prompt_tokens_total", "counter", "Number of prefill tokens processed.", s.totals.clientPromptTokens);
  metric("generation_tokens_total", "counter", "Number of generation tokens processed.", s.totals.clientTokens);
  metric("num_requests_total", "counter", "Number of requests processed.", state.truth.requestsCompleted);
  metric("num_running_reqs", "gauge", "The number of running requests.", s.running.length);
  metric("num_queue_reqs", "gauge", "The number of requests in the waiting queue.", s.queue.length);
  metric("gen_throughput", "gauge", "The generation throughput (token/s).", recent.tokensPerSecond);
  if (state.profile.speculative)
    metric(
      "spec_accept_length",
      "gauge",
      "The average acceptance length of speculative decoding.",
      recent.acceptLength ?? 0,
    );
  histogram(
    out,
    "time_to_first_token_seconds",
    "Histogram of time to first token in seconds.",
    labels,
    state.truth.ttft,
  );
  histogram(
    out,
    "e2e_request_latency_seconds",
    "Histogram of End-to-end request latency in seconds",
    labels,
    state.truth.e2e,
  );
  sendText(res, 200, `${out.join("\n")}\n`, "text/plain; version=0.0.4; charset=utf-8");
}

function histogram(out: string[], name: string, help: string, labels: string, h: Histogram): void {
  out.push(`# HELP sglang:${name} ${help}`, `# TYPE sglang:${name} histogram`);
  out.push(`sglang:${name}_sum{${labels}} ${h.sum}`);
  h.buckets.forEach((le, i) => out.push(`sglang:${name}_bucket{${labels},le="${le.toFixed(1)}"} ${h.counts[i]}`));
  out.push(`sglang:${name}_bucket{${labels},le="+Inf"} ${h.count}`, `sglang:${name}_count{${labels}} ${h.count}`);
}

const TRUTH_CONCURRENCIES = [1, 2, 4, 8, 16, 32, 48, 64, 96, 128];

/**
 * GET /sim/truth: what really happened, and what the model says should happen. Quantities are in
 * simulated seconds; `timeScale` converts: a wall-clock duration times timeScale is simulated time,
 * a wall-clock rate divided by timeScale is a simulated rate. Query `concurrency`, `prompt_tokens`
 * and `output_tokens` together for the expected result of a closed-loop run; `requests=1` adds
 * the per-request records.
 */
export function handleTruth(state: SimState, query: URLSearchParams, res: ServerResponse): void {
  const p = state.profile;
  const t = state.truth;
  const s = state.scheduler;
  const levels = [...new Set([...TRUTH_CONCURRENCIES, p.decode.maxRunningRequests])].sort((a, b) => a - b);
  const body: Record<string, unknown> = {
    profile: p.name,
    faults: [...state.faults],
    status: state.status,
    timeScale: state.timeScale,
    simulatedSeconds: state.clock.now(),
    wallSeconds: state.clock.wallSeconds(),
    loadSeconds: state.loadSeconds,
    tokensEmitted: s.totals.clientTokens,
    internalTokensEmitted: s.totals.internalTokens,
    promptTokensReceived: s.totals.clientPromptTokens,
    requests: {
      received: t.requestsReceived,
      completed: t.requestsCompleted,
      failed: t.failedTotal(),
      failedBy: t.failed,
      aborted: t.requestsAborted,
      running: s.running.filter((r) => !r.plan.internal).length,
      queued: s.queue.filter((r) => !r.plan.internal).length,
    },
    completed: {
      completionTokens: t.completedCompletionTokens,
      reasoningTokens: t.completedReasoningTokens,
      promptTokens: t.completedPromptTokens,
    },
    specAcceptLength: p.speculative ? s.lifetimeAcceptLength() : null,
    maxRunningRequests: p.decode.maxRunningRequests,
    theoretical: levels.map((c) => {
      const level = theoreticalLevel(p, c);
      return { ...level, wallAggregateTokensPerSecond: level.aggregateTokensPerSecond * state.timeScale };
    }),
  };
  const c = Number(query.get("concurrency"));
  const out = Number(query.get("output_tokens"));
  if (c > 0 && out > 0) body.expected = expectedRun(p, c, Number(query.get("prompt_tokens") ?? 0) || 0, out);
  if (query.get("requests") === "1") body.records = t.records;
  sendJson(res, 200, body);
}
