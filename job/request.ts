/**
 * One job request sent until it has an answer to record: over the gate's transport (its agent, its
 * checked connections, its timers), retried with bounded backoff for what waiting can fix (no
 * connection, a reset, a stall past the request timeout, 429, 5xx, a 200 that is not JSON).
 *
 * A request whose retries run out is recorded as failed only when the server generates for another
 * request at that moment (a one-token probe, sent then): otherwise the server is down or broken, not
 * the request, and the request waits with every other one (ServerWatch) instead of turning the rest
 * of the input into errors. A first version judged by "did any request succeed since this one was
 * first sent": requests in flight when the server died had started before the last success, and were
 * recorded as errors (the test's server that dies, at concurrency 2).
 */
import type { Dispatcher } from "undici";
import { describeError, fetchText, truncate } from "../gate/transport/http";
import { sleep, withTimeout } from "../gate/transport/timers";
import { completionTokensOf, type BatchRequest, type BatchResultLine } from "./batch-file";

export interface RetryPolicy {
  /** Tries per request before it is judged (at least 1). */
  attempts: number;
  /** The first backoff; each next one doubles, up to maxBackoffMs. */
  backoffMs: number;
  maxBackoffMs: number;
  /** The most one request may take (a stalled server is cut here and retried). */
  requestTimeoutMs: number;
}

export const DEFAULT_RETRY: RetryPolicy = {
  attempts: 5,
  backoffMs: 1_000,
  maxBackoffMs: 30_000,
  requestTimeoutMs: 1_800_000,
};

/** What one try came to. */
type Attempt =
  | { kind: "ok"; status: number; body: unknown; tokens: number }
  | { kind: "final" | "retry"; status: number | null; body: unknown; reason: string };

/** What a request's result line says, and its tokens. */
export interface Answer {
  failed: boolean;
  line: Omit<BatchResultLine, "id">;
  tokens: number;
}

/** The biggest response body read (a completion of 2,000 tokens is a few kB). */
const MAX_RESPONSE_BYTES = 64 * 1024 * 1024;

async function attemptOnce(
  agent: Dispatcher,
  base: string,
  req: BatchRequest,
  apiKey: string | undefined,
  policy: RetryPolicy,
  signal: AbortSignal,
): Promise<Attempt> {
  let reply;
  try {
    reply = await withTimeout(
      [signal],
      policy.requestTimeoutMs,
      () => `no answer within ${policy.requestTimeoutMs / 1000} s`,
      (s) =>
        fetchText(agent, `${base}${req.url}`, {
          method: "POST",
          body: { ...req.body, stream: false },
          apiKey,
          signal: s,
          maxBytes: MAX_RESPONSE_BYTES,
        }),
    );
  } catch (err) {
    if (signal.aborted) throw err;
    return { kind: "retry", status: null, body: null, reason: describeError(err) };
  }
  let body: unknown = reply.text;
  try {
    body = JSON.parse(reply.text);
  } catch {
    // kept as text: a proxy's HTML page says more than "not JSON" would
  }
  const reason = `HTTP ${reply.status}: ${truncate(typeof body === "string" ? body : JSON.stringify(body), 300)}`;
  if (reply.status === 200)
    return typeof body === "object" && body !== null
      ? { kind: "ok", status: 200, body, tokens: completionTokensOf(body) }
      : {
          kind: "retry",
          status: 200,
          body,
          reason: `HTTP 200 with a body that is not JSON: ${truncate(reply.text, 200)}`,
        };
  const retriable = reply.status === 429 || reply.status >= 500;
  return { kind: retriable ? "retry" : "final", status: reply.status, body, reason };
}

/** The backoff before try N+1 (N >= 1): doubling, capped, with up to a quarter of jitter so retries spread out. */
export function backoffMs(policy: RetryPolicy, tries: number, random: () => number = Math.random): number {
  const base = Math.min(policy.maxBackoffMs, policy.backoffMs * 2 ** (tries - 1));
  return Math.round(base * (0.75 + random() * 0.25));
}

export interface SendContext {
  agent: Dispatcher;
  base: string;
  apiKey: string | undefined;
  policy: RetryPolicy;
  watch: ServerWatch;
  signal: AbortSignal;
}

/** REQ sent until it has an answer to record; throws only when the job must stop (abort, server down past the bound). */
export async function sendRequest(ctx: SendContext, req: BatchRequest): Promise<Answer> {
  let tries = 0;
  for (;;) {
    const a = await attemptOnce(ctx.agent, ctx.base, req, ctx.apiKey, ctx.policy, ctx.signal);
    if (a.kind === "ok") {
      ctx.watch.succeeded();
      return { failed: false, tokens: a.tokens, line: answered(req, a.status, a.body, null) };
    }
    tries++;
    if (a.kind === "retry" && tries < ctx.policy.attempts) {
      ctx.watch.failed(a.reason);
      await sleep(backoffMs(ctx.policy, tries), ctx.signal);
      continue;
    }
    if (a.kind === "final" || (await ctx.watch.generates(req, ctx.signal))) {
      const code = a.status === null ? "connection_error" : String(a.status);
      const message = a.kind === "retry" ? `${a.reason} (after ${tries} tries)` : a.reason;
      const line =
        a.status === null ? failedLine(req, code, message) : answered(req, a.status, a.body, { code, message });
      return { failed: true, tokens: 0, line };
    }
    ctx.watch.failed(a.reason);
    // The server generates for no one: wait for it with the others, then try this request afresh.
    await ctx.watch.waitForServer(req, ctx.signal);
    tries = 0;
  }
}

function answered(
  req: BatchRequest,
  status: number,
  body: unknown,
  error: BatchResultLine["error"],
): Omit<BatchResultLine, "id"> {
  const id = (body as { id?: unknown } | null)?.id;
  const requestId = typeof id === "string" ? id : "";
  return { custom_id: req.custom_id, response: { status_code: status, request_id: requestId, body }, error };
}

function failedLine(req: BatchRequest, code: string, message: string): Omit<BatchResultLine, "id"> {
  return { custom_id: req.custom_id, response: null, error: { code, message } };
}

/** A one-token generation takes far less; a stalled server must not hold the wait past its bound. */
const PROBE_TIMEOUT_MS = 60_000;

/** Whether a one-token request of REQ's kind (its endpoint, its model), sent once, is answered with a completion. */
export async function generatesOnce(ctx: SendContext, req: BatchRequest, signal: AbortSignal): Promise<boolean> {
  const policy = { ...ctx.policy, requestTimeoutMs: Math.min(PROBE_TIMEOUT_MS, ctx.policy.requestTimeoutMs) };
  return (await attemptOnce(ctx.agent, ctx.base, probeRequest(req), ctx.apiKey, policy, signal)).kind === "ok";
}

function probeRequest(req: BatchRequest): BatchRequest {
  const body =
    req.url === "/v1/chat/completions"
      ? { model: req.body.model, messages: [{ role: "user", content: "Say just 'OK'" }], max_tokens: 1 }
      : { model: req.body.model, prompt: "OK", max_tokens: 1 };
  return { custom_id: "gpuhost-probe", method: "POST", url: req.url, body };
}

/** The job stops: no request succeeded for longer than the outage bound. */
export class ServerDownError extends Error {}

/**
 * Whether the server answers at all, shared by every request in flight: when it stopped answering,
 * one message that the job waits (and until when), one probe at a time while it waits, and the job's
 * end when it has not answered for the outage bound.
 */
export class ServerWatch {
  private lastSuccess: number;
  private lastFailure = "";
  private waiting: Promise<void> | null = null;

  constructor(
    /** Whether the server generates now: one tiny request of REQ's kind. */
    private readonly probe: (req: BatchRequest, signal: AbortSignal) => Promise<boolean>,
    private readonly outageMs: number,
    private readonly say: (line: string) => void,
    readonly now: () => number = () => Date.now(),
    private readonly probeEveryMs = 2_000,
  ) {
    this.lastSuccess = now();
  }

  succeeded(): void {
    this.lastSuccess = this.now();
  }

  failed(reason: string): void {
    this.lastFailure = reason;
  }

  /** Whether the server generates now (the probe); a success counts as the server answering. */
  async generates(req: BatchRequest, signal: AbortSignal): Promise<boolean> {
    const ok = await this.probe(req, signal).catch(() => false);
    if (ok) this.succeeded();
    return ok;
  }

  /**
   * Resolves when the server generates again (the probe, or any job request succeeds); throws
   * ServerDownError past the bound, counted from the last success. One wait for all requests.
   */
  waitForServer(req: BatchRequest, signal: AbortSignal): Promise<void> {
    this.waiting ??= this.wait(req, signal).finally(() => (this.waiting = null));
    return this.waiting;
  }

  private async wait(req: BatchRequest, signal: AbortSignal): Promise<void> {
    const down = this.lastSuccess;
    const giveUp = down + this.outageMs;
    this.say(
      `the server is not answering (${this.lastFailure}); waiting, and giving up at ${new Date(giveUp).toISOString()} (--outage-limit)`,
    );
    for (;;) {
      if (this.lastSuccess > down) break;
      if (this.now() >= giveUp)
        throw new ServerDownError(
          `no request succeeded for ${Math.round((this.now() - down) / 1000)} s (--outage-limit): the server is down (last: ${this.lastFailure}); the output so far is kept, run the same command again to continue`,
        );
      if (await this.generates(req, signal)) break;
      await sleep(Math.min(this.probeEveryMs, Math.max(1, giveUp - this.now())), signal);
    }
    this.say("the server answers again; the job goes on");
  }
}
