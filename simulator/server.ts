import * as http from "node:http";
import type { Socket } from "node:net";
import { handleChat } from "./chat";
import { handleGenerate } from "./generate";
import { BodyError, readJsonBody, sendError, sendJson } from "./http-util";
import { handleHealth, handleMetrics, handleModelInfo, handleModels, handleServerInfo, handleTruth } from "./info";
import type { SimState } from "./state";

/** Routes SGLang's API key middleware lets through without a key. */
function needsKey(path: string): boolean {
  return !(path.startsWith("/health") || path.startsWith("/metrics") || path.startsWith("/sim/"));
}

/** What answers while loading in the default configuration (everything else is 503). */
const ANSWERS_WHILE_LOADING = new Set(["/health", "/health_generate", "/sim/truth", "/metrics"]);

export function createHttpServer(state: SimState): { server: http.Server; sockets: Set<Socket> } {
  const sockets = new Set<Socket>();
  const server = http.createServer((req, res) => {
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
        state.truth.fail("bad-request");
        if (!res.headersSent) sendError(res, 400, err.message);
        return;
      }
      state.log(`ERROR: ${(err as Error).stack ?? String(err)}`);
      if (!res.headersSent) sendError(res, 500, `Internal server error: ${(err as Error).message}`);
    });
  });
  server.on("connection", (socket: Socket) => {
    sockets.add(socket);
    socket.on("close", () => sockets.delete(socket));
  });
  // Long generations at real time can exceed Node's default request timeout (300 s).
  server.requestTimeout = 0;
  server.headersTimeout = 0;
  server.keepAliveTimeout = 5_000;
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
