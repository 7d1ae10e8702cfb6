/**
 * Issue 42.4: the router API (listWorkers, reconcileWorkers, workersLost, readRequestCounts) against a
 * router port of the ephemeral range that nothing listens on, steered into a real TCP self-connection
 * (test/support/self-connect.ts, as the gate's own test does). Each call goes through the gate's
 * connections (openTcp), so the self-connection is refused as "nothing listens", never read as the
 * router's answer, and it is reset, not closed: no socket is left on the port, which a router may bind
 * at once. With the global fetch it used before, the self-connected request read its own bytes back,
 * and the closed connection held the port in TIME_WAIT for 60 s (EADDRINUSE for the router).
 *
 * Each reproduction (router-api-self-connect.cases.ts) runs in a network namespace of its own where
 * the machine allows one (test/support/private-loopback.ts), away from other processes' connects.
 */
import * as path from "node:path";
import { describe, expect, it } from "vitest";
import { inPrivateLoopback } from "../support/private-loopback";
import { CALLS, type RouterCallOutcome } from "./router-api-self-connect.cases";

const CASES = path.join(__dirname, "router-api-self-connect.cases.ts");

describe("the router API and a self-connection on the router's port", () => {
  it.each(Object.keys(CALLS))(
    "%s: the self-connection is refused (nothing listens), never trusted, and leaves the port free",
    async (name) => {
      const { result: r } = await inPrivateLoopback<RouterCallOutcome>(CASES, "routerCallCase", [name], 110_000);
      expect(r.resolved, `a call resolved with no router there: ${r.trusted}`).toBe(false);
      const refused = r.errors.find((e) => /connected to itself/.test(e));
      expect(refused, `no self-connection:\n${r.errors.join("\n")}`).toBeDefined();
      expect(refused).toMatch(
        new RegExp(`TCP connect to 127\\.0\\.0\\.1:${r.port} connected to itself: nothing listens there`),
      );
      // Reset, not closed: nothing sits on the port (no TIME_WAIT), so the router can bind it now.
      expect(r.sockets).toEqual([]);
    },
    120_000,
  );
});
