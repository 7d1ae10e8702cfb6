// Run a host script from a dynamic provider, which cannot use @pulumi/command: over the OpenSSH
// client, or with local bash (the simulated platform: GPUHOST_ROOT and the shims). The command
// line is rendered exactly as hostScript renders it (invocation.ts), so probes and provisioning
// behave alike. No Pulumi import: providers require() this from dist/components/host/exec.js.
import { spawn } from "node:child_process";
import * as fs from "node:fs";
import * as path from "node:path";
import { type HostConnection, parseConnection } from "./connection";
import { needsSudo, renderInvocation } from "./invocation";
import { shellJoin } from "./quote";
import { secretTempDir } from "./secret-dirs";
import { simulatedEnvironment } from "../../sim-host/platform";

export interface ExecResult {
  code: number;
  stdout: string;
  stderr: string;
}

export interface ExecOptions {
  /** $0 inside the script (default "gpuhost-script"). */
  scriptName?: string;
  /** Extra environment for the script. */
  environment?: Record<string, string>;
  /** Kill the command after this long (default 600 s); the result then has code 124. */
  timeoutMs?: number;
}

type SshConnection = Extract<HostConnection, { kind: "ssh" }>;

/**
 * The ssh options and `user@host` for a connection, without a remote command: what both a command
 * (sshArgs) and a forward-only session (tunnel.ts) start with. Key and known_hosts files live in `tmp`.
 */
export function sshBaseArgs(conn: SshConnection, tmp: string): string[] {
  const keyFile = writeSecretFile(tmp, "id_target", conn.privateKey);
  const hostChecking: string[] = [];
  if (conn.hostKey) {
    const known = path.join(tmp, "known_hosts");
    const name = conn.port === 22 ? conn.host : `[${conn.host}]:${conn.port}`;
    fs.writeFileSync(known, `${name} ${conn.hostKey}\n`, { mode: 0o600 });
    hostChecking.push("-o", "StrictHostKeyChecking=yes", "-o", `UserKnownHostsFile=${known}`);
  } else {
    hostChecking.push("-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null");
  }
  const common = ["-o", "BatchMode=yes", "-o", "IdentitiesOnly=yes", "-o", "ConnectTimeout=15", "-o", "LogLevel=ERROR"];
  const proxy: string[] = [];
  if (conn.bastion) {
    const b = conn.bastion;
    const bastionKey = writeSecretFile(tmp, "id_bastion", b.privateKey);
    // ProxyCommand is run by a shell: every word quoted.
    const cmd = shellJoin([
      "ssh",
      "-i",
      bastionKey,
      "-p",
      String(b.port),
      ...common,
      "-o",
      "StrictHostKeyChecking=no",
      "-o",
      "UserKnownHostsFile=/dev/null",
      "-W",
      "%h:%p",
      `${b.user}@${b.host}`,
    ]);
    proxy.push("-o", `ProxyCommand=${cmd}`);
  }
  return [
    "-i",
    keyFile,
    "-p",
    String(conn.port),
    ...common,
    "-o",
    "ServerAliveInterval=15",
    ...hostChecking,
    ...proxy,
    `${conn.user}@${conn.host}`,
  ];
}

/** The `ssh` argument vector that runs `remoteCommand` on the host (exported for tests; files live in `tmp`). */
export function sshArgs(conn: SshConnection, tmp: string, remoteCommand: string): string[] {
  return [...sshBaseArgs(conn, tmp), "--", remoteCommand];
}

function writeSecretFile(dir: string, name: string, content: string): string {
  const file = path.join(dir, name);
  fs.writeFileSync(file, content.endsWith("\n") ? content : `${content}\n`, { mode: 0o600 });
  return file;
}

/** Run `scriptText` with `args` on the host. Never throws for a non-zero exit: read `code`. */
export async function execOnHost(
  connection: HostConnection,
  scriptText: string,
  args: readonly string[],
  opts: ExecOptions = {},
): Promise<ExecResult> {
  const conn = parseConnection(connection);
  const scriptName = opts.scriptName ?? "gpuhost-script";
  const timeoutMs = opts.timeoutMs ?? 600_000;
  if (conn.kind === "ssh") {
    const secrets = secretTempDir("gpuhost-ssh-");
    const tmp = secrets.dir;
    try {
      const command = renderInvocation({
        scriptText,
        scriptName,
        args,
        environment: opts.environment,
        sudo: needsSudo(conn.user),
      });
      return await run("ssh", sshArgs(conn, tmp, command), timeoutMs);
    } finally {
      secrets.remove();
    }
  }
  const sim = conn.kind === "simulated" ? simulatedEnvironment(conn.root) : undefined;
  const command = renderInvocation({
    scriptText,
    scriptName,
    args,
    environment: { ...(sim?.environment ?? {}), ...(opts.environment ?? {}) },
    pathPrefix: sim?.pathPrefix,
    sudo: conn.kind === "local" && process.getuid?.() !== 0,
  });
  return run("/bin/sh", ["-c", command], timeoutMs);
}

function run(file: string, argv: string[], timeoutMs: number): Promise<ExecResult> {
  return new Promise((resolve) => {
    // Own process group, so a timeout kills the whole command tree, not just its shell.
    const child = spawn(file, argv, { stdio: ["ignore", "pipe", "pipe"], detached: true });
    const out: Buffer[] = [];
    const err: Buffer[] = [];
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      try {
        process.kill(-child.pid!, "SIGKILL");
      } catch {
        child.kill("SIGKILL");
      }
    }, timeoutMs);
    child.stdout.on("data", (b: Buffer) => out.push(b));
    child.stderr.on("data", (b: Buffer) => err.push(b));
    child.on("error", (e) => {
      clearTimeout(timer);
      resolve({ code: 127, stdout: "", stderr: `${file}: ${e.message}` });
    });
    child.on("close", (code, signal) => {
      clearTimeout(timer);
      const stderr = Buffer.concat(err).toString("utf8");
      resolve({
        code: timedOut ? 124 : (code ?? (signal ? 128 + 9 : 1)),
        stdout: Buffer.concat(out).toString("utf8"),
        stderr: timedOut ? `${stderr}\ngpuhost: timed out after ${timeoutMs} ms` : stderr,
      });
    });
  });
}
