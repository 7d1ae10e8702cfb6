// Local ports: a free one to listen on, and whether something listens. The one helper for the
// gate's SSH tunnel, the simulator's late-opening port and the tests' servers, and the one TCP
// connect (openTcp) of every probe and HTTP connection of the gate, the router's API and the
// benchmarks (gate/transport/http.ts makeAgent, fetchOnce). Node's own modules only (the
// simulator bundle on a test host carries it).
//
// A port chosen here is often bound later, sometimes minutes later and again after each restart (a
// stack's service port, a test host's sshd). The kernel's own choice (listen on port 0) comes from
// the ephemeral range, which every connect() and every listen(0) on the machine draws from too: the
// Pulumi engine's plugins alone open dozens of such sockets a run, so a port chosen there can be
// taken before its owner binds it, and the service then fails with EADDRINUSE. So ports are drawn
// below that range instead, where the kernel never hands out ports by itself, and reserved by a
// file naming this process, so two processes (two test files, two updates) never draw the same one.
import { randomBytes, randomInt } from "node:crypto";
import {
  closeSync,
  constants,
  fstatSync,
  linkSync,
  lstatSync,
  mkdirSync,
  openSync,
  readFileSync,
  rmSync,
  writeSync,
} from "node:fs";
import * as net from "node:net";
import * as os from "node:os";
import * as path from "node:path";

/** The lowest port drawn: above the well-known ports and the 1024-9999 that many daemons use. */
export const DRAW_LOW = 10_000;
/** Draws before falling back to the kernel's choice (each draw is checked by listening on it). */
const DRAWS = 64;

/** The kernel's ephemeral range ([low, high]), or Linux's default where it cannot be read. */
export function ephemeralRange(): [number, number] {
  try {
    const [low, high] = readFileSync("/proc/sys/net/ipv4/ip_local_port_range", "utf8").trim().split(/\s+/).map(Number);
    if (Number.isInteger(low) && Number.isInteger(high) && low <= high) return [low, high];
  } catch {
    // not Linux, or no /proc: the default below
  }
  return [32768, 60999];
}

/**
 * One sentence when PORT, configured at WHERE (a config path), lies inside the kernel's ephemeral
 * RANGE, else undefined. Every outgoing connection on the machine takes its source port from that
 * range, so such a port can be taken by one before its service binds it (EADDRINUSE), and a connect
 * to it while nothing listens yet can come back connected to itself (openTcp refuses that).
 */
export function ephemeralPortWarning(
  where: string,
  port: number,
  range: [number, number] = ephemeralRange(),
): string | undefined {
  const [low, high] = range;
  if (port < low || port > high) return undefined;
  return `${where} ${port} lies inside the kernel's ephemeral port range ${low}-${high} (/proc/sys/net/ipv4/ip_local_port_range), from which every outgoing connection takes its source port: it can be taken before the service binds it, and a connect while nothing listens can connect to itself; a port below ${low} avoids both.`;
}

/**
 * Where reservations live: one folder per user, one file per port, holding the reserving PID. A test
 * run gives each run a temporary folder of its own (engine/contain.sh) and names the shared one in
 * GPUHOST_PORT_RESERVATIONS, so runs side by side still see each other's reservations.
 */
export function reservationDir(): string {
  const shared = process.env.GPUHOST_PORT_RESERVATIONS;
  if (shared !== undefined && shared !== "") return shared;
  return path.join(os.tmpdir(), `gpuhost-ports-${process.getuid?.() ?? "user"}`);
}

/**
 * DIR, created owner-only when missing, and checked: /tmp is everyone's, so a folder or link someone
 * else planted at this name would receive our files (or have them removed under us). Throws one
 * sentence naming the folder when it is not a folder of this user's alone.
 */
function safeReservationDir(dir: string): string {
  try {
    mkdirSync(dir, { mode: 0o700 });
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== "EEXIST") throw e;
  }
  // lstat: a symbolic link is judged itself, never the folder it points at
  const st = lstatSync(dir);
  const problem = st.isSymbolicLink()
    ? "is a symbolic link"
    : !st.isDirectory()
      ? "is not a folder"
      : process.getuid && st.uid !== process.getuid()
        ? `belongs to another user (uid ${st.uid})`
        : (st.mode & 0o022) !== 0
          ? "is writable by other users"
          : undefined;
  if (problem) {
    throw new Error(
      `the port reservation folder ${dir} ${problem}; remove it (gpuhost creates the folder itself, owner-only)`,
    );
  }
  return dir;
}

/** Ports this process handed out already; their reservations are removed when it exits. */
const handedOut = new Set<number>();
let cleanupRegistered = false;

function removeReservationsOnExit(): void {
  if (cleanupRegistered) return;
  cleanupRegistered = true;
  process.once("exit", () => {
    const dir = reservationDir();
    for (const port of handedOut) {
      const file = path.join(dir, String(port));
      // a live holder's file is never reclaimed, so one naming this process is still its own
      if (holderOf(file)?.pid === process.pid) rmSync(file, { force: true });
    }
  });
}

/** Whether process PID runs on this machine (another user's included). */
export function processAlive(pid: number): boolean {
  if (!Number.isInteger(pid) || pid <= 0) return false;
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === "EPERM";
  }
}

/** Creates FILE holding TEXT, or fails with EEXIST; never through a link planted at its name. */
function createExclusive(file: string, text: string): void {
  const fd = openSync(file, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW, 0o600);
  try {
    writeSync(fd, text);
  } finally {
    closeSync(fd);
  }
}

/**
 * Reserves FILE for this process: true when it was created here. Written whole under a name of its
 * own first and then linked into place (link fails when the name exists), so no other process ever
 * reads a reservation half-written: an empty one would look like a dead holder's.
 */
function createReservation(file: string): boolean {
  const temp = `${file}.new-${process.pid}-${randomBytes(4).toString("hex")}`;
  createExclusive(temp, String(process.pid));
  try {
    linkSync(temp, file);
    return true;
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === "EEXIST") return false;
    throw e;
  } finally {
    rmSync(temp, { force: true });
  }
}

/** The reservation at FILE: its inode and the PID it names (NaN when it names none); undefined when gone. */
function holderOf(file: string): { ino: number; pid: number } | undefined {
  let fd: number;
  try {
    fd = openSync(file, constants.O_RDONLY | constants.O_NOFOLLOW);
  } catch {
    try {
      // a link or something unreadable at a port's name: nobody's reservation
      return { ino: lstatSync(file).ino, pid: NaN };
    } catch {
      return undefined; // gone
    }
  }
  try {
    const text = readFileSync(fd, "utf8").trim();
    return { ino: fstatSync(fd).ino, pid: /^\d+$/.test(text) ? Number(text) : NaN };
  } finally {
    closeSync(fd);
  }
}

/**
 * Reserves PORT for this process: true when its file is created, or was left by a process that is
 * gone; false when a live process (this one included) holds it, or another process reclaims it.
 *
 * Reclaiming is the race: several processes may find the same dead holder's file at once, and a
 * remove-then-create lets each remove the file another one just created (both win). So a reclaimer
 * first claims that very file (its inode) with a claim file only one process can create; the winner
 * checks the reservation is still that dead holder's, then replaces it. The others back off. (A
 * process killed inside those few microseconds leaves its claim, and that one port stays reserved:
 * draws pass it by, as they pass a live holder's.)
 */
export function reservePort(port: number, dir = reservationDir()): boolean {
  const file = path.join(safeReservationDir(dir), String(port));
  if (createReservation(file)) return true;
  const seen = holderOf(file);
  if (seen === undefined) return createReservation(file); // its holder just removed it
  if (processAlive(seen.pid)) return false;
  const claim = `${file}.reclaim-${seen.ino}`;
  try {
    createExclusive(claim, String(process.pid));
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === "EEXIST") return false; // another process reclaims it
    throw e;
  }
  try {
    const now = holderOf(file);
    if (now === undefined) return createReservation(file);
    // replaced meanwhile (a reclaimer before us was done and let go of its claim): not stale any more
    if (now.ino !== seen.ino || processAlive(now.pid)) return false;
    rmSync(file, { force: true });
    // a process drawing this port for the first time may still create it first: then it holds it
    return createReservation(file);
  } finally {
    rmSync(claim, { force: true });
  }
}

/** Whether something may listen on HOST:PORT right now (nothing else does). */
export function canListen(port: number, host = "127.0.0.1"): Promise<boolean> {
  return new Promise((resolve) => {
    const srv = net.createServer();
    srv.once("error", () => resolve(false));
    srv.listen(port, host, () => srv.close(() => resolve(true)));
  });
}

/** The kernel's choice: a port free right now in the ephemeral range. */
function kernelPort(host: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.listen(0, host, () => {
      const { port } = srv.address() as net.AddressInfo;
      srv.close(() => resolve(port));
    });
    srv.on("error", reject);
  });
}

/**
 * A TCP port free on `host` (default 127.0.0.1) and reserved for this process: drawn at random
 * below the ephemeral range, never the same twice in one process nor in two live processes of this
 * user; the kernel's choice only where no such port could be found.
 */
export async function freeLocalPort(host = "127.0.0.1"): Promise<number> {
  const [ephemeralLow] = ephemeralRange();
  const high = Math.min(ephemeralLow, 65536) - 1;
  if (high - DRAW_LOW >= 1000) {
    for (let i = 0; i < DRAWS; i++) {
      const port = randomInt(DRAW_LOW, high + 1);
      if (handedOut.has(port) || !reservePort(port)) continue;
      if (await canListen(port, host)) {
        handedOut.add(port);
        removeReservationsOnExit();
        return port;
      }
      // something outside gpuhost listens there: leave it the reservation too, it is taken anyway
    }
  }
  return kernelPort(host);
}

/**
 * A connect to a port nothing listens on that came back connected to itself. Linux picks a
 * connection's source port from the ephemeral range; when the port connected to lies in that range
 * and nothing listens there, the kernel can pick that very port, and the SYN meets itself (a TCP
 * simultaneous open): connect() succeeds with no server at all. Nothing listens, so it is reported
 * like a refusal (`code`), with its own reason.
 */
export class SelfConnectionError extends Error {
  readonly code = "ESELFCONNECT";
}

/**
 * Whether SOCKET, just connected, is connected to itself (local address and port = remote ones); if
 * so it is reset at once and the error says why, else null. Reset, not closed: a plain close leaves
 * the connection in TIME_WAIT on the port for 60 s, and a server binding it without SO_REUSEADDR then
 * fails with EADDRINUSE.
 */
export function refuseSelfConnection(socket: net.Socket): SelfConnectionError | null {
  const { localAddress, localPort, remoteAddress, remotePort } = socket;
  if (localPort === undefined || localPort !== remotePort || localAddress !== remoteAddress) return null;
  socket.resetAndDestroy();
  const [low, high] = ephemeralRange();
  const where = remoteAddress?.includes(":") ? `[${remoteAddress}]:${remotePort}` : `${remoteAddress}:${remotePort}`;
  return new SelfConnectionError(
    `TCP connect to ${where} connected to itself: nothing listens there, and the kernel chose the port as the connection's own source port (it lies in the ephemeral range ${low}-${high}); the socket was reset so the port stays free`,
  );
}

/**
 * THE way gpuhost opens a TCP connection to see whether a port is served (the gate's connect phase,
 * its HTTP connections, "is the port open" checks): resolves with the connected socket (the caller
 * uses or destroys it); rejects with the socket's error (ECONNREFUSED ...), a SelfConnectionError,
 * a timeout after TIMEOUTMS, or SIGNAL's reason.
 */
export function openTcp(
  host: string,
  port: number,
  opts: { timeoutMs: number; signal?: AbortSignal; localAddress?: string },
): Promise<net.Socket> {
  const { timeoutMs, signal, localAddress } = opts;
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(reasonOf(signal));
    const socket = net.connect({ host, port, localAddress });
    let settled = false;
    // Stays the socket's error listener after it is handed over: a later error never goes unhandled.
    const settle = (err: Error | null) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      signal?.removeEventListener("abort", onAbort);
      if (err === null) return resolve(socket);
      socket.destroy();
      reject(err);
    };
    const onAbort = () => settle(reasonOf(signal!));
    const timer = setTimeout(
      () => settle(new Error(`TCP connect to ${host}:${port} timed out after ${timeoutMs} ms`)),
      timeoutMs,
    );
    signal?.addEventListener("abort", onAbort, { once: true });
    socket.once("error", settle);
    socket.once("connect", () => settle(refuseSelfConnection(socket)));
  });
}

/** The signal's own reason, the same object: callers recognise their deadline by identity. */
function reasonOf(signal: AbortSignal): Error {
  return signal.reason as Error;
}

/** True when something accepts connections on HOST:PORT (a self-connection is nobody). */
export async function acceptsConnections(port: number, host = "127.0.0.1", timeoutMs = 2_000): Promise<boolean> {
  try {
    (await openTcp(host, port, { timeoutMs })).destroy();
    return true;
  } catch {
    return false;
  }
}
