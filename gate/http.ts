/**
 * The gate's HTTP and TCP plumbing on undici. Every call takes an AbortSignal: the callers build it
 * from their own deadline, which is how "no request outlives the deadline" holds. undici's own
 * header/body timeouts are switched off so that only those signals decide.
 */
import * as net from "node:net";
import { Agent, request, type Dispatcher } from "undici";

export interface Endpoint {
  /** Base URL of the OpenAI-compatible server, e.g. http://127.0.0.1:30000 (a trailing /v1 is accepted). */
  url: string;
  /** Served model id; when absent the first model /v1/models lists is used. */
  model?: string;
  /** Bearer token, when the server was started with --api-key. */
  apiKey?: string;
}

export function baseUrl(url: string): string {
  let u = url.trim().replace(/\/+$/, "");
  if (u.endsWith("/v1")) u = u.slice(0, -3);
  return u;
}

export function makeAgent(connections = 8): Agent {
  return new Agent({ headersTimeout: 0, bodyTimeout: 0, connections, keepAliveTimeout: 4_000, pipelining: 1 });
}

export function headers(apiKey: string | undefined, json: boolean): Record<string, string> {
  const h: Record<string, string> = { accept: json ? "application/json" : "text/event-stream" };
  if (json) h["content-type"] = "application/json";
  if (apiKey) h.authorization = `Bearer ${apiKey}`;
  return h;
}

export interface HttpReply {
  status: number;
  text: string;
}

/** One request whose whole body is read as text; rejects on network errors and on abort. */
export async function fetchText(
  dispatcher: Dispatcher,
  url: string,
  opts: { method?: "GET" | "POST"; body?: unknown; apiKey?: string; signal: AbortSignal; maxBytes?: number },
): Promise<HttpReply> {
  const res = await request(url, {
    method: opts.method ?? "GET",
    dispatcher,
    signal: opts.signal,
    headers: headers(opts.apiKey, true),
    body: opts.body === undefined ? undefined : JSON.stringify(opts.body),
  });
  const limit = opts.maxBytes ?? 4 * 1024 * 1024;
  const parts: Buffer[] = [];
  let size = 0;
  for await (const chunk of res.body as AsyncIterable<Buffer>) {
    if (size < limit) parts.push(chunk);
    size += chunk.length;
  }
  return { status: res.statusCode, text: Buffer.concat(parts).toString("utf8") };
}

/** Opens and closes one TCP connection to the endpoint's port. */
export function tcpConnect(url: string, timeoutMs: number, signal: AbortSignal): Promise<void> {
  const u = new URL(url);
  const port = u.port ? Number(u.port) : u.protocol === "https:" ? 443 : 80;
  const host = u.hostname.replace(/^\[|\]$/g, "");
  return new Promise((resolve, reject) => {
    if (signal.aborted) return reject(signal.reason);
    const socket = net.connect({ host, port });
    const done = (err?: unknown) => {
      clearTimeout(timer);
      signal.removeEventListener("abort", onAbort);
      socket.destroy();
      if (err) reject(err);
      else resolve();
    };
    const onAbort = () => done(signal.reason);
    const timer = setTimeout(
      () => done(new Error(`TCP connect to ${host}:${port} timed out after ${timeoutMs} ms`)),
      timeoutMs,
    );
    signal.addEventListener("abort", onAbort, { once: true });
    socket.once("connect", () => done());
    socket.once("error", (e) => done(e));
  });
}

/** A short, stable description of a network error (undici wraps the socket error in `cause`). */
export function describeError(err: unknown): string {
  if (err === null || err === undefined) return "unknown error";
  const e = err as { name?: string; message?: string; code?: string; cause?: unknown };
  const cause = e.cause as { code?: string; message?: string } | undefined;
  const code = e.code ?? cause?.code;
  const msg = e.message ?? String(err);
  if (cause && cause.message && cause.message !== msg) return `${msg} (${cause.message})`;
  if (code && !msg.includes(code)) return `${msg} (${code})`;
  return msg;
}

/** Stable category of an error, used where a message would change run to run (refresh drift). */
export function errorKind(err: unknown): string {
  const e = err as { name?: string; code?: string; cause?: { code?: string } };
  const code = e?.code ?? e?.cause?.code ?? "";
  if (code === "ECONNREFUSED") return "connection refused";
  if (code === "ECONNRESET" || code === "UND_ERR_SOCKET") return "connection reset";
  if (e?.name === "TimeoutError" || e?.name === "AbortError") return "timeout";
  return code ? code : "network error";
}

export function signalWithTimeout(parent: AbortSignal, ms: number): AbortSignal {
  return AbortSignal.any([parent, AbortSignal.timeout(Math.max(1, Math.ceil(ms)))]);
}

/** Resolves after ms, or rejects with the signal's reason as soon as it aborts. */
export function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal.aborted) return reject(signal.reason);
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal.reason);
    };
    const timer = setTimeout(() => {
      signal.removeEventListener("abort", onAbort);
      resolve();
    }, ms);
    signal.addEventListener("abort", onAbort, { once: true });
  });
}

export function truncate(text: string, max = 600): string {
  const t = text.replace(/\s+$/, "");
  return t.length <= max ? t : `${t.slice(0, max)}... (${t.length - max} more characters)`;
}
