/**
 * ports.ts: a chosen port must still be free when its owner binds it, minutes later (a stack's
 * service port, a test host's sshd). Drawn below the kernel's ephemeral range, which every connect()
 * and listen(0) on the machine uses, and reserved against other processes.
 */
import { spawn, spawnSync } from "node:child_process";
import { promises as fs } from "node:fs";
import * as net from "node:net";
import * as os from "node:os";
import * as path from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { canListen, DRAW_LOW, ephemeralRange, freeLocalPort, reservationDir, reservePort } from "../../ports";

const dirs: string[] = [];
afterEach(async () => {
  for (const d of dirs.splice(0)) await fs.rm(d, { recursive: true, force: true });
});
const tmpDir = async () => {
  const d = await fs.mkdtemp(path.join(os.tmpdir(), "gpuhost-ports-test-"));
  dirs.push(d);
  return d;
};

describe("freeLocalPort", () => {
  it("draws below the ephemeral range, never twice in one process, each reserved by this process and free", async () => {
    const [low] = ephemeralRange();
    const ports = await Promise.all(Array.from({ length: 200 }, () => freeLocalPort()));
    expect(new Set(ports).size).toBe(200);
    for (const p of ports) {
      expect(p).toBeGreaterThanOrEqual(DRAW_LOW);
      expect(p).toBeLessThan(low);
    }
    const held = await fs.readFile(path.join(reservationDir(), String(ports[0])), "utf8");
    expect(held).toBe(String(process.pid));
    expect(await canListen(ports[0])).toBe(true);
  });

  it("another live process's reservations are never drawn; a dead one's are reclaimed; exit removes a process's own", async () => {
    // A second process draws 300 ports and stays alive while this one draws: no overlap.
    const script = `const { freeLocalPort } = require(${JSON.stringify(path.resolve(__dirname, "..", "..", "dist", "ports.js"))});
      Promise.all(Array.from({ length: 300 }, () => freeLocalPort())).then((p) => { console.log(JSON.stringify(p)); setTimeout(() => undefined, 60000); });`;
    const other = spawn(process.execPath, ["-e", script], { stdio: ["ignore", "pipe", "inherit"] });
    const theirs: number[] = await new Promise((resolve) =>
      other.stdout.once("data", (b: Buffer) => resolve(JSON.parse(b.toString()) as number[])),
    );
    try {
      const mine = await Promise.all(Array.from({ length: 300 }, () => freeLocalPort()));
      expect(mine.filter((p) => theirs.includes(p))).toEqual([]);
      for (const p of theirs) expect(reservePort(p)).toBe(false);
    } finally {
      other.kill("SIGTERM");
      await new Promise((r) => other.once("exit", r));
    }
    // Killed by a signal it did not handle: no exit handler ran, so its files name a dead process.
    expect(reservePort(theirs[0])).toBe(true);
    // A process that exits normally removes its reservations.
    const exits = spawnSync(
      process.execPath,
      [
        "-e",
        `require(${JSON.stringify(path.resolve(__dirname, "..", "..", "dist", "ports.js"))}).freeLocalPort().then((p) => console.log(p))`,
      ],
      { encoding: "utf8" },
    );
    await expect(fs.access(path.join(reservationDir(), exits.stdout.trim()))).rejects.toThrow();
  });

  it("reservePort: a file per port naming its holder; a live holder keeps it, a dead one loses it", async () => {
    const dir = await tmpDir();
    expect(reservePort(20_001, dir)).toBe(true);
    expect(await fs.readFile(path.join(dir, "20001"), "utf8")).toBe(String(process.pid));
    // held by this (live) process: not again
    expect(reservePort(20_001, dir)).toBe(false);
    // a holder that is gone (a PID far above pid_max) or an unreadable file: reclaimed
    await fs.writeFile(path.join(dir, "20002"), "4194999");
    expect(reservePort(20_002, dir)).toBe(true);
    await fs.writeFile(path.join(dir, "20003"), "not a pid");
    expect(reservePort(20_003, dir)).toBe(true);
  });

  it("canListen is false where something listens", async () => {
    const srv = net.createServer();
    await new Promise<void>((r) => srv.listen(0, "127.0.0.1", r));
    const { port } = srv.address() as net.AddressInfo;
    try {
      expect(await canListen(port)).toBe(false);
    } finally {
      await new Promise((r) => srv.close(r));
    }
    expect(await canListen(port)).toBe(true);
  });
});
