/**
 * The reproductions of test/fleet-verification/router-api-self-connect.test.ts, run in a network
 * namespace of their own (test/support/private-loopback.ts); each returns what the test asserts.
 */
import {
  listWorkers,
  readRequestCounts,
  reconcileWorkers,
  workersLost,
} from "../../components/fleet-verification/router-api";
import { quietEphemeralPort, socketsOnPort, steeredRounds } from "../support/self-connect";

/**
 * Bounds of the steering: rounds and time (each call is the next connect to the steered port). On
 * the machine's own loopback, in a loaded run, 40 rounds all missed within 11.7 s; the time bound ends it.
 */
const ROUNDS = 1_000;
const STEER_MS = 90_000;

export const CALLS: Record<string, (base: string) => Promise<unknown>> = {
  listWorkers: (base) => listWorkers(base),
  readRequestCounts: (base) => readRequestCounts(`${base}/metrics`),
  reconcileWorkers: (base) => reconcileWorkers(base, ["http://10.0.0.1:30000"], { deadlineMs: 0 }),
  // its metrics on a port of its own that nothing listens on either: the worker list is the first connect
  workersLost: (base) => workersLost(base, `${base}/metrics`, [{ name: "w", url: "http://10.0.0.1:30000" }]),
};

export interface RouterCallOutcome {
  port: number;
  /** Whether the call resolved (with no router there), and with what. */
  resolved: boolean;
  trusted: string;
  /** Each failed call's message, the self-connection's last. */
  errors: string[];
  /** Sockets on the port right after (/proc/net/tcp lines). */
  sockets: string[];
}

/** Router API call NAME, made as the next connect to a steered port until one meets a self-connection. */
export async function routerCallCase(name: string): Promise<RouterCallOutcome> {
  const call = CALLS[name];
  const port = await quietEphemeralPort();
  const base = `http://127.0.0.1:${port}`;
  const errors: string[] = [];
  let resolved = false;
  let trusted: unknown;
  await steeredRounds(
    port,
    { rounds: ROUNDS, boundMs: STEER_MS },
    async () => {
      try {
        trusted = await call(base);
        resolved = true;
      } catch (e) {
        errors.push((e as Error).message);
      }
    },
    () => resolved || errors.some((e) => /connected to itself/.test(e)),
  );
  return { port, resolved, trusted: JSON.stringify(trusted) ?? "undefined", errors, sockets: socketsOnPort(port) };
}
