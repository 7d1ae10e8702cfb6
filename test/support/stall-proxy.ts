/**
 * A TCP proxy on 127.0.0.1 that forwards to a target until told to stall: from then on it reads
 * nothing and writes nothing, but keeps every socket open. To both ends the session is half-open,
 * as after a NAT timeout or a peer that lost power: no FIN, no RST, just silence.
 */
import * as net from "node:net";

export interface StallProxy {
  port: number;
  /** Stop forwarding in both directions, keeping the connections open. */
  stall(): void;
  close(): Promise<void>;
}

export async function startStallProxy(targetPort: number, targetHost = "127.0.0.1"): Promise<StallProxy> {
  const sockets = new Set<net.Socket>();
  let stalled = false;
  const server = net.createServer((client) => {
    const upstream = net.connect(targetPort, targetHost);
    for (const s of [client, upstream]) {
      sockets.add(s);
      s.on("error", () => undefined);
      s.on("close", () => sockets.delete(s));
    }
    const forward = (from: net.Socket, to: net.Socket) =>
      from.on("data", (b: Buffer) => {
        if (!stalled) to.write(b);
      });
    forward(client, upstream);
    forward(upstream, client);
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  return {
    port: (server.address() as net.AddressInfo).port,
    stall() {
      stalled = true;
      // Stop reading too, so nothing is even acknowledged at the application level.
      for (const s of sockets) s.pause();
    },
    async close() {
      for (const s of sockets) s.destroy();
      await new Promise((r) => server.close(r));
    },
  };
}
