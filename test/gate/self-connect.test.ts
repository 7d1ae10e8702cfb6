/**
 * Issue 25.3: the gate waiting for a server on a port of the kernel's ephemeral range, nothing
 * listening yet, meets a real self-connection (test/support/self-connect.ts steers the kernel into
 * one). It must take it as "not listening" and keep waiting, leave the port free for the server,
 * and pass once the server (written here) binds the port. Before the fix the connect phase took the
 * self-connection for the server, the next phase found the port refusing and the gate reported the
 * server gone; the closed self-connection sat in TIME_WAIT on the port (EADDRINUSE for a server
 * binding without SO_REUSEADDR).
 */
import { afterEach, describe, expect, it } from "vitest";
import { verify } from "../../gate/index";
import { quietEphemeralPort, socketsOnPort, steerToSelfConnection } from "../support/self-connect";
import { answering, type TestServer } from "./misbehaving-servers";

const servers: TestServer[] = [];
afterEach(async () => {
  for (const s of servers.splice(0)) await s.close();
});

/**
 * Bounds of the steering (rounds, time); the gate's own deadline bounds the rest. 20 rounds of three
 * retries each once ran out with no self-connection while other test files loaded both cores (the
 * gate's timers fired late and missed the steered port): 40 rounds of five, within the same time.
 */
const ROUNDS = 40;
const STEER_MS = 20_000;
/** Gate retries this often; one steering round leaves the gate HOLD_RETRIES of them to take the port. */
const RETRY_MS = 20;
const HOLD_RETRIES = 5;

describe("the gate and a self-connection on the serving port", () => {
  it("a port of the ephemeral range nothing listens on yet: the self-connection is 'not listening', the port stays free, the gate passes once the server binds it", async () => {
    const port = await quietEphemeralPort();
    const details: string[] = [];
    let selfConnected = false;
    let leftConnect = false;
    const gate = verify(
      { url: `http://127.0.0.1:${port}`, model: "m" },
      {
        deadlineSeconds: 40,
        retryInitialIntervalMs: RETRY_MS,
        retryMaxIntervalMs: RETRY_MS,
        // Every attempt's outcome is reported, so the test sees the self-connection.
        progressIntervalSeconds: 0.001,
        serverGoneSeconds: 0.5,
        // The server below answers "OK" to everything: this test is about the connect phase.
        answers: { file: "none" },
        stabilityProbes: 1,
      },
      {
        onPhase: (phase, detail) => {
          details.push(`${phase}: ${detail}`);
          if (phase !== "connect") leftConnect = true;
          if (/connected to itself/.test(detail)) selfConnected = true;
        },
      },
    );
    // Steer the gate's next connect into a self-connection until it had one (or, before the fix,
    // took one for the server and left the connect phase with nothing listening).
    const until = performance.now() + STEER_MS;
    for (let round = 0; round < ROUNDS && !selfConnected && !leftConnect; round++) {
      const steered = await steerToSelfConnection(port, until);
      if (steered === null) break;
      await new Promise((r) => setTimeout(r, HOLD_RETRIES * RETRY_MS));
      await steered.release();
    }
    expect(
      selfConnected || leftConnect,
      `no self-connection within ${ROUNDS} rounds; the gate said:\n${details.join("\n")}`,
    ).toBe(true);
    // The server is slower to come up than serverGoneSeconds (a model loads for minutes).
    await new Promise((r) => setTimeout(r, 1_000));
    // Nothing holds the port (no TIME_WAIT): a server may bind it, with or without SO_REUSEADDR.
    expect.soft(socketsOnPort(port)).toEqual([]);
    const bound = await answering("OK", port).then(
      (server) => servers.push(server) && "bound",
      (err: Error) => err.message,
    );
    expect.soft(bound).toBe("bound");
    const result = await gate;
    expect(result.diagnosis).toBeNull();
    expect(result.ready).toBe(true);
    const said = details.find((d) => /connected to itself/.test(d));
    expect(said).toMatch(
      new RegExp(
        `^connect: waiting \\d+ s, \\d+ attempt\\(s\\); last: TCP connect to http://127\\.0\\.0\\.1:${port}: TCP connect to 127\\.0\\.0\\.1:${port} connected to itself: nothing listens there`,
      ),
    );
  }, 60_000);
});
