/**
 * Real TCP self-connections on demand, on loopback (issue 25.3). Linux picks a connection's source
 * port from the ephemeral range; a connect to 127.0.0.1:P, P in that range and nothing listening,
 * can get P itself as its source port and is then connected to itself. Left alone that takes some
 * thousands of connects (each picks about one of the range's ~14,000 even ports). To make it happen
 * within a second or two, the kernel's choice is steered: connects to P are made one after another,
 * reading the source port each one got, until one lands just below P (the kernel walks the range
 * for a destination in random steps of 2 to 16); then every port of P's parity between it and P is
 * bound, and the kernel, which skips bound ports, hands the next connect to P its own port. That
 * next connect is the code under test's.
 */
import { readFileSync } from "node:fs";
import * as net from "node:net";
import { randomInt } from "node:crypto";
import { canListen, ephemeralRange } from "../../ports";

/** How far below P a source port must land for the bound ports to lead the next connect to P. */
const WINDOW = 46;

/** /proc/net/tcp's state code of TIME_WAIT. */
const TIME_WAIT = "06";

/** Every TCP socket of any state (listening, connected, TIME_WAIT), IPv4 and IPv6, with its local port and state. */
function sockets(): { port: number; state: string; line: string }[] {
  const found: { port: number; state: string; line: string }[] = [];
  for (const file of ["/proc/net/tcp", "/proc/net/tcp6"]) {
    let text: string;
    try {
      text = readFileSync(file, "utf8");
    } catch {
      continue; // no IPv6
    }
    for (const line of text.split("\n").slice(1)) {
      const [, local, , state] = line.trim().split(/\s+/);
      if (local) found.push({ port: parseInt(local.slice(local.lastIndexOf(":") + 1), 16), state, line: line.trim() });
    }
  }
  return found;
}

/** Sockets of any state (TIME_WAIT included) whose local port is PORT, as /proc/net/tcp{,6} lines. */
export function socketsOnPort(port: number): string[] {
  return sockets()
    .filter((s) => s.port === port)
    .map((s) => s.line);
}

/** How far below a port the kernel's walk for it may be when it is chosen (about 110 steps of 2-16). */
const NEAR = 1_000;

/**
 * An even port of the ephemeral range (even: the ports the kernel tries first for connect()) that
 * nothing listens on, with no socket on it nor on the WINDOW ports below it (so the steering's bound
 * ports all bind and no other connection sits among them), whose walk is a short way below it now:
 * candidates get one connect each until one lands less than NEAR below itself, which spares the
 * steering most of a walk around the range.
 */
export async function quietEphemeralPort(): Promise<number> {
  const [low, high] = ephemeralRange();
  // A TIME_WAIT socket neither stops a listen (Node binds with SO_REUSEADDR) nor keeps the kernel
  // from giving its port to a connect to another destination, so it does not disturb the steering;
  // on a machine that has just run thousands of requests (a CI run beside this one) the range is
  // full of them, and counting them left no quiet port among 400 candidates.
  const used = new Set(
    sockets()
      .filter((s) => s.state !== TIME_WAIT)
      .map((s) => s.port),
  );
  let fallback: number | null = null;
  for (let i = 0; i < 400; i++) {
    const port = randomInt(low + WINDOW + 2, high - 1) & ~1;
    let quiet = true;
    for (let p = port - WINDOW; p <= port && quiet; p++) quiet = !used.has(p);
    if (!quiet || !(await canListen(port))) continue;
    fallback ??= port;
    const { source } = await attempt(port);
    if (source !== undefined && source < port && source >= port - NEAR) return port;
  }
  if (fallback !== null) return fallback;
  throw new Error(`no quiet port found in the ephemeral range ${low}-${high}`);
}

/**
 * One connect to 127.0.0.1:PORT: the source port the kernel chose for it (read from the socket right
 * after connect(), through Node's handle: the public localPort is empty while connecting), and whether
 * it connected (then it is reset at once: on a port nothing listens on, that was a self-connection).
 */
function attempt(port: number): Promise<{ source: number | undefined; connected: boolean }> {
  return new Promise((resolve) => {
    let source: number | undefined;
    const s = net.connect({ host: "127.0.0.1", port });
    s.once("connectionAttempt", () =>
      process.nextTick(() => {
        const out: { port?: number } = {};
        (s as unknown as { _handle?: { getsockname?(o: object): number } })._handle?.getsockname?.(out);
        source = out.port;
      }),
    );
    const timer = setTimeout(() => {
      s.destroy();
      resolve({ source, connected: false });
    }, 2_000);
    s.once("connect", () => {
      clearTimeout(timer);
      s.resetAndDestroy();
      resolve({ source: port, connected: true });
    });
    s.once("error", () => {
      clearTimeout(timer);
      resolve({ source, connected: false });
    });
  });
}

function listenOn(port: number): Promise<net.Server | null> {
  return new Promise((resolve) => {
    const srv = net.createServer();
    srv.once("error", () => resolve(null));
    srv.listen(port, "127.0.0.1", () => resolve(srv));
  });
}

interface Steered {
  /** Connects made to get there. */
  attempts: number;
  /** Unbinds the ports bound to lead the next connect to P. */
  release(): Promise<void>;
}

/**
 * Connects to 127.0.0.1:PORT (which nothing may listen on) until the next connect there will most
 * likely be connected to itself, and holds that state until release(); null when UNTIL passes first
 * (performance.now() milliseconds) or after MAXATTEMPTS connects.
 */
async function steerToSelfConnection(port: number, until: number, maxAttempts = 60_000): Promise<Steered | null> {
  for (let attempts = 1; attempts <= maxAttempts && performance.now() < until; attempts++) {
    const { source, connected } = await attempt(port);
    if (connected || source === undefined || source < port - WINDOW || source >= port) continue;
    const bound: net.Server[] = [];
    for (let p = source + 2; p < port; p += 2) {
      const srv = await listenOn(p);
      if (srv !== null) bound.push(srv);
    }
    return {
      attempts,
      release: () => Promise.all(bound.map((s) => new Promise((r) => s.close(r)))).then(() => undefined),
    };
  }
  return null;
}

/**
 * Rounds of steering connects to PORT (steerToSelfConnection), each running DURING while the steered
 * state holds and releasing it after, until DONE() holds before a round, ROUNDS rounds ran, or
 * BOUNDMS passed. DURING makes the connect under test (or waits for the code under test to make it).
 */
export async function steeredRounds(
  port: number,
  bounds: { rounds: number; boundMs: number },
  during: () => Promise<void>,
  done: () => boolean,
): Promise<void> {
  const until = performance.now() + bounds.boundMs;
  for (let round = 0; round < bounds.rounds && !done(); round++) {
    const steered = await steerToSelfConnection(port, until);
    if (steered === null) return;
    try {
      await during();
    } finally {
      await steered.release();
    }
  }
}
