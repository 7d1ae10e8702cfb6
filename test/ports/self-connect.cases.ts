/**
 * The reproductions of test/ports/self-connect.test.ts, run in a network namespace of their own
 * (test/support/private-loopback.ts); each returns what the test asserts, as plain JSON.
 */
import { errorKind, fetchText, makeAgent } from "../../gate/transport/http";
import { canListen, ephemeralRange, openTcp, SelfConnectionError } from "../../ports";
import { quietEphemeralPort, socketsOnPort, steeredRounds } from "../support/self-connect";

/**
 * Bounds of one reproduction: rounds of steering, and time. In a loaded fresh-clone run on the
 * machine's own loopback every round missed and 20 rounds ran out in 3.1 s; the time bound ends a
 * reproduction (a round that misses costs 0.15-0.3 s).
 */
const ROUNDS = 1_000;
const BOUND_MS = 90_000;

/** What a test asserts of one reproduction. */
export interface SelfConnectOutcome {
  port: number;
  range: [number, number];
  /** The error the code under test gave (or a description of what it did instead). */
  name: string;
  message: string;
  selfConnectionError: boolean;
  kind: string;
  /** Sockets on the port right after (/proc/net/tcp lines): none, when it was reset. */
  sockets: string[];
  listenable: boolean;
}

/**
 * Steers connects to PORT into a self-connection and runs ATTEMPT as the next connect, until
 * ATTEMPT reports one (it returns the error it got, or an Error saying what it connected to).
 * ECONNREFUSED means the steering missed this round (another connection moved the kernel on).
 */
async function untilSelfConnected(port: number, attempt: () => Promise<unknown>): Promise<unknown> {
  let last: unknown = new Error("no round ran");
  let ran = false;
  await steeredRounds(
    port,
    { rounds: ROUNDS, boundMs: BOUND_MS },
    async () => {
      last = await attempt();
      ran = true;
    },
    () => ran && (last as { code?: string }).code !== "ECONNREFUSED",
  );
  return last;
}

async function outcome(port: number, err: unknown): Promise<SelfConnectOutcome> {
  const e = err instanceof Error ? err : new Error(String(err));
  return {
    port,
    range: ephemeralRange(),
    name: e.name,
    message: e.message,
    selfConnectionError: err instanceof SelfConnectionError,
    kind: errorKind(err),
    sockets: socketsOnPort(port),
    listenable: await canListen(port),
  };
}

/** openTcp, the one way gpuhost opens connections, as the next connect to a steered port. */
export async function openTcpCase(): Promise<SelfConnectOutcome> {
  const port = await quietEphemeralPort();
  const err = await untilSelfConnected(port, () =>
    openTcp("127.0.0.1", port, { timeoutMs: 2_000 }).then(
      (socket) => {
        socket.destroy();
        return new Error(`openTcp connected to 127.0.0.1:${port}, where nothing listens`);
      },
      (e: unknown) => e,
    ),
  );
  return outcome(port, err);
}

/** An HTTP request through the gate's agent as the next connect to a steered port. */
export async function gateAgentCase(): Promise<SelfConnectOutcome> {
  const port = await quietEphemeralPort();
  const agent = makeAgent(1);
  try {
    const err = await untilSelfConnected(port, () =>
      fetchText(agent, `http://127.0.0.1:${port}/v1/models`, { signal: AbortSignal.timeout(3_000) }).then(
        (reply) => new Error(`answered HTTP ${reply.status}: ${reply.text}`),
        (e: unknown) => e,
      ),
    );
    return await outcome(port, err);
  } finally {
    await agent.destroy();
  }
}
