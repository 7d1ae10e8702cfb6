/**
 * A real OpenSSH server on 127.0.0.1 for tests: its own host key, one authorized client key, a free
 * port, stopped by the PID it started. Needs root (sshd's privilege separation) and Debian's
 * openssh-server (.ci/prereqs.sh installs it).
 */
import { ChildProcess, execFileSync, spawn } from "node:child_process";
import * as fs from "node:fs";
import { acceptsConnections, freeLocalPort as freePort } from "../../ports";
import * as os from "node:os";
import * as path from "node:path";

export interface TestSshd {
  host: string;
  port: number;
  user: string;
  privateKey: string;
  privateKeyPath: string;
  /** The server's public host key, as `ssh-ed25519 AAAA...`. */
  hostKey: string;
  /** Restarts the server on the same port with a freshly generated host key (an impostor, or a reinstall); updates hostKey. */
  swapHostKey(): Promise<void>;
  stop(): Promise<void>;
}

export const SSHD = "/usr/sbin/sshd";

/**
 * The key exchange the suite's SSH servers offer: X25519 alone. Why: OpenSSH 9.2's client prefers
 * sntrup761x25519 (post-quantum), whose key pair it makes for every connection: 87 ms of the client's
 * CPU a connection against 9 ms for X25519 (10 connections to a local sshd, 2026-12-06), and gpuhost
 * opens one connection per script, about 150 in one test-host file. The client is gpuhost's own,
 * unconfigured: it takes what the server offers, as with any server without post-quantum exchange.
 * A server started with `defaultKex` offers OpenSSH's defaults (test/host/kex.test.ts).
 */
export const TEST_SSHD_KEX = "KexAlgorithms curve25519-sha256,curve25519-sha256@libssh.org";
export const canRunSshd = (): boolean => process.getuid?.() === 0 && fs.existsSync(SSHD);

/**
 * EXTRA: further sshd_config lines (e.g. `AcceptEnv GREETING`); the default accepts no environment.
 * DEFAULT_KEX: OpenSSH's own key exchanges instead of TEST_SSHD_KEX.
 */
export async function startSshd(extra: string[] = [], defaultKex = false): Promise<TestSshd> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "gpuhost-sshd-"));
  const keygen = (file: string) => execFileSync("ssh-keygen", ["-q", "-t", "ed25519", "-N", "", "-f", file]);
  keygen(path.join(dir, "host_key"));
  keygen(path.join(dir, "client_key"));
  fs.copyFileSync(path.join(dir, "client_key.pub"), path.join(dir, "authorized_keys"));
  fs.mkdirSync("/run/sshd", { recursive: true, mode: 0o755 });
  const port = await freePort();
  fs.writeFileSync(
    path.join(dir, "sshd_config"),
    [
      `Port ${port}`,
      "ListenAddress 127.0.0.1",
      `HostKey ${dir}/host_key`,
      `AuthorizedKeysFile ${dir}/authorized_keys`,
      `PidFile ${dir}/sshd.pid`,
      "StrictModes no",
      "UsePAM no",
      "PasswordAuthentication no",
      "PermitRootLogin prohibit-password",
      "LogLevel ERROR",
      ...(defaultKex ? [] : [TEST_SSHD_KEX]),
      ...extra,
      "",
    ].join("\n"),
  );
  const launch = async (): Promise<ChildProcess> => {
    const proc: ChildProcess = spawn(SSHD, ["-D", "-e", "-f", path.join(dir, "sshd_config")], {
      stdio: ["ignore", "ignore", "pipe"],
    });
    let stderr = "";
    proc.stderr?.on("data", (b: Buffer) => {
      stderr += b.toString();
    });
    const deadline = Date.now() + 10_000;
    for (;;) {
      if (await acceptsConnections(port)) return proc;
      if (proc.exitCode !== null || Date.now() > deadline) throw new Error(`sshd did not start: ${stderr}`);
      await new Promise((r) => setTimeout(r, 50));
    }
  };
  const stopProc = async (p: ChildProcess) => {
    if (p.exitCode === null && p.signalCode === null) {
      p.kill("SIGTERM");
      await new Promise((r) => p.once("exit", r));
    }
  };
  const readHostKey = () =>
    fs.readFileSync(path.join(dir, "host_key.pub"), "utf8").trim().split(/\s+/).slice(0, 2).join(" ");
  let proc = await launch();
  const server: TestSshd = {
    host: "127.0.0.1",
    port,
    user: "root",
    hostKey: readHostKey(),
    privateKey: fs.readFileSync(path.join(dir, "client_key"), "utf8"),
    privateKeyPath: path.join(dir, "client_key"),
    async swapHostKey() {
      await stopProc(proc);
      fs.rmSync(path.join(dir, "host_key"));
      fs.rmSync(path.join(dir, "host_key.pub"));
      keygen(path.join(dir, "host_key"));
      server.hostKey = readHostKey();
      proc = await launch();
    },
    async stop() {
      await stopProc(proc);
      fs.rmSync(dir, { recursive: true, force: true });
    },
  };
  return server;
}
