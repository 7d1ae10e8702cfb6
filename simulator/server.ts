import * as http from "node:http";
import type { Socket } from "node:net";
import { handleChat } from "./chat";
import { handleGenerate } from "./generate";
import { BodyError, readJsonBody, sendError, sendJson } from "./http-util";
import { handleHealth, handleMetrics, handleModelInfo, handleModels, handleServerInfo, handleTruth } from "./info";
import type { SimState } from "./state";

/** A client must send its request headers within this after connecting (or after its last request). */
export const HEADERS_TIMEOUT_MS = 10_000;
/** Connections beyond this are refused at accept, below a typical 65,536 descriptor limit. */
export const MAX_CONNECTIONS = 16_384;

/** Routes SGLang's API key middleware lets through without a key. */
function needsKey(path: string): boolean {
  return !(path.startsWith("/health") || path.startsWith("/metrics") || path.startsWith("/sim/"));
}

/** What answers while loading in the default configuration (everything else is 503). */
const ANSWERS_WHILE_LOADING = new Set(["/health", "/health_generate", "/sim/truth", "/metrics"]);

export function createHttpServer(
  state: SimState,
  limits: { headersTimeoutMs?: number } = {},
): { server: http.Server; sockets: Set<Socket> } {
  const headersTimeoutMs = limits.headersTimeoutMs ?? HEADERS_TIMEOUT_MS;
  const sockets = new Set<Socket>();
  const server = http.createServer((req, res) => {
    // A request arrived: no inactivity bound while it is served (generations may be long and quiet).
    req.socket.setTimeout(0);
    // silent: the connection is accepted and the request read, and nothing ever comes back.
    if (state.has("silent")) {
      req.resume();
      return;
    }
    const url = new URL(req.url ?? "/", "http://sim");
    const path = url.pathname;
    res.on("finish", () =>
      state.log(
        `INFO:     ${req.socket.remoteAddress}:${req.socket.remotePort} - "${req.method} ${path} HTTP/1.1" ${res.statusCode}`,
      ),
    );
    if (
      state.apiKey !== null &&
      needsKey(path) &&
      req.method !== "OPTIONS" &&
      req.headers.authorization !== `Bearer ${state.apiKey}`
    ) {
      state.truth.fail("unauthorized");
      sendJson(res, 401, { error: "Unauthorized" });
      return;
    }
    if (state.status === "loading" && !ANSWERS_WHILE_LOADING.has(path)) {
      const modelsEarly =
        state.has("models-before-ready") &&
        (path === "/v1/models" || path === "/get_model_info" || path === "/get_server_info");
      const generation = path === "/v1/chat/completions" || path === "/generate";
      if (!modelsEarly && !(generation && state.has("models-before-ready"))) {
        if (generation) state.truth.fail("loading-503");
        sendError(res, 503, "The server is still loading the model; retry later.");
        return;
      }
    }
    route(state, req, res, path, url.searchParams).catch((err: unknown) => {
      if (err instanceof BodyError) {
        state.truth.fail(err.status === 413 ? "too-large" : "bad-request");
        // After a 413 the unread rest of the body makes the connection unusable: close it after the answer.
        if (err.status === 413) res.setHeader("connection", "close");
        if (!res.headersSent) sendError(res, err.status, err.message);
        return;
      }
      state.log(`ERROR: ${(err as Error).stack ?? String(err)}`);
      if (!res.headersSent) sendError(res, 500, `Internal server error: ${(err as Error).message}`);
    });
  });
  server.on("connection", (socket: Socket) => {
    sockets.add(socket);
    // A connection that sends no request is closed after headersTimeoutMs (Node's own headers
    // timeout only starts once the first byte arrived).
    socket.setTimeout(headersTimeoutMs, () => socket.destroy());
    socket.on("close", () => sockets.delete(socket));
  });
  // Long generations at real time can exceed Node's default request timeout (300 s): no bound on a
  // request once its headers arrived. But a connection that sends no complete headers within
  // HEADERS_TIMEOUT_MS is closed, and an idle keep-alive connection after 5 s (uvicorn's
  // timeout_keep_alive), so thousands of idle connections cannot hold the server's descriptors.
  server.requestTimeout = 0;
  server.headersTimeout = headersTimeoutMs;
  server.keepAliveTimeout = 5_000;
  server.maxConnections = MAX_CONNECTIONS;
  return { server, sockets };
}

async function route(
  state: SimState,
  req: http.IncomingMessage,
  res: http.ServerResponse,
  path: string,
  query: URLSearchParams,
): Promise<void> {
  const method = req.method ?? "GET";
  const get = method === "GET" || method === "HEAD";
  if (get && (path === "/v1/models" || path === "/v1/models/" + state.servedModelName)) return handleModels(state, res);
  if (get && (path === "/health" || path === "/health_generate")) return handleHealth(state, res);
  if (get && (path === "/get_server_info" || path === "/server_info")) return handleServerInfo(state, res);
  if (get && path === "/get_model_info") return handleModelInfo(state, res);
  if (get && path === "/metrics") return handleMetrics(state, res);
  if (get && path === "/sim/truth") return handleTruth(state, query, res);
  if (method === "POST" && path === "/v1/chat/completions") return handleChat(state, await readJsonBody(req), res);
  if (method === "POST" && path === "/generate") return handleGenerate(state, await readJsonBody(req), res);
  sendJson(res, 404, { detail: "Not Found" });
}
