/**
 * Issue 25.3: the gate waiting for a server on a port of the kernel's ephemeral range, nothing
 * listening yet, meets a real self-connection (test/support/self-connect.ts steers the kernel into
 * one). It must take it as "not listening" and keep waiting, leave the port free for the server,
 * and pass once the server (written here) binds the port. Before the fix the connect phase took the
 * self-connection for the server, the next phase found the port refusing and the gate reported the
 * server gone; the closed self-connection sat in TIME_WAIT on the port (EADDRINUSE for a server
 * binding without SO_REUSEADDR).
 *
 * The reproduction (self-connect.cases.ts) runs in a network namespace of its own where the machine
 * allows one (test/support/private-loopback.ts), away from other processes' connects.
 */
import * as path from "node:path";
import { describe, expect, it } from "vitest";
import { inPrivateLoopback } from "../support/private-loopback";
import type { GateSelfConnectOutcome } from "./self-connect.cases";

const CASES = path.join(__dirname, "self-connect.cases.ts");

describe("the gate and a self-connection on the serving port", () => {
  it("a port of the ephemeral range nothing listens on yet: the self-connection is 'not listening', the port stays free, the gate passes once the server binds it", async () => {
    const { result: r } = await inPrivateLoopback<GateSelfConnectOutcome>(CASES, "gateCase", [], 55_000);
    expect(
      r.selfConnected || r.leftConnect,
      `no self-connection while steering; the gate said:\n${r.details.join("\n")}`,
    ).toBe(true);
    // Nothing holds the port (no TIME_WAIT): a server may bind it, with or without SO_REUSEADDR.
    expect.soft(r.sockets).toEqual([]);
    expect.soft(r.bound).toBe("bound");
    expect(r.diagnosis).toBeNull();
    expect(r.ready).toBe(true);
    const said = r.details.find((d) => /connected to itself/.test(d));
    expect(said).toMatch(
      new RegExp(
        `^connect: waiting \\d+ s, \\d+ attempt\\(s\\); last: TCP connect to http://127\\.0\\.0\\.1:${r.port}: TCP connect to 127\\.0\\.0\\.1:${r.port} connected to itself: nothing listens there`,
      ),
    );
  }, 60_000);
});
