/**
 * A static file server on 127.0.0.1 for the test host's apt repository and Python index. The
 * container shares this machine's loopback, so apt and pip inside it reach this server directly.
 * With `tls` it serves https (a certificate from tls.ts, whose CA the test installs on the host):
 * gpuhost takes remote package sources over https only.
 */
import { createReadStream, promises as fs } from "node:fs";
import * as http from "node:http";
import * as https from "node:https";
import * as net from "node:net";
import * as path from "node:path";

export interface StaticServer {
  url: string;
  port: number;
  /** Every path requested, in order: tests use it to prove apt/pip really came here. */
  requests: string[];
  close(): Promise<void>;
}

/** Serves `dir` read-only; a folder answers with its index.html (PEP 503 pages are folders). */
export function serveDirectory(dir: string, port = 0, tls?: { key: string; cert: string }): Promise<StaticServer> {
  const root = path.resolve(dir);
  const requests: string[] = [];
  const handler: http.RequestListener = (req, res) => {
    const urlPath = decodeURIComponent(new URL(req.url ?? "/", "http://localhost").pathname);
    requests.push(urlPath);
    const target = path.resolve(root, `.${urlPath}`);
    if (target !== root && !target.startsWith(root + path.sep)) {
      res.writeHead(403).end();
      return;
    }
    void (async () => {
      let file = target;
      let stat = await fs.stat(file).catch(() => undefined);
      if (stat?.isDirectory()) {
        file = path.join(file, "index.html");
        stat = await fs.stat(file).catch(() => undefined);
      }
      if (!stat?.isFile()) {
        res.writeHead(404, { "content-type": "text/plain" }).end("not found\n");
        return;
      }
      res.writeHead(200, {
        "content-length": stat.size,
        "content-type": file.endsWith(".html") ? "text/html" : "application/octet-stream",
        "last-modified": stat.mtime.toUTCString(),
      });
      if (req.method === "HEAD") res.end();
      else createReadStream(file).pipe(res);
    })().catch(() => {
      if (!res.headersSent) res.writeHead(500);
      res.end();
    });
  };
  const server: http.Server = tls
    ? https.createServer({ key: tls.key, cert: tls.cert }, handler)
    : http.createServer(handler);
  const sockets = new Set<net.Socket>();
  server.on("connection", (s: net.Socket) => {
    sockets.add(s);
    s.on("close", () => sockets.delete(s));
  });
  return new Promise((resolve, reject) => {
    server.once("error", reject);
    server.listen(port, "127.0.0.1", () => {
      const actual = (server.address() as net.AddressInfo).port;
      resolve({
        url: `${tls ? "https" : "http"}://127.0.0.1:${actual}/`,
        port: actual,
        requests,
        close: () =>
          new Promise<void>((r) => {
            for (const s of sockets) s.destroy();
            server.close(() => r());
          }),
      });
    });
  });
}
