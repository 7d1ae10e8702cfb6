/**
 * Issue 25.3: a connect to a port of the kernel's ephemeral range that nothing listens on can come
 * back connected to itself. Reproduced for real on loopback (test/support/self-connect.ts steers the
 * kernel's choice of source port so it happens within a second or two): the one way gpuhost opens
 * such connections (openTcp, which the gate's HTTP agent uses too) must refuse it as "nothing
 * listens", say why, and leave the port free at once (no TIME_WAIT a server would meet).
 *
 * Each reproduction (self-connect.cases.ts) runs in a network namespace of its own where the machine
 * allows one (test/support/private-loopback.ts): other processes' loopback connects no longer move
 * the kernel's choice under it.
 */
import * as path from "node:path";
import { describe, expect, it } from "vitest";
import { inPrivateLoopback } from "../support/private-loopback";
import type { SelfConnectOutcome } from "./self-connect.cases";

const CASES = path.join(__dirname, "self-connect.cases.ts");

describe("self-connections (a port of the ephemeral range nothing listens on)", () => {
  it("a real one, from connects repeated until the kernel picks the port itself: openTcp refuses it as nothing listening, and the port is free at once", async () => {
    const { result: r } = await inPrivateLoopback<SelfConnectOutcome>(CASES, "openTcpCase", [], 110_000);
    const [low, high] = r.range;
    expect(r.port).toBeGreaterThanOrEqual(low);
    expect(r.port).toBeLessThanOrEqual(high);
    expect(r.selfConnectionError, `${r.name}: ${r.message}`).toBe(true);
    expect(r.message).toBe(
      `TCP connect to 127.0.0.1:${r.port} connected to itself: nothing listens there, and the kernel chose the port as the connection's own source port (it lies in the ephemeral range ${low}-${high}); the socket was reset so the port stays free`,
    );
    expect(r.kind).toBe("connection refused");
    // Reset, not closed: no TIME_WAIT left on the port, which a server binding it without
    // SO_REUSEADDR would meet as EADDRINUSE for a minute.
    expect(r.sockets).toEqual([]);
    expect(r.listenable).toBe(true);
  }, 120_000);

  it("an HTTP request through the gate's agent over a self-connection is refused before a byte is sent, never answered by its own request", async () => {
    const { result: r } = await inPrivateLoopback<SelfConnectOutcome>(CASES, "gateAgentCase", [], 110_000);
    expect(r.selfConnectionError, `${r.name}: ${r.message}`).toBe(true);
    expect(r.kind).toBe("connection refused");
    expect(r.sockets).toEqual([]);
  }, 120_000);
});
