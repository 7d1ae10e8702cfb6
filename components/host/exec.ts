// Run a host script from a dynamic provider, which cannot use @pulumi/command: over the OpenSSH
// client, or with local bash (with the connection's GPUHOST_ROOT and tools folder, where it names them). The command
// line is rendered exactly as hostScript renders it (invocation.ts), so probes and provisioning
// behave alike. No Pulumi import: providers require() this from dist/components/host/exec.js.
import { spawn } from "node:child_process";
import * as fs from "node:fs";
import * as path from "node:path";
import { type HostConnection, parseConnection } from "./connection";
import { localEnvironment, needsSudo, renderInvocation } from "./invocation";
import { killProcessGroup } from "./process-group";
import { shellJoin } from "./quote";
import { sessionSilence } from "./remote-session";
import { secretTempDir } from "./secret-dirs";
import { fingerprint, keyWords } from "../host-key/probe";
import { onGuardLeave } from "../../gate/transport/process-guard";

export interface ExecResult {
  code: number;
  stdout: string;
  stderr: string;
  /**
   * Set when the session failed on a host key: which hop presented which key (also the last line of
   * stderr). Callers that can do nothing on a host they cannot trust tell this apart from a failure on it.
   */
  hostKeyRefusal?: string;
}

/** A session refused on a host key (a tunnel's): `hostKeyRefusal` says which hop presented which key. */
export class HostKeyRefusedError extends Error {
  constructor(
    message: string,
    readonly hostKeyRefusal: string,
  ) {
    super(message);
    this.name = "HostKeyRefusedError";
  }
}

/** The refusal an error carries when a session failed on a host key (HostKeyRefusedError, or one that copied it). */
export function hostKeyRefusalOf(e: unknown): string | undefined {
  const r = (e as { hostKeyRefusal?: unknown } | null)?.hostKeyRefusal;
  return typeof r === "string" ? r : undefined;
}

export interface ExecOptions {
  /** $0 inside the script (default "gpuhost-script"). */
  scriptName?: string;
  /** Extra environment for the script. */
  environment?: Record<string, string>;
  /** Kill the command after this long (default 600 s); the result then has code 124. */
  timeoutMs?: number;
  /** Standard input for the script (a secret goes here, never into arguments or the environment). */
  stdin?: string;
}

type SshConnection = Extract<HostConnection, { kind: "ssh" }>;

/** Seconds between keepalives, and how many may go unanswered before ssh gives up on the session. */
export const KEEPALIVE_SECONDS = 15;
export const KEEPALIVE_COUNT = 4;

const q = (s: string) => `'${s.replace(/'/g, `'\\''`)}'`;

/**
 * Host key checking for one hop: always strict, against a known_hosts holding only the pinned key
 * (empty when none is: every key is then refused). A KnownHostsCommand records the key the server
 * presented, vouching for nothing, so a refusal can say which key that was (hostKeyRefusal).
 */
function hostKeyOptions(
  tmp: string,
  hop: string,
  host: string,
  port: number,
  hostKey: string | undefined,
  pct: string,
) {
  const known = path.join(tmp, `${hop}.known_hosts`);
  const name = port === 22 ? host : `[${host}]:${port}`;
  fs.writeFileSync(known, hostKey ? `${name} ${hostKey}\n` : "", { mode: 0o600 });
  const recorder = path.join(tmp, `${hop}.record`);
  fs.writeFileSync(
    recorder,
    `#!/bin/sh\n[ -n "$2" ] && printf '%s %s\\n' "$1" "$2" >> ${q(path.join(tmp, `${hop}.presented`))}\nexit 0\n`,
    { mode: 0o700 },
  );
  return [
    "-o",
    "StrictHostKeyChecking=yes",
    "-o",
    `UserKnownHostsFile=${known}`,
    "-o",
    "GlobalKnownHostsFile=/dev/null",
    "-o",
    "CheckHostIP=no",
    "-o",
    `KnownHostsCommand=${recorder} ${pct}t ${pct}K`,
  ];
}

/** What to run on the host to see its key, for a person to compare with what it presented. */
const CHECK_ON_HOST = "check it on the host: ssh-keygen -lf /etc/ssh/ssh_host_ed25519_key.pub";

/**
 * When a session failed on the host key: which hop presented which key, and what to do, in two
 * sentences without a final period (callers go on with their own: "not probed: <this>. The recorded
 * ..."). Undefined when the key was not the reason.
 */
export function hostKeyRefusal(conn: SshConnection, tmp: string, stderr: string): string | undefined {
  if (!/Host key verification failed|No .* host key is known|REMOTE HOST IDENTIFICATION HAS CHANGED/i.test(stderr))
    return undefined;
  const hops: Array<[string, { host: string; port: number; hostKey?: string }, string]> = [["target", conn, "hostKey"]];
  if (conn.bastion) hops.unshift(["bastion", conn.bastion, "bastion.hostKey"]);
  for (const [hop, h, field] of hops) {
    const f = path.join(tmp, `${hop}.presented`);
    const seen = fs.existsSync(f) ? fs.readFileSync(f, "utf8").trim().split("\n").at(-1) : undefined;
    if (!seen) continue;
    if (h.hostKey && keyWords(h.hostKey) === keyWords(seen)) continue;
    const shown = `${seen.split(" ")[0]} ${fingerprint(seen)}`;
    return h.hostKey
      ? `${h.host}:${h.port} presented ${shown}, but ${field} pins ${h.hostKey.split(" ")[0]} ${fingerprint(h.hostKey)}: refused, nothing was run. Someone is in between, or the host's key changed: ${CHECK_ON_HOST}, and only if it matches, pin the new key "${keyWords(seen)}"`
      : `${h.host}:${h.port}: refused, ${field} is unset; it presented ${shown} ("${keyWords(seen)}"). Nothing was run: if that is the host's key (${CHECK_ON_HOST}), pin it`;
  }
  return undefined;
}

/**
 * The ssh options and `user@host` for a connection, without a remote command: what both a command
 * (sshArgs) and a forward-only session (tunnel.ts) start with. Key and known_hosts files live in `tmp`.
 * Every session sends keepalives, so a half-open one ends in bounded time instead of hanging.
 */
export function sshBaseArgs(conn: SshConnection, tmp: string): string[] {
  const keyFile = writeSecretFile(tmp, "id_target", conn.privateKey);
  const common = [
    "-o",
    "BatchMode=yes",
    "-o",
    "IdentitiesOnly=yes",
    "-o",
    "ConnectTimeout=15",
    "-o",
    // INFO, not ERROR: a dead session ("Timeout, server ... not responding") is reported at INFO.
    "LogLevel=INFO",
    "-o",
    `ServerAliveInterval=${KEEPALIVE_SECONDS}`,
    "-o",
    `ServerAliveCountMax=${KEEPALIVE_COUNT}`,
  ];
  const proxy: string[] = [];
  if (conn.bastion) {
    const b = conn.bastion;
    const bastionKey = writeSecretFile(tmp, "id_bastion", b.privateKey);
    // ProxyCommand is run by a shell: every word quoted; its % tokens are expanded once more (%%).
    const cmd = shellJoin([
      "ssh",
      "-i",
      bastionKey,
      "-p",
      String(b.port),
      ...common,
      ...hostKeyOptions(tmp, "bastion", b.host, b.port, b.hostKey, "%%"),
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
    ...hostKeyOptions(tmp, "target", conn.host, conn.port, conn.hostKey, "%"),
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
        // Bound to its session: a client killed mid-command stops the command on the host too.
        overSsh: true,
      });
      // The silence our keepalives bound goes first, for the session's watch (remote-session.ts).
      const line = sessionSilence(KEEPALIVE_SECONDS, KEEPALIVE_COUNT) + command;
      const r = await run("ssh", sshArgs(conn, tmp, line), timeoutMs, opts.stdin);
      const refused = r.code === 255 ? hostKeyRefusal(conn, tmp, r.stderr) : undefined;
      // OpenSSH's own account (a banner of @ signs, "remove with: ssh-keygen -R" for a known_hosts
      // file that is gpuhost's temporary one) tells a person nothing they can act on: the refusal alone.
      if (refused) return { ...r, stderr: refused, hostKeyRefusal: refused };
      if (r.code === 255 && /Timeout, server .* not responding/.test(r.stderr))
        return {
          ...r,
          stderr: `${r.stderr}\ngpuhost: the SSH session stopped answering (${KEEPALIVE_COUNT} keepalives ${KEEPALIVE_SECONDS} s apart went unanswered); the command's outcome on the host is unknown`,
        };
      return r;
    } finally {
      secrets.remove();
    }
  }
  const command = renderInvocation({
    scriptText,
    scriptName,
    args,
    environment: opts.environment ?? {},
    ...localEnvironment(conn),
  });
  return run("/bin/sh", ["-c", command], timeoutMs, opts.stdin);
}

function run(file: string, argv: string[], timeoutMs: number, stdin?: string): Promise<ExecResult> {
  return new Promise((resolve) => {
    // Own process group, so a timeout kills the whole command tree, not just its shell.
    const child = spawn(file, argv, {
      stdio: [stdin === undefined ? "ignore" : "pipe", "pipe", "pipe"],
      detached: true,
    });
    if (stdin !== undefined && child.stdin) {
      child.stdin.on("error", () => undefined);
      child.stdin.end(stdin);
    }
    // In a provider host, the command goes when the provider leaves (engine gone, SIGINT, SIGTERM):
    // its own process group would otherwise outlive it, waiting on the host for good.
    const off = onGuardLeave(() => killProcessGroup(child));
    const out: Buffer[] = [];
    const err: Buffer[] = [];
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      killProcessGroup(child);
    }, timeoutMs);
    child.stdout?.on("data", (b: Buffer) => out.push(b));
    child.stderr?.on("data", (b: Buffer) => err.push(b));
    child.on("error", (e) => {
      clearTimeout(timer);
      off();
      resolve({ code: 127, stdout: "", stderr: `${file}: ${e.message}` });
    });
    child.on("close", (code, signal) => {
      clearTimeout(timer);
      off();
      const stderr = Buffer.concat(err).toString("utf8");
      resolve({
        code: timedOut ? 124 : (code ?? (signal ? 128 + 9 : 1)),
        stdout: Buffer.concat(out).toString("utf8"),
        stderr: timedOut ? `${stderr}\ngpuhost: timed out after ${timeoutMs} ms` : stderr,
      });
    });
  });
}
