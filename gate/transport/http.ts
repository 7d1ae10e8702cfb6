/**
 * The gate's HTTP and TCP plumbing on undici. Every call takes an AbortSignal: the callers build it
 * from their own deadline, which is how "no request outlives the deadline" holds. undici's own
 * header/body timeouts are switched off so that only those signals decide.
 */
import { readFileSync } from "node:fs";
import { Agent, buildConnector, request, type Dispatcher } from "undici";
import { openTcp } from "../../ports";
import { TimeoutError } from "./timers";

export interface Endpoint {
  /** Base URL of the OpenAI-compatible server, e.g. http://127.0.0.1:30000 (a trailing /v1 is accepted). */
  url: string;
  /** Served model id; when absent the first model /v1/models lists is used. */
  model?: string;
  /** Bearer token, when the server was started with --api-key. */
  apiKey?: string;
}

/** An endpoint URL that cannot be used: refused before any request, in one sentence. */
export class EndpointError extends Error {}

/**
 * The base URL requests are built on, validated: an http(s) URL with a host, no query or fragment.
 * `localhost:30000` parses as a URL whose scheme is "localhost:" and `127.0.0.1:30000` not at all,
 * so both are refused here rather than silently aiming at port 80 or failing later. A trailing
 * /v1 is accepted (clients often configure it) and stripped.
 */
export function baseUrl(url: string): string {
  const given = String(url).trim();
  let u: URL;
  try {
    u = new URL(given);
  } catch {
    throw new EndpointError(
      `endpoint ${JSON.stringify(given)} is not a URL: write it as http://HOST:PORT (for example http://127.0.0.1:30000)`,
    );
  }
  if (u.protocol !== "http:" && u.protocol !== "https:") {
    throw new EndpointError(
      `endpoint ${JSON.stringify(given)} must start with http:// or https:// (it parses as scheme ${JSON.stringify(u.protocol)}); write http://${given.replace(/^[a-z]+:\/\//i, "")}`,
    );
  }
  if (u.hostname === "") throw new EndpointError(`endpoint ${JSON.stringify(given)} names no host`);
  if (u.username || u.password)
    throw new EndpointError(`endpoint ${JSON.stringify(given)} carries credentials; pass the API key separately`);
  if (u.search || u.hash)
    throw new EndpointError(`endpoint ${JSON.stringify(given)} has a query or fragment; give the server's base URL`);
  let path = u.pathname.replace(/\/+$/, "");
  if (path.endsWith("/v1")) path = path.slice(0, -3);
  return `${u.protocol}//${u.host}${path}`;
}

/** undici's own connect timeout, kept for the connections opened here. */
const CONNECT_TIMEOUT_MS = 10_000;
/** undici's connector, used only to speak TLS over a connection already checked. */
const tlsOver = buildConnector({ timeout: CONNECT_TIMEOUT_MS });

/**
 * Every HTTP connection of the gate and the benchmark goes through openTcp, so a connection that came
 * back connected to itself is refused (reset, "nothing listens") before a byte is sent: over it a
 * request would read its own bytes back as the answer ("answered bytes that are not HTTP"), and TLS
 * its own ClientHello (a handshake failure that reads as "the port speaks plain HTTP").
 */
const checkedConnect: buildConnector.connector = (opts, callback) => {
  const https = opts.protocol === "https:";
  const port = opts.port ? Number(opts.port) : https ? 443 : 80;
  openTcp(opts.hostname, port, { timeoutMs: CONNECT_TIMEOUT_MS, localAddress: opts.localAddress ?? undefined }).then(
    (socket) => {
      // What undici's connector sets on the sockets it opens.
      socket.setNoDelay(true).setKeepAlive(true, 60_000);
      if (https) tlsOver({ ...opts, httpSocket: socket }, callback);
      else callback(null, socket);
    },
    (err: Error) => callback(err, null),
  );
};

/** Descriptors left for everything but a load's connections: files, pipes, the server watch's connect, Node's own. */
const FD_RESERVE = 64;

/**
 * The process's limit on open files (Node raises the soft limit to the hard one as it starts), read
 * from /proc on Linux; null where it cannot be read or is unlimited.
 */
export function openFileLimit(): number | null {
  try {
    const m = /^Max open files\s+(\d+)/m.exec(readFileSync("/proc/self/limits", "utf8"));
    return m ? Number(m[1]) : null;
  } catch {
    return null;
  }
}

/**
 * Connections for `wanted` streams at once, as many as the file descriptors allow: each stream in
 * flight holds one socket, and a pool larger than the descriptors fails with EMFILE mid-run.
 */
export function connectionBound(wanted: number, fileLimit: number | null = openFileLimit()): number {
  return Math.max(1, fileLimit === null ? wanted : Math.min(wanted, fileLimit - FD_RESERVE));
}

export function makeAgent(connections = 8): Agent {
  return new Agent({
    headersTimeout: 0,
    bodyTimeout: 0,
    connections,
    keepAliveTimeout: 4_000,
    pipelining: 1,
    connect: checkedConnect,
  });
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
  contentType: string;
}

/** One request whose whole body is read as text; rejects on network errors and on abort. */
export async function fetchText(
  dispatcher: Dispatcher,
  url: string,
  opts: { method?: "GET" | "POST" | "DELETE"; body?: unknown; apiKey?: string; signal: AbortSignal; maxBytes?: number },
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
  const type = res.headers["content-type"];
  return {
    status: res.statusCode,
    text: Buffer.concat(parts).toString("utf8"),
    contentType: String(Array.isArray(type) ? type[0] : (type ?? "")),
  };
}

/**
 * One request on a connection of its own (openTcp's: a self-connection is refused as "nothing
 * listens"), closed after it, within TIMEOUTMS (and SIGNAL): for the occasional call, such as the
 * router's admin API and a benchmark's control requests, that needs no pool of its own.
 */
export async function fetchOnce(
  url: string,
  opts: {
    method?: "GET" | "POST" | "DELETE";
    body?: unknown;
    apiKey?: string;
    timeoutMs: number;
    signal?: AbortSignal;
    maxBytes?: number;
  },
): Promise<HttpReply> {
  const { timeoutMs, signal, ...request } = opts;
  const timeout = AbortSignal.timeout(timeoutMs);
  const agent = makeAgent(1);
  try {
    return await fetchText(agent, url, { ...request, signal: signal ? AbortSignal.any([signal, timeout]) : timeout });
  } finally {
    await agent.close();
  }
}

/** Opens and closes one TCP connection to the endpoint's port (a self-connection is refused: openTcp). */
export async function tcpConnect(url: string, timeoutMs: number, signal: AbortSignal): Promise<void> {
  const u = new URL(url);
  const port = u.port ? Number(u.port) : u.protocol === "https:" ? 443 : 80;
  (await openTcp(u.hostname.replace(/^\[|\]$/g, ""), port, { timeoutMs, signal })).destroy();
}

/** A short, stable description of a network error (undici wraps the socket error in `cause`). */
export function describeError(err: unknown): string {
  const e = err as { name?: string; message?: string; code?: string; cause?: unknown } | null | undefined;
  if (e === null || e === undefined) return "unknown error";
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
  // A self-connection (openTcp) is a port nothing listens on, like a refusal.
  if (code === "ECONNREFUSED" || code === "ESELFCONNECT") return "connection refused";
  if (code === "ECONNRESET" || code === "UND_ERR_SOCKET") return "connection reset";
  if (err instanceof TimeoutError || e?.name === "TimeoutError" || e?.name === "AbortError") return "timeout";
  return code ? code : "network error";
}

/**
 * Network errors that waiting cannot fix, as one sentence naming the URL, or null. TLS spoken to a
 * plain-HTTP port fails the handshake (wrong version number); plain HTTP spoken to a TLS port gets
 * bytes that are no HTTP response. A server that is still starting produces neither.
 */
export function fatalNetworkError(err: unknown, url: string): string | null {
  const e = err as { code?: string; message?: string; cause?: { code?: string; message?: string } };
  const code = String(e?.cause?.code ?? e?.code ?? "");
  const text = `${e?.message ?? ""} ${e?.cause?.message ?? ""}`;
  const https = url.startsWith("https:");
  if (https && (code.startsWith("ERR_SSL") || code === "EPROTO" || /wrong version number|ssl3_get_record/i.test(text)))
    return `the TLS handshake with ${url} failed (${code || "EPROTO"}): the port speaks plain HTTP, so use http:// instead of https://`;
  if (code.startsWith("ERR_TLS_CERT") || code === "DEPTH_ZERO_SELF_SIGNED_CERT" || code === "SELF_SIGNED_CERT_IN_CHAIN")
    return `${url}: the server's TLS certificate is not trusted (${code})`;
  if (!https && (code.startsWith("HPE_") || code === "UND_ERR_INFO"))
    return `${url} answered bytes that are not HTTP (${code}): if the port speaks TLS, use https://`;
  return null;
}

export function truncate(text: string, max = 600): string {
  const t = text.replace(/\s+$/, "");
  return t.length <= max ? t : `${t.slice(0, max)}... (${t.length - max} more characters)`;
}
