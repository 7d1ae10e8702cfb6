/**
 * ports.ts: a chosen port must still be free when its owner binds it, minutes later (a stack's
 * service port, a test host's sshd). Drawn below the kernel's ephemeral range, which every connect()
 * and listen(0) on the machine uses, and reserved against other processes.
 */
import { execFile, spawn } from "node:child_process";
import { promises as fs } from "node:fs";
import * as net from "node:net";
import * as os from "node:os";
import * as path from "node:path";
import { promisify } from "node:util";
import { afterEach, describe, expect, it } from "vitest";
import { canListen, DRAW_LOW, ephemeralRange, freeLocalPort, reservationDir, reservePort } from "../../ports";

const execFileP = promisify(execFile);
const DIST_PORTS = path.resolve(__dirname, "..", "..", "dist", "ports.js");

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
    const script = `const { freeLocalPort } = require(${JSON.stringify(DIST_PORTS)});
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
    const exits = await execFileP(
      process.execPath,
      ["-e", `require(${JSON.stringify(DIST_PORTS)}).freeLocalPort().then((p) => console.log(p))`],
      { timeout: 30_000 },
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

  it("the reservation folder is refused (one sentence, nothing written) when it is a symlink, not a folder, or writable by others", async () => {
    const base = await tmpDir();
    const elsewhere = path.join(base, "elsewhere");
    await fs.mkdir(elsewhere, { mode: 0o700 });
    const planted = path.join(base, "planted");
    await fs.symlink(elsewhere, planted);
    expect(() => reservePort(20_001, planted)).toThrow(
      `the port reservation folder ${planted} is a symbolic link; remove it (gpuhost creates the folder itself, owner-only)`,
    );
    const loose = path.join(base, "loose");
    await fs.mkdir(loose);
    await fs.chmod(loose, 0o777);
    expect(() => reservePort(20_001, loose)).toThrow(/loose is writable by other users; remove it/);
    const file = path.join(base, "file");
    await fs.writeFile(file, "");
    expect(() => reservePort(20_001, file)).toThrow(/file is not a folder; remove it/);
    expect(await fs.readdir(elsewhere)).toEqual([]);
    expect(await fs.readdir(loose)).toEqual([]);

    // The default folder, as a process of its own: a link planted at $TMPDIR/gpuhost-ports-<uid>.
    const tmp = path.join(base, "tmp");
    await fs.mkdir(tmp, { mode: 0o700 });
    await fs.symlink(elsewhere, path.join(tmp, `gpuhost-ports-${process.getuid!()}`));
    const child = spawn(
      process.execPath,
      [
        "-e",
        `require(${JSON.stringify(DIST_PORTS)}).freeLocalPort().then(
          (p) => console.log(p),
          (e) => { console.error(e.message); process.exitCode = 3; })`,
      ],
      // The default folder: not the shared one a contained test run names (engine/contain.sh).
      {
        env: { ...process.env, TMPDIR: tmp, GPUHOST_PORT_RESERVATIONS: "" },
        stdio: ["ignore", "pipe", "pipe"],
        timeout: 30_000,
      },
    );
    let out = "";
    child.stdout.on("data", (b: Buffer) => (out += b.toString()));
    child.stderr.on("data", (b: Buffer) => (out += b.toString()));
    const code = await new Promise((r) => child.once("close", r));
    expect(out.trim()).toBe(
      `the port reservation folder ${path.join(tmp, `gpuhost-ports-${process.getuid!()}`)} is a symbolic link; remove it (gpuhost creates the folder itself, owner-only)`,
    );
    expect(code).toBe(3);
    expect(await fs.readdir(elsewhere)).toEqual([]);
  });

  it("eight processes reclaiming one dead holder's reservation at once: exactly one wins, trial after trial", async () => {
    const dir = await tmpDir();
    const children = 8;
    // Each child waits for a line "PORT AT", spins until the clock reads AT (so all eight start within
    // a fraction of a millisecond), reclaims PORT and prints "PORT true|false".
    const script = `const { reservePort } = require(${JSON.stringify(DIST_PORTS)});
      require("node:readline").createInterface({ input: process.stdin }).on("line", (line) => {
        const [port, at] = line.split(" ").map(Number);
        while (performance.timeOrigin + performance.now() < at);
        console.log(port + " " + reservePort(port, ${JSON.stringify(dir)}));
      });
      console.log("ready");`;
    const procs = Array.from({ length: children }, () =>
      spawn(process.execPath, ["-e", script], { stdio: ["pipe", "pipe", "inherit"], timeout: 60_000 }),
    );
    const answers = new Map<number, boolean[]>();
    let ready = 0;
    const wake: (() => void)[] = [];
    for (const p of procs) {
      let buf = "";
      p.stdout.on("data", (b: Buffer) => {
        buf += b.toString();
        let nl;
        while ((nl = buf.indexOf("\n")) >= 0) {
          const line = buf.slice(0, nl);
          buf = buf.slice(nl + 1);
          if (line === "ready") ready++;
          else {
            const [port, won] = line.split(" ");
            answers.set(Number(port), [...(answers.get(Number(port)) ?? []), won === "true"]);
          }
          wake.splice(0).forEach((w) => w());
        }
      });
    }
    const until = async (done: () => boolean, what: string) => {
      const deadline = Date.now() + 10_000;
      while (!done()) {
        if (Date.now() > deadline) throw new Error(`no answer in 10 s: ${what}`);
        await new Promise<void>((r) => {
          wake.push(r);
          setTimeout(r, 100);
        });
      }
    };
    const winners: number[] = [];
    try {
      await until(() => ready === children, "the children starting");
      const stop = Date.now() + 12_000;
      for (let trial = 0; trial < 300 && Date.now() < stop; trial++) {
        const port = 30_000 + trial;
        // a reservation whose holder is gone (a PID above the kernel's pid_max)
        await fs.writeFile(path.join(dir, String(port)), "4194999");
        const at = Date.now() + 25;
        for (const p of procs) p.stdin.write(`${port} ${at}\n`);
        await until(() => answers.get(port)?.length === children, `trial ${trial}`);
        winners.push(answers.get(port)!.filter(Boolean).length);
      }
    } finally {
      for (const p of procs) p.stdin.end();
      await Promise.all(
        procs.map((p) => (p.exitCode === null ? new Promise((r) => p.once("exit", r)) : Promise.resolve())),
      );
    }
    expect(winners.length).toBeGreaterThanOrEqual(50);
    expect(
      winners.filter((n) => n !== 1),
      `${winners.length} trials`,
    ).toEqual([]);
    // every reservation names a live child; nothing else is left in the folder (no claim, no temp file)
    const left = await fs.readdir(dir);
    expect(left.sort()).toEqual(winners.map((_, i) => String(30_000 + i)).sort());
  }, 60_000);

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
