/**
 * Every `gpuhost` subcommand answers --help (exit 0, its usage on stdout), run as the real command
 * (the entry loads each command's module by require, which needs a real process); a busy port for
 * `gpuhost sim` is one line.
 */
import { execFile, spawn } from "node:child_process";
import * as net from "node:net";
import * as path from "node:path";
import { afterEach, describe, expect, it, vi } from "vitest";
import { COMMANDS } from "../../cli/gpuhost";
import { simMain } from "../../cli/sim";

const repo = path.resolve(__dirname, "../..");

function gpuhost(args: string[]): Promise<{ code: number; out: string; err: string }> {
  return new Promise((resolve) =>
    execFile(
      process.execPath,
      ["--import", "tsx", path.join(repo, "cli/gpuhost.ts"), ...args],
      { cwd: repo, timeout: 150_000 },
      (err, out, errText) =>
        resolve({ code: err ? Number((err as { code?: number }).code ?? 1) : 0, out, err: errText }),
    ),
  );
}

afterEach(() => vi.restoreAllMocks());

function capture() {
  let out = "";
  let err = "";
  vi.spyOn(process.stdout, "write").mockImplementation((s: string | Uint8Array) => ((out += String(s)), true));
  vi.spyOn(process.stderr, "write").mockImplementation((s: string | Uint8Array) => ((err += String(s)), true));
  return { out: () => out, err: () => err };
}

describe("gpuhost <command> --help", () => {
  it("every command: exit 0, its usage on stdout, nothing on stderr; verify and bench say what exit statuses mean", async () => {
    // Every command the entry dispatches to, so a new command without --help fails here.
    const commands = Object.keys(COMMANDS);
    expect(commands).toEqual(expect.arrayContaining(["sim", "verify", "bench", "plan"]));
    const runs = await Promise.all([...commands.map((c) => gpuhost([c, "--help"])), gpuhost(["bench", "-h"])]);
    commands.forEach((command, i) => {
      expect(runs[i].code, command).toBe(0);
      expect(runs[i].out, command).toMatch(new RegExp(`usage: gpuhost ${command}\\b`));
      expect(runs[i].err, command).toBe("");
    });
    expect(runs[commands.length].out).toMatch(/^usage: gpuhost bench/);
    expect(runs[commands.indexOf("bench")].out).toContain("3 a sweep level broke the error budget");
    expect(runs[commands.indexOf("verify")].out).toContain("130 interrupted");
  }, 180_000);
});

describe("gpuhost sim on a busy port", () => {
  it("says so in one line, exit 2, no stack trace", async () => {
    const busy = net.createServer();
    await new Promise<void>((r) => busy.listen(0, "127.0.0.1", r));
    const port = (busy.address() as net.AddressInfo).port;
    try {
      const o = capture();
      const code = await simMain(["--port", String(port)]);
      vi.restoreAllMocks();
      expect(code).toBe(2);
      expect(o.err()).toBe(
        `gpuhost sim: port ${port} on 127.0.0.1 is in use (another process listens there); choose another with --port\n`,
      );
    } finally {
      await new Promise((r) => busy.close(r));
    }
  });
});

describe("one Ctrl-C stops gpuhost verify and bench", () => {
  it("SIGINT during a run: exit 130 within seconds (not its 600 s deadline), saying it was interrupted", async () => {
    const { neverAnswering } = await import("./misbehaving-servers");
    const silent = await neverAnswering();
    try {
      const run = (args: string[]) =>
        new Promise<{ code: number | null; err: string; afterSignal: number }>((resolve) => {
          const child = spawn(process.execPath, ["--import", "tsx", path.join(repo, "cli/gpuhost.ts"), ...args], {
            cwd: repo,
            stdio: ["ignore", "pipe", "pipe"],
          });
          let err = "";
          let sentAt = 0;
          child.stderr.on("data", (d) => {
            err += d;
            // Interrupt once the command is under way (its first progress line).
            if (sentAt === 0 && /\[(verify|bench)\]/.test(err)) {
              sentAt = performance.now();
              setTimeout(() => child.kill("SIGINT"), 300);
            }
          });
          child.on("exit", (code) => resolve({ code, err, afterSignal: (performance.now() - sentAt - 300) / 1000 }));
        });
      const [v, b] = await Promise.all([
        run(["verify", "--endpoint", silent.url, "--deadline", "600"]),
        run(["bench", "--endpoint", silent.url, "--model", "m", "--deadline", "600"]),
      ]);
      for (const r of [v, b]) {
        expect(r.code, r.err).toBe(130);
        // Usually well under a second; the bound leaves room for a loaded machine and the 5 s grace.
        expect(r.afterSignal).toBeLessThan(10);
        expect(r.err).toMatch(/SIGINT: stopping/);
      }
    } finally {
      await silent.close();
    }
  }, 60_000);
});
