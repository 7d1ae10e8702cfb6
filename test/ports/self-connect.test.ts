/**
 * Issue 25.3: a connect to a port of the kernel's ephemeral range that nothing listens on can come
 * back connected to itself. Reproduced for real on loopback (test/support/self-connect.ts steers the
 * kernel's choice of source port so it happens within a second or two): the one way gpuhost opens
 * such connections (openTcp, which the gate's HTTP agent uses too) must refuse it as "nothing
 * listens", say why, and leave the port free at once (no TIME_WAIT a server would meet).
 */
import { describe, expect, it } from "vitest";
import { errorKind, fetchText, makeAgent } from "../../gate/transport/http";
import { canListen, ephemeralRange, openTcp, SelfConnectionError } from "../../ports";
import { quietEphemeralPort, socketsOnPort, steerToSelfConnection } from "../support/self-connect";

/**
 * Bounds of one reproduction: rounds of steering, and time. In a loaded fresh-clone run every round
 * missed and 20 rounds ran out in 3.1 s of the 20 s; the time bound now ends a reproduction (a round
 * that misses costs 0.15-0.3 s). A storm of loopback connects beside this file (about 7,000 a second)
 * still fails it in other ways until the storm's sockets age out: docs/development.md, fifth round.
 */
const ROUNDS = 1_000;
const BOUND_MS = 90_000;

/**
 * Steers connects to PORT into a self-connection and runs ATTEMPT as the next connect, until
 * ATTEMPT reports one (it returns the error it got, or null when it connected to something).
 * ECONNREFUSED means the steering missed this round (another connection moved the kernel on).
 */
async function untilSelfConnected(port: number, attempt: () => Promise<unknown>): Promise<unknown> {
  const until = performance.now() + BOUND_MS;
  let last: unknown = "no round ran";
  for (let round = 0; round < ROUNDS; round++) {
    const steered = await steerToSelfConnection(port, until);
    if (steered === null) break;
    try {
      last = await attempt();
    } finally {
      await steered.release();
    }
    if ((last as { code?: string }).code !== "ECONNREFUSED") return last;
  }
  return last;
}

describe("self-connections (a port of the ephemeral range nothing listens on)", () => {
  it("a real one, from connects repeated until the kernel picks the port itself: openTcp refuses it as nothing listening, and the port is free at once", async () => {
    const port = await quietEphemeralPort();
    const [low, high] = ephemeralRange();
    expect(port).toBeGreaterThanOrEqual(low);
    expect(port).toBeLessThanOrEqual(high);
    const err = await untilSelfConnected(port, () =>
      openTcp("127.0.0.1", port, { timeoutMs: 2_000 }).then(
        (socket) => {
          socket.destroy();
          return new Error(`openTcp connected to 127.0.0.1:${port}, where nothing listens`);
        },
        (e: unknown) => e,
      ),
    );
    expect(err).toBeInstanceOf(SelfConnectionError);
    expect((err as Error).message).toBe(
      `TCP connect to 127.0.0.1:${port} connected to itself: nothing listens there, and the kernel chose the port as the connection's own source port (it lies in the ephemeral range ${low}-${high}); the socket was reset so the port stays free`,
    );
    expect(errorKind(err)).toBe("connection refused");
    // Reset, not closed: no TIME_WAIT left on the port, which a server binding it without
    // SO_REUSEADDR would meet as EADDRINUSE for a minute.
    expect(socketsOnPort(port)).toEqual([]);
    expect(await canListen(port)).toBe(true);
  }, 120_000);

  it("an HTTP request through the gate's agent over a self-connection is refused before a byte is sent, never answered by its own request", async () => {
    const port = await quietEphemeralPort();
    const agent = makeAgent(1);
    try {
      const err = await untilSelfConnected(port, () =>
        fetchText(agent, `http://127.0.0.1:${port}/v1/models`, { signal: AbortSignal.timeout(3_000) }).then(
          (reply) => new Error(`answered HTTP ${reply.status}: ${reply.text}`),
          (e: unknown) => e,
        ),
      );
      expect(err).toBeInstanceOf(SelfConnectionError);
      expect(errorKind(err)).toBe("connection refused");
      expect(socketsOnPort(port)).toEqual([]);
    } finally {
      await agent.destroy();
    }
  }, 120_000);
});
