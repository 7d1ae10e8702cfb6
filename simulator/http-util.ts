import type { IncomingMessage, ServerResponse } from "node:http";

export function sendJson(res: ServerResponse, status: number, body: unknown): void {
  const text = JSON.stringify(body);
  res.writeHead(status, { "content-type": "application/json", "content-length": Buffer.byteLength(text) });
  res.end(text);
}

export function sendText(
  res: ServerResponse,
  status: number,
  text: string,
  contentType = "text/plain; charset=utf-8",
): void {
  res.writeHead(status, { "content-type": contentType, "content-length": Buffer.byteLength(text) });
  res.end(text);
}

const ERROR_TYPES: Record<number, string> = {
  400: "BadRequestError",
  413: "PayloadTooLargeError",
  401: "AuthenticationError",
  404: "NotFoundError",
  500: "InternalServerError",
  503: "ServiceUnavailableError",
};

/** An error body shaped like OpenAI's, which the official clients parse into their error classes. */
export function sendError(res: ServerResponse, status: number, message: string, param: string | null = null): void {
  sendJson(res, status, { error: { message, type: ERROR_TYPES[status] ?? "APIError", param, code: status } });
}

/** A request the server refuses: 400 (malformed) or 413 (too large), with OpenAI's error shape. */
export class BodyError extends Error {
  constructor(
    message: string,
    readonly status: 400 | 413 = 400,
  ) {
    super(message);
  }
}

/** SGLang sits behind uvicorn/FastAPI, which reads any size; a server that must hold up bounds it. */
export const MAX_BODY_BYTES = 16 * 1024 * 1024;

/**
 * Reads a JSON object body. Too large: refused with 413 from the Content-Length before reading,
 * or as soon as the count passes the limit; the rest is drained (not reset) so the client reads
 * the answer instead of a connection reset.
 */
export function readJsonBody(req: IncomingMessage, limitBytes = MAX_BODY_BYTES): Promise<Record<string, unknown>> {
  return new Promise((resolve, reject) => {
    const tooLarge = () => new BodyError(`request body larger than ${limitBytes} bytes`, 413);
    const declared = Number(req.headers["content-length"]);
    if (Number.isFinite(declared) && declared > limitBytes) {
      req.resume();
      return reject(tooLarge());
    }
    const chunks: Buffer[] = [];
    let size = 0;
    let refused = false;
    req.on("data", (c: Buffer) => {
      if (refused) return;
      size += c.length;
      if (size > limitBytes) {
        refused = true;
        chunks.length = 0;
        reject(tooLarge());
        return;
      }
      chunks.push(c);
    });
    req.on("error", reject);
    req.on("end", () => {
      if (refused) return;
      const text = Buffer.concat(chunks).toString("utf8");
      try {
        const value: unknown = text.length ? JSON.parse(text) : {};
        if (!value || typeof value !== "object" || Array.isArray(value))
          reject(new BodyError("request body must be a JSON object"));
        else resolve(value as Record<string, unknown>);
      } catch (err) {
        reject(new BodyError(`invalid JSON body: ${(err as Error).message}`));
      }
    });
  });
}

/**
 * Cut the connection mid-response. Before any byte of the response, a TCP reset where the platform
 * offers one. Mid-stream, the bytes already written must reach the client first (a reset would
 * discard the unsent queue, hiding the tokens that did stream), so: flush, then close without
 * the final chunk; the client sees a stream that ends without [DONE] and an incomplete body.
 */
export function resetConnection(res: ServerResponse): void {
  const socket = res.socket;
  if (!socket) return;
  if (res.headersSent) {
    res.write("", () => socket.destroy());
    return;
  }
  if (typeof socket.resetAndDestroy === "function") socket.resetAndDestroy();
  else socket.destroy();
}

export function optionalInt(body: Record<string, unknown>, key: string): number | undefined {
  const v = body[key];
  if (v === undefined || v === null) return undefined;
  if (typeof v !== "number" || !Number.isInteger(v) || v < 0)
    throw new BodyError(`${key} must be a non-negative integer`);
  return v;
}
