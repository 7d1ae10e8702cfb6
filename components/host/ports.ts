// Loopback ports: a free one to listen on, and whether something listens. Used by the gate's SSH
// tunnel and by the tests' servers.
import * as net from "node:net";

/** A TCP port free on 127.0.0.1 right now (the kernel picks it). */
export function freeLocalPort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.listen(0, "127.0.0.1", () => {
      const { port } = srv.address() as net.AddressInfo;
      srv.close(() => resolve(port));
    });
    srv.on("error", reject);
  });
}

/** True when something accepts connections on 127.0.0.1:port. */
export function acceptsConnections(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = net.connect(port, "127.0.0.1", () => {
      s.destroy();
      resolve(true);
    });
    s.on("error", () => resolve(false));
  });
}
