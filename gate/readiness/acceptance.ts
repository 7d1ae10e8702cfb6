/**
 * Speculative acceptance as a readiness fact. Speculation that has collapsed to about one token per
 * verify step (a draft that does not match the target, a wrong draft path, a broken token map) is
 * slower than no speculation at all, yet the server is "healthy" and generates. So for EAGLE-3 and
 * DFlash services the gate measures acceptance on a realistic prompt and fails below a floor.
 *
 * Measured two ways, as SGLang reports it: per request from the native /generate's meta_info
 * (completion_tokens / spec_verify_ct), and server-wide from /server_info (older /get_server_info)
 * internal_states[0].avg_spec_accept_length.
 */
import parsePrometheusTextFormat from "parse-prometheus-text-format";
import { z } from "zod";
import type { Agent } from "undici";
import { baseUrl, describeError, fetchText, makeAgent, type Endpoint } from "../transport/http";
import { withTimeout } from "../transport/timers";
import { CHAT_PROMPTS } from "../base/prompts";
import type { GenerateReply, ServerInfo } from "../transport/wire";

export const AcceptanceFloorSchema = z
  .number()
  .min(1)
  .default(1.5)
  .describe(
    "Speculative services only: the least mean tokens per verify step that counts as working. Below it verification fails, naming the draft model (at ~1 token per step speculation is slower than none).",
  );

export interface AcceptanceMeasurement {
  /** completion_tokens / spec_verify_ct of one /generate request; null when the server reports none. */
  perRequest: number | null;
  completionTokens: number;
  verifyCount: number | null;
  /** avg_spec_accept_length from server info after the request; null when absent. */
  serverWide: number | null;
  error: string | null;
}

/** Tokens the acceptance check asks for (ignore_eos): enough verify steps for a stable ratio. */
export const ACCEPTANCE_TOKENS = 256;

export async function measureAcceptance(
  endpoint: Endpoint,
  opts: { maxTokens?: number; timeoutSeconds?: number; signal?: AbortSignal } = {},
): Promise<AcceptanceMeasurement> {
  const base = baseUrl(endpoint.url);
  const agent = makeAgent(2);
  const parent = opts.signal ?? new AbortController().signal;
  const out: AcceptanceMeasurement = {
    perRequest: null,
    completionTokens: 0,
    verifyCount: null,
    serverWide: null,
    error: null,
  };
  try {
    const seconds = opts.timeoutSeconds ?? 300;
    const reply = await withTimeout(
      [parent],
      seconds * 1000,
      () => `POST ${base}/generate: no answer within ${seconds} s`,
      (signal) =>
        fetchText(agent, `${base}/generate`, {
          method: "POST",
          apiKey: endpoint.apiKey,
          signal,
          body: {
            text: CHAT_PROMPTS[0],
            sampling_params: { max_new_tokens: opts.maxTokens ?? ACCEPTANCE_TOKENS, ignore_eos: true, temperature: 0 },
          },
        }),
    );
    if (reply.status !== 200)
      throw new Error(`POST /generate answered HTTP ${reply.status}: ${reply.text.slice(0, 200)}`);
    const meta = (JSON.parse(reply.text) as GenerateReply | null)?.meta_info ?? {};
    out.completionTokens = Number(meta.completion_tokens) || 0;
    const verify = Number(meta.spec_verify_ct);
    if (Number.isFinite(verify) && verify > 0) {
      out.verifyCount = verify;
      out.perRequest = out.completionTokens / verify;
    }
  } catch (err) {
    out.error = describeError(err);
  }
  try {
    // Read whether or not /generate answered: a server without it may still report server-wide.
    out.serverWide = await serverInfoAcceptance(agent, base, endpoint.apiKey, parent, 10_000);
  } finally {
    void agent.destroy().catch(() => undefined);
  }
  return out;
}

/** null when acceptance is at or above the floor; otherwise the reason, naming the draft model. */
export function acceptanceFailure(
  m: AcceptanceMeasurement,
  floor: number,
  service: { algorithm: string; draftModelPath: string },
): string | null {
  const value = m.perRequest ?? m.serverWide;
  const name = `${service.algorithm} draft model ${service.draftModelPath}`;
  if (value === null)
    return `could not measure speculative acceptance of the ${name}: ${m.error ?? "the server reported no spec_verify_ct and no avg_spec_accept_length"}`;
  if (value >= floor) return null;
  return `speculative acceptance ${value.toFixed(2)} tokens per verify step is below the floor ${floor} for the ${name}: speculation this poor is slower than autoregressive decoding; check that the draft matches the served model`;
}

/**
 * SGLang reports speculative acceptance in its server info (internal_states[0].avg_spec_accept_length)
 * and, with --enable-metrics, as the gauge sglang:spec_accept_length. Null for autoregressive services.
 */
export async function readAcceptanceLength(
  agent: Agent,
  base: string,
  apiKey: string | undefined,
  signal: AbortSignal,
): Promise<number | null> {
  return (
    (await serverInfoAcceptance(agent, base, apiKey, signal)) ?? (await metricsAcceptance(agent, base, apiKey, signal))
  );
}

/** One bounded GET; a server that hangs on one endpoint still gets asked the next. */
const boundedGet = (agent: Agent, url: string, apiKey: string | undefined, signal: AbortSignal, timeoutMs: number) =>
  withTimeout(
    [signal],
    timeoutMs,
    () => `GET ${url}: no answer within ${timeoutMs / 1000} s`,
    (s) => fetchText(agent, url, { apiKey, signal: s }),
  );

/**
 * avg_spec_accept_length from the server info: /server_info, else the older /get_server_info (the
 * first that answers 200 is the server's); null when neither reports it or neither answers.
 */
async function serverInfoAcceptance(
  agent: Agent,
  base: string,
  apiKey: string | undefined,
  signal: AbortSignal,
  timeoutMs = 5_000,
): Promise<number | null> {
  for (const path of ["/server_info", "/get_server_info"]) {
    if (signal.aborted) return null;
    try {
      const info = await boundedGet(agent, `${base}${path}`, apiKey, signal, timeoutMs);
      if (info.status !== 200) continue;
      const value = (JSON.parse(info.text) as ServerInfo | null)?.internal_states?.[0]?.avg_spec_accept_length;
      return typeof value === "number" && Number.isFinite(value) ? value : null;
    } catch {
      // Not there, not JSON, or no answer in time: the next endpoint, then /metrics.
    }
  }
  return null;
}

/** sglang:spec_accept_length from /metrics (--enable-metrics); null when absent or unreadable. */
export async function metricsAcceptance(
  agent: Agent,
  base: string,
  apiKey: string | undefined,
  signal: AbortSignal,
): Promise<number | null> {
  if (signal.aborted) return null;
  try {
    const metrics = await boundedGet(agent, `${base}/metrics`, apiKey, signal, 5_000);
    return metrics.status === 200 ? parseSpecAcceptLength(metrics.text) : null;
  } catch {
    return null;
  }
}

/** The value of sglang:spec_accept_length in Prometheus text (the first series, labels ignored). */
export function parseSpecAcceptLength(text: string): number | null {
  let families: ReturnType<typeof parsePrometheusTextFormat>;
  try {
    families = parsePrometheusTextFormat(text);
  } catch {
    return null;
  }
  const value = Number(families.find((f) => f.name === "sglang:spec_accept_length")?.metrics[0]?.value);
  return Number.isFinite(value) ? value : null;
}
