// Local ports: a free one to listen on, and whether something listens. The one helper for the
// gate's SSH tunnel, the simulator's late-opening port and the tests' servers. Node's own modules
// only (the simulator bundle on a test host carries it).
//
// A port chosen here is often bound later, sometimes minutes later and again after each restart (a
// stack's service port, a test host's sshd). The kernel's own choice (listen on port 0) comes from
// the ephemeral range, which every connect() and every listen(0) on the machine draws from too: the
// Pulumi engine's plugins alone open dozens of such sockets a run, so a port chosen there can be
// taken before its owner binds it, and the service then fails with EADDRINUSE. So ports are drawn
// below that range instead, where the kernel never hands out ports by itself, and reserved by a
// file naming this process, so two processes (two test files, two updates) never draw the same one.
import { randomInt } from "node:crypto";
import { closeSync, mkdirSync, openSync, readFileSync, unlinkSync, writeSync } from "node:fs";
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

/** Where reservations live: one folder per user, one file per port, holding the reserving PID. */
export function reservationDir(): string {
  return path.join(os.tmpdir(), `gpuhost-ports-${process.getuid?.() ?? "user"}`);
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
      try {
        if (readFileSync(path.join(dir, String(port)), "utf8").trim() === String(process.pid)) {
          unlinkSync(path.join(dir, String(port)));
        }
      } catch {
        // gone already
      }
    }
  });
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === "EPERM";
  }
}

/**
 * Reserves PORT for this process: true when its file is created, or was left by a process that is
 * gone; false when a live process (this one included) holds it.
 */
export function reservePort(port: number, dir = reservationDir()): boolean {
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  const file = path.join(dir, String(port));
  for (let attempt = 0; attempt < 2; attempt++) {
    try {
      const fd = openSync(file, "wx", 0o600);
      writeSync(fd, String(process.pid));
      closeSync(fd);
      return true;
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== "EEXIST") return false;
    }
    let holder = NaN;
    try {
      holder = Number(readFileSync(file, "utf8").trim());
    } catch {
      // removed meanwhile: try again
    }
    if (Number.isInteger(holder) && holder > 0 && alive(holder)) return false;
    try {
      unlinkSync(file);
    } catch {
      // another process reclaimed it first: its create wins, ours fails with EEXIST
    }
  }
  return false;
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

/** True when something accepts connections on 127.0.0.1:port. */
export function acceptsConnections(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = net.connect(port, "127.0.0.1", () => {
      s.destroy();
      resolve(true);
    });
    s.on("error", () => resolve(false));
  });
}
