/**
 * The `command` resource provider (command:local:Command, command:remote:Command) for the
 * @pulumi/command 1.2.1 SDK, in TypeScript.
 *
 * Why this exists: the upstream Go provider (module github.com/pulumi/pulumi-command/provider, v1.2.1)
 * is not served by the Go module proxy these machines reach (engine/README.md has the commands and the
 * refusals), and no registry ships its binary. Components keep using the @pulumi/command SDK
 * unchanged; this provider answers the engine for the two resource types gpuhost uses, with the
 * upstream semantics that matter to it:
 *   - create runs `create`; a change of `triggers` replaces (the SDK sets replaceOnChanges);
 *   - a change of create/update/delete/environment/stdin runs `update` when set, else `create` again;
 *   - delete runs `delete`; PULUMI_COMMAND_STDOUT / PULUMI_COMMAND_STDERR carry the previous output
 *     when addPreviousOutputInEnv (default true);
 *   - no read: refresh never detects drift on a Command (as upstream: pulumi-command#432); gpuhost's
 *     ToolkitState resource exists for that;
 *   - remote: one SSH session per command, no PTY, dialing retried up to dialErrorLimit times with
 *     perDialTimeout each;
 *   - `environment` (and PULUMI_COMMAND_STDOUT/STDERR) over SSH travel as SSH environment requests,
 *     as upstream's setenv: a server whose AcceptEnv refuses a variable runs the command without it,
 *     and the resource gets upstream's warning for each one;
 *   - state as upstream stores it: the connection's privateKey/password/privateKeyPassword are secrets
 *     of their own inside the (secret) connection, so a stack moves between this provider and
 *     upstream's without a diff.
 * Where it departs from upstream, on purpose (gpuhost issue #12): the host key is always checked, and a
 * connection without `hostKey` is refused with the key the host presented in the error (upstream does
 * not check it at all); every session sends keepalives and a command has a step timeout (upstream has
 * neither, so a half-open session waits forever).
 * Not implemented (gpuhost does not use them): CopyToRemote, local assets/archives, interpreter
 * other than /bin/sh, proxies other than one jump host, agent sockets and passwords.
 */
import { spawn } from "node:child_process";
import * as crypto from "node:crypto";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { fingerprint, keyWords, recorded, recorder } from "../../../components/host-key/probe";
import { killProcessGroup } from "../../../components/host/process-group";
import { sessionSilence } from "../../../components/host/remote-session";
import { engineWarn } from "./log";

export const LOCAL = "command:local:Command";
export const REMOTE = "command:remote:Command";
const SECRET_SIG = "4dabf18193072939515e22adb298388d";
const SECRET_VALUE = "1b47061264138c4ac30d75fd1eb44270";

export interface Connection {
  host: string;
  port?: number;
  user?: string;
  privateKey?: string;
  hostKey?: string;
  dialErrorLimit?: number;
  perDialTimeout?: number;
  proxy?: { host: string; port?: number; user?: string; privateKey?: string; hostKey?: string };
}

export interface CommandInputs {
  create?: string;
  update?: string;
  delete?: string;
  stdin?: string;
  dir?: string;
  environment?: Record<string, string>;
  triggers?: unknown[];
  logging?: string;
  addPreviousOutputInEnv?: boolean;
  connection?: Connection;
}

export interface RunResult {
  code: number;
  stdout: string;
  stderr: string;
}

const CREDENTIALS = ["privateKey", "password", "privateKeyPassword"];
const isSecret = (v: unknown) =>
  !!v && typeof v === "object" && (v as Record<string, unknown>)[SECRET_SIG] === SECRET_VALUE;
const secret = (v: unknown) => (isSecret(v) ? v : { [SECRET_SIG]: SECRET_VALUE, value: v });

/**
 * The connection as upstream's provider stores it: its schema marks the credentials secret, so each is
 * a secret of its own inside the connection (itself secret: the SDK marks it). A connection stored
 * otherwise reads as changed (`~connection`) to the other provider.
 */
export function withSecretCredentials(inputs: Record<string, unknown>): Record<string, unknown> {
  const mark = (c: unknown): unknown => {
    if (isSecret(c)) return secret(mark((c as { value: unknown }).value));
    if (!c || typeof c !== "object" || Array.isArray(c)) return c;
    const out: Record<string, unknown> = { ...(c as Record<string, unknown>) };
    for (const k of CREDENTIALS) if (out[k] !== undefined && out[k] !== null) out[k] = secret(out[k]);
    if (out.proxy !== undefined) out.proxy = mark(out.proxy);
    return out;
  };
  return inputs.connection === undefined ? inputs : { ...inputs, connection: mark(inputs.connection) };
}

/** Strips the engine's secret wrappers: the provider needs plain values to run commands. */
export function reveal<T>(v: T): T {
  if (Array.isArray(v)) return v.map(reveal) as unknown as T;
  if (v && typeof v === "object") {
    const o = v as Record<string, unknown>;
    if (o[SECRET_SIG] === SECRET_VALUE) return reveal(o.value) as T;
    return Object.fromEntries(Object.entries(o).map(([k, x]) => [k, reveal(x)])) as T;
  }
  return v;
}

/** Runs `command` with /bin/sh locally, or over SSH for remote resources. */
export async function runCommand(
  type: string,
  inputs: CommandInputs,
  command: string,
  extraEnv: Record<string, string>,
  warn: (message: string) => void = () => undefined,
): Promise<RunResult> {
  const env = { ...(inputs.environment ?? {}), ...extraEnv };
  if (type === LOCAL) {
    return spawnCollect(
      "/bin/sh",
      ["-c", command],
      { cwd: inputs.dir || process.cwd(), env: { ...process.env, ...env } },
      inputs.stdin,
    );
  }
  if (!inputs.connection) throw new Error("remote command without a connection");
  return runRemote(inputs.connection, command, env, Object.keys(inputs.environment ?? {}), inputs.stdin, warn);
}

/** Marks the line the command's shell prints for a variable the server did not accept. */
const REFUSED = "gpuhost-command-setenv-refused:";
/** The exit status of a command whose own `environment` did not all arrive (it did not run). */
const REFUSED_EXIT = 254;

/** Upstream's message for a variable an SSH server refused (pulumi-command 1.2.1, remote). */
export const setenvMessage = (name: string) =>
  `Unable to set '${name}'. This only works if your SSH server is configured to accept\n` +
  "\tthese variables via AcceptEnv. Alternatively, if a Bash-like shell runs the command on the remote host, you could\n" +
  "\tprefix the command itself with the variables in the form 'VAR=value command'";

/** Thrown, as upstream fails, when the server refused a variable of the resource's `environment`. */
export class SetenvRefused extends Error {}

/** Seconds between SSH keepalives (ServerAliveInterval); GPUHOST_SSH_KEEPALIVE_S overrides it. */
export function keepaliveSeconds(): number {
  return positiveEnv("GPUHOST_SSH_KEEPALIVE_S", 15);
}
/** Unanswered keepalives before a session counts as dead (ServerAliveCountMax). */
export const KEEPALIVE_COUNT = 4;
/**
 * The longest one remote command may run, in seconds; GPUHOST_COMMAND_TIMEOUT_S overrides it. The
 * default covers the slowest step (pip downloading a multi-GB torch build, apt installing the toolkit).
 */
export function stepTimeoutSeconds(): number {
  return positiveEnv("GPUHOST_COMMAND_TIMEOUT_S", 7200);
}

function positiveEnv(name: string, dflt: number): number {
  const raw = process.env[name];
  if (raw === undefined || raw === "") return dflt;
  const n = Number(raw);
  if (!Number.isFinite(n) || n <= 0) throw new Error(`${name} must be a positive number of seconds, got '${raw}'`);
  return n;
}

async function runRemote(
  conn: Connection,
  command: string,
  env: Record<string, string>,
  required: string[],
  stdin: string | undefined,
  warn: (message: string) => void,
): Promise<RunResult> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "gpuhost-cmd-"));
  try {
    // As upstream: each variable is an SSH environment request (SendEnv takes the value verbatim from
    // the ssh client's own environment), which sshd honours only where AcceptEnv lists it. OpenSSH
    // asks for no reply, so the command's shell first reports each variable that did not arrive: one
    // of the resource's own `environment` stops it before it runs (upstream fails the step), the
    // previous-output variables only warn (as upstream does).
    const names = Object.keys(env);
    const args = [...names.flatMap((k) => ["-o", `SendEnv=${k}`]), ...sshArgs(conn, dir)];
    const check = names
      .filter((k) => /^[A-Za-z_][A-Za-z0-9_]*$/.test(k))
      .map((k) =>
        required.includes(k)
          ? `[ "\${${k}+set}" = set ] || { echo ${REFUSED}${k} >&2; exit ${REFUSED_EXIT}; }; `
          : `[ "\${${k}+set}" = set ] || echo ${REFUSED}${k} >&2; `,
      )
      .join("");
    const limit = Math.max(1, conn.dialErrorLimit ?? 10);
    const timeoutS = stepTimeoutSeconds();
    let last: RunResult & { timedOut?: boolean } = { code: 255, stdout: "", stderr: "" };
    for (let attempt = 1; attempt <= limit; attempt++) {
      last = await spawnCollect(
        "ssh",
        // As upstream, the command as it is: gpuhost's own command lines carry the watch of their
        // SSH session (components/host/remote-session.ts), whichever provider runs them. In front,
        // the silence this client's keepalives bound, for that watch: a stalled network then ends
        // the command on the host as soon as this end gives up on the session.
        [...args, sessionSilence(keepaliveSeconds(), KEEPALIVE_COUNT) + check + command],
        { env: { ...process.env, ...env } },
        stdin,
        timeoutS * 1000,
      );
      if (last.timedOut) {
        throw new Error(
          `${target(conn)}: the command ran past the step timeout of ${timeoutS} s (GPUHOST_COMMAND_TIMEOUT_S) and was stopped; its outcome on the host is unknown, and the next \`pulumi up\` runs it again`,
        );
      }
      if (last.code === 255) hostKeyProblem(conn, dir, last.stderr);
      if (last.code === 255 && /Timeout, server .* not responding/.test(last.stderr)) {
        throw new Error(
          `${target(conn)}: the SSH session stopped answering (${KEEPALIVE_COUNT} keepalives ${keepaliveSeconds()} s apart went unanswered); the command's outcome on the host is unknown, and the next \`pulumi up\` runs it again`,
        );
      }
      if (!(last.code === 255 && isDialError(last.stderr))) break;
      if (attempt === limit) return { ...last, stderr: `${last.stderr}\ndial failed ${limit} times` };
      await new Promise((r) => setTimeout(r, Math.min(1000 * attempt, 5000)));
    }
    const lines = last.stderr.split("\n");
    const refused = lines.filter((l) => l.startsWith(REFUSED)).map((l) => l.slice(REFUSED.length));
    const fatal = refused.find((k) => required.includes(k));
    if (fatal !== undefined && last.code === REFUSED_EXIT) {
      throw new SetenvRefused(
        `${setenvMessage(fatal)}\ncould not set environment variable "${fatal}": ssh: setenv failed`,
      );
    }
    for (const k of refused) warn(setenvMessage(k));
    return { ...last, stderr: lines.filter((l) => !l.startsWith(REFUSED)).join("\n") };
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

const target = (c: { host: string; port?: number; user?: string }) => `${c.user ?? "root"}@${c.host}:${c.port ?? 22}`;

/**
 * After a failed session: when the host key was the reason, throws the error that says which host
 * presented which key, so the user can pin it (or see that it changed). The keys come from the
 * KnownHostsCommand recorder (components/host-key/probe.ts), which sees exactly what the server presented.
 */
function hostKeyProblem(conn: Connection, dir: string, stderr: string): void {
  if (!/Host key verification failed|REMOTE HOST IDENTIFICATION HAS CHANGED|No .* host key is known/i.test(stderr))
    return;
  const hops: Array<[string, { host: string; port?: number; user?: string; hostKey?: string }, string]> = [
    ["target", conn, "connection.hostKey"],
  ];
  if (conn.proxy) hops.unshift(["proxy", conn.proxy, "connection.proxy.hostKey"]);
  for (const [name, hop, field] of hops) {
    const presented = recorded(dir, name);
    if (presented === undefined) continue;
    const pinned = hop.hostKey?.trim();
    if (pinned && keyWords(pinned) === keyWords(presented)) continue;
    const shown = `${presented.split(" ")[0]} ${fingerprint(presented)}`;
    if (!pinned) {
      throw new Error(
        `${target(hop)}: refused, ${field} is unset, so this host cannot be told from an impostor. It presented ${shown}; if that is your host's key (check it on the host: ssh-keygen -lf /etc/ssh/ssh_host_ed25519_key.pub), pin it: ${field} = "${presented}"`,
      );
    }
    throw new Error(
      `${target(hop)}: refused, the host presented ${shown} but ${field} pins ${pinned.split(" ")[0]} ${fingerprint(pinned)}. Either someone is in between, or the host's key was changed: pin the new key only after checking it on the host`,
    );
  }
}

function sshArgs(conn: Connection, dir: string): string[] {
  // Inside ProxyCommand, ssh expands % tokens once more: the inner ssh's tokens are written %%.
  const common = (c: { host: string; hostKey?: string }, name: string, pct: string) => {
    const kh = path.join(dir, `${name}.known_hosts`);
    // Unset hostKey: an empty known_hosts, so every key is refused (the error then shows it).
    const key = c.hostKey?.trim();
    fs.writeFileSync(kh, key ? `${c.host} ${key}\n[${c.host}]:* ${key}\n` : "", { mode: 0o600 });
    return [
      "-o",
      "BatchMode=yes",
      "-o",
      `ConnectTimeout=${conn.perDialTimeout ?? 15}`,
      "-o",
      // INFO, not ERROR: ssh reports a dead session ("Timeout, server ... not responding") at INFO.
      "LogLevel=INFO",
      "-o",
      `ServerAliveInterval=${keepaliveSeconds()}`,
      "-o",
      `ServerAliveCountMax=${KEEPALIVE_COUNT}`,
      "-o",
      "StrictHostKeyChecking=yes",
      "-o",
      `UserKnownHostsFile=${kh}`,
      "-o",
      "GlobalKnownHostsFile=/dev/null",
      "-o",
      "CheckHostIP=no",
      "-o",
      `KnownHostsCommand=${recorder(dir, name)} ${pct}t ${pct}K`,
    ];
  };
  const keyFile = (key: string | undefined, name: string) => {
    if (!key) return [];
    const f = path.join(dir, name);
    fs.writeFileSync(f, key.endsWith("\n") ? key : `${key}\n`, { mode: 0o600 });
    return ["-i", f, "-o", "IdentitiesOnly=yes"];
  };
  const args = [
    "-T",
    ...common(conn, "target", "%"),
    ...keyFile(conn.privateKey, "target.key"),
    "-p",
    String(conn.port ?? 22),
  ];
  if (conn.proxy) {
    const p = conn.proxy;
    const jump = [
      "ssh",
      ...common(p, "proxy", "%%"),
      ...keyFile(p.privateKey, "proxy.key"),
      "-p",
      String(p.port ?? 22),
      "-W",
      "%h:%p",
      `${p.user ?? "root"}@${p.host}`,
    ];
    args.push("-o", `ProxyCommand=${jump.map(shQuote).join(" ")}`);
  }
  args.push(`${conn.user ?? "root"}@${conn.host}`);
  return args;
}

function isDialError(stderr: string): boolean {
  return /Connection refused|Connection timed out|No route to host|Connection reset|kex_exchange_identification|Could not resolve hostname|Connection closed by remote host|Network is unreachable/i.test(
    stderr,
  );
}

export function shQuote(s: string): string {
  return `'${s.replace(/'/g, `'\\''`)}'`;
}

/** The commands running now, each the leader of its own process group. */
const running = new Set<number>();

/**
 * Kills every running command with everything it started (its process group): the provider is
 * leaving, and nothing it started may outlive it.
 */
export function killRunningCommands(): void {
  for (const pid of running) {
    try {
      process.kill(-pid, "SIGKILL");
    } catch {
      // already gone
    }
  }
  running.clear();
}

function spawnCollect(
  cmd: string,
  args: string[],
  opts: { cwd?: string; env: NodeJS.ProcessEnv },
  stdin?: string,
  timeoutMs?: number,
): Promise<RunResult & { timedOut?: boolean }> {
  return new Promise((resolve, reject) => {
    // Own process group, so a timeout, or the provider leaving, also stops what the command started
    // (a ProxyCommand's ssh, a local command's children).
    const child = spawn(cmd, args, {
      cwd: opts.cwd,
      env: opts.env,
      stdio: ["pipe", "pipe", "pipe"],
      detached: true,
    });
    if (child.pid !== undefined) running.add(child.pid);
    const out: Buffer[] = [];
    const err: Buffer[] = [];
    let timedOut = false;
    const timer =
      timeoutMs === undefined
        ? undefined
        : setTimeout(() => {
            timedOut = true;
            killProcessGroup(child);
          }, timeoutMs);
    child.stdout.on("data", (b: Buffer) => out.push(b));
    child.stderr.on("data", (b: Buffer) => {
      err.push(b);
      // Upstream streams command output to the engine as it runs; stderr of a provider reaches the
      // engine's log, so long installs stay visible with -v.
      process.stderr.write(b);
    });
    child.on("error", (e) => {
      clearTimeout(timer);
      if (child.pid !== undefined) running.delete(child.pid);
      reject(e);
    });
    child.on("close", (code) => {
      clearTimeout(timer);
      if (child.pid !== undefined) running.delete(child.pid);
      resolve({
        code: code ?? 1,
        stdout: Buffer.concat(out).toString(),
        stderr: Buffer.concat(err).toString(),
        timedOut,
      });
    });
    child.stdin.on("error", () => undefined);
    child.stdin.end(stdin ?? "");
  });
}

function trimOutput(s: string): string {
  return s.replace(/\n$/, "");
}

function failure(what: string, r: RunResult): Error {
  const tail = (s: string) => s.split("\n").slice(-40).join("\n");
  return new Error(`${what} failed: exit status ${r.code}\nstdout:\n${tail(r.stdout)}\nstderr:\n${tail(r.stderr)}`);
}

function outputsOf(inputs: Record<string, unknown>, r: RunResult) {
  // With logging "none" upstream still records stdout/stderr in outputs; logging only governs what is
  // streamed. Outputs repeat the inputs, as upstream does.
  return { ...withSecretCredentials(inputs), stdout: trimOutput(r.stdout), stderr: trimOutput(r.stderr) };
}

const DRIFT_KEYS = [
  "create",
  "update",
  "delete",
  "environment",
  "stdin",
  "dir",
  "connection",
  "logging",
  "addPreviousOutputInEnv",
];

export const provider = {
  async check(_urn: string, _olds: unknown, news: Record<string, unknown>) {
    return { inputs: withSecretCredentials(news) };
  },

  async diff(_id: string, _urn: string, olds: Record<string, unknown>, news: Record<string, unknown>) {
    const o = reveal(olds);
    const n = reveal(news);
    const replaces = JSON.stringify(o.triggers ?? []) !== JSON.stringify(n.triggers ?? []) ? ["triggers"] : [];
    const changed = DRIFT_KEYS.filter((k) => JSON.stringify(o[k] ?? null) !== JSON.stringify(n[k] ?? null));
    return { changes: replaces.length > 0 || changed.length > 0, replaces, deleteBeforeReplace: false };
  },

  async create(urn: string, inputs: Record<string, unknown>) {
    const type = typeOf(urn);
    const plain = reveal(inputs) as CommandInputs;
    const id = crypto.randomBytes(8).toString("hex");
    if (!plain.create) return { id, outs: { ...inputs, stdout: "", stderr: "" } };
    const warnings: Promise<void>[] = [];
    const r = await runCommand(type, plain, plain.create, {}, (m) => warnings.push(engineWarn(urn, m)));
    await Promise.all(warnings);
    if (r.code !== 0) throw failure("create", r);
    return { id, outs: outputsOf(inputs, r) };
  },

  async update(_id: string, urn: string, olds: Record<string, unknown>, news: Record<string, unknown>) {
    const type = typeOf(urn);
    const plain = reveal(news) as CommandInputs;
    const prev = reveal(olds) as Record<string, string>;
    const command = plain.update || plain.create;
    if (!command) return { outs: { ...news, stdout: "", stderr: "" } };
    const warnings: Promise<void>[] = [];
    const r = await runCommand(type, plain, command, previousOutputEnv(plain, prev), (m) =>
      warnings.push(engineWarn(urn, m)),
    );
    await Promise.all(warnings);
    if (r.code !== 0) throw failure("update", r);
    return { outs: outputsOf(news, r) };
  },

  async delete(_id: string, urn: string, props: Record<string, unknown>) {
    const plain = reveal(props) as CommandInputs & { stdout?: string; stderr?: string };
    if (!plain.delete) return;
    const warnings: Promise<void>[] = [];
    const r = await runCommand(typeOf(urn), plain, plain.delete, previousOutputEnv(plain, plain), (m) =>
      warnings.push(engineWarn(urn, m)),
    );
    await Promise.all(warnings);
    if (r.code !== 0) throw failure("delete", r);
  },
};

/**
 * PULUMI_COMMAND_STDOUT/STDERR from the last create or update, as upstream sets them: only those with
 * content (over SSH upstream sends, and warns about, an empty one never).
 */
function previousOutputEnv(inputs: CommandInputs, prev: { stdout?: string; stderr?: string }): Record<string, string> {
  if (inputs.addPreviousOutputInEnv === false) return {};
  const env: Record<string, string> = {};
  if (prev.stdout) env.PULUMI_COMMAND_STDOUT = prev.stdout;
  if (prev.stderr) env.PULUMI_COMMAND_STDERR = prev.stderr;
  return env;
}

function typeOf(urn: string): string {
  // urn:pulumi:<stack>::<project>::<parent types$>type::name
  const qualified = urn.split("::")[2] ?? "";
  const type = qualified.split("$").pop() ?? "";
  if (type !== LOCAL && type !== REMOTE) throw new Error(`gpuhost's command provider does not implement ${type}`);
  return type;
}
