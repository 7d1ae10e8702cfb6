/**
 * The reproduction of test/gate/self-connect.test.ts, run in a network namespace of its own
 * (test/support/private-loopback.ts); it returns what the test asserts, as plain JSON.
 */
import { verify } from "../../gate/index";
import { quietEphemeralPort, socketsOnPort, steeredRounds } from "../support/self-connect";
import { answering, type TestServer } from "./misbehaving-servers";

/**
 * Bounds of the steering (rounds, time); the gate's own deadline bounds the rest. On the machine's
 * own loopback 20 rounds of three retries each once ran out with no self-connection while other test
 * files loaded both cores (the gate's timers fired late and missed the steered port): 40 rounds of
 * five, within the same time.
 */
const ROUNDS = 40;
const STEER_MS = 20_000;
/** Gate retries this often; one steering round leaves the gate HOLD_RETRIES of them to take the port. */
const RETRY_MS = 20;
const HOLD_RETRIES = 5;

export interface GateSelfConnectOutcome {
  port: number;
  /** Every phase report of the gate, "phase: detail". */
  details: string[];
  selfConnected: boolean;
  leftConnect: boolean;
  /** Sockets on the port once the steering ended (/proc/net/tcp lines). */
  sockets: string[];
  /** "bound", or why the server could not bind the port. */
  bound: string;
  ready: boolean;
  diagnosis: unknown;
}

/** The gate waiting on a steered port, then a server binding it. */
export async function gateCase(): Promise<GateSelfConnectOutcome> {
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
  await steeredRounds(
    port,
    { rounds: ROUNDS, boundMs: STEER_MS },
    () => new Promise((r) => setTimeout(r, HOLD_RETRIES * RETRY_MS)),
    () => selfConnected || leftConnect,
  );
  const steeredInto = { selfConnected, leftConnect };
  // The server is slower to come up than serverGoneSeconds (a model loads for minutes).
  await new Promise((r) => setTimeout(r, 1_000));
  const sockets = socketsOnPort(port);
  let server: TestServer | undefined;
  const bound = await answering("OK", port).then(
    (s) => ((server = s), "bound"),
    (err: Error) => err.message,
  );
  try {
    const result = await gate;
    return { port, details, ...steeredInto, sockets, bound, ready: result.ready, diagnosis: result.diagnosis };
  } finally {
    await server?.close();
  }
}
