// Local ports: a free one to listen on, and whether something listens. The one helper for the
// gate's SSH tunnel, the simulator's late-opening port and the tests' servers. Node's own modules
// only (the simulator bundle on a test host carries it).
import * as net from "node:net";

/** A TCP port free on `host` (default 127.0.0.1) right now: the kernel picks it. */
export function freeLocalPort(host = "127.0.0.1"): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.listen(0, host, () => {
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
