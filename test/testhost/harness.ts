/**
 * A real Debian host for end-to-end tests: an overlay of the cached root filesystem (extracted once)
 * in a temp dir, booted with systemd-nspawn (systemd as PID 1, journald, sshd, apt, dpkg), reachable over SSH on
 * 127.0.0.1. It shares the host's loopback, so servers the test runs on 127.0.0.1 (apt repository,
 * Python index) are reachable from inside, and ports a test host's services bind are shared too.
 *
 * Teardown signals only the nspawn process this harness started, by its PID.
 */
import { ChildProcess, spawn, spawnSync } from "node:child_process";
import { randomBytes } from "node:crypto";
import { createWriteStream, existsSync, promises as fs, readFileSync } from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { z } from "zod";
import type { SshConnection } from "../../components/host/connection";
import { freeLocalPort } from "../../ports";
import { TEST_SSHD_KEX } from "../support/sshd";
import { run, RunResult, withLock } from "./proc";
import { ensureRootfsTree, RootfsRecipe } from "./rootfs";

export const SKIP_ENV = "GPUHOST_SKIP_TESTHOST";

export const TestHostOptionsSchema = z.object({
  name: z.string().default("th").describe("Short label put in the machine name and temp dir, for finding leftovers."),
  bootTimeoutMs: z
    .number()
    .int()
    .positive()
    .default(90_000)
    .describe("Bound on boot until SSH answers and systemd settles."),
  stopTimeoutMs: z
    .number()
    .int()
    .positive()
    .default(20_000)
    .describe("Bound on a clean poweroff after SIGTERM before SIGKILL."),
  workRoot: z
    .string()
    .default(os.tmpdir())
    .describe("Where each host's folder (its overlay root and its own changes) is made (removed at teardown)."),
  binds: z
    .array(
      z
        .object({
          // nspawn's --bind takes SRC[:DST[:OPTS]]: a ':' would split the path, so it is refused, not escaped.
          path: z
            .string()
            .regex(/^\/[^:\0\n]*$/, "must be an absolute path without ':'")
            .refine((p) => !p.split("/").includes(".."), "must not contain '..'"),
          from: z
            .string()
            .regex(/^\/[^:\0\n]*$/, "must be an absolute path without ':'")
            .refine((p) => !p.split("/").includes(".."), "must not contain '..'")
            .optional()
            .describe("The folder of this machine mounted there, when it is not `path` itself."),
          readOnly: z.boolean().default(true),
        })
        .strict(),
    )
    .default([])
    .describe(
      "Folders of this machine mounted into the container at the same path, or `from` another (read-only unless said): what a unit inside runs from this machine's checkout.",
    ),
  defaultKex: z
    .boolean()
    .default(false)
    .describe("sshd offers OpenSSH's own key exchanges, not the suite's X25519 alone (TEST_SSHD_KEX: why)."),
});
export type TestHostOptions = z.input<typeof TestHostOptionsSchema> & { recipe?: Partial<RootfsRecipe> };

export interface TestHost {
  host: "127.0.0.1";
  port: number;
  user: "root";
  privateKeyPath: string;
  privateKey: string;
  /** The host's sshd public key (`ssh-ed25519 AAAA...`), made fresh per boot: what a stack pins. */
  hostKey: string;
  machineName: string;
  /** Where boot time went: mounting its root (an overlay of the cached tree), until SSH answered, until systemd settled. */
  timings: { rootSeconds: number; sshSeconds: number; settledSeconds: number };
  /**
   * The container's root directory on this machine (an overlay: the cached tree below, this host's
   * own changes above): files written here are files on the host.
   */
  rootDir: string;
  /** Runs a shell command on the host over SSH (as a real client would); never throws on exit code. */
  exec(cmd: string, opts?: { timeoutMs?: number; input?: string }): Promise<RunResult>;
  /** exec, throwing with the output when the command fails. */
  execOk(cmd: string, opts?: { timeoutMs?: number; input?: string }): Promise<RunResult>;
  /** ssh arguments (before the remote command) for tools that spawn their own client. */
  sshArgs: string[];
  /** Powers the container off (SIGTERM to our nspawn PID, SIGKILL after a bound), unmounts its root and removes its folder. */
  stop(): Promise<void>;
}

/** The product's SSH connection to a booted test host (its host key pinned), as `user`. */
export function connectionOf(host: TestHost, user = "root"): SshConnection {
  return { kind: "ssh", host: host.host, port: host.port, user, privateKey: host.privateKey, hostKey: host.hostKey };
}

/** Why this machine cannot boot a test host, or null when it can. */
export function testHostUnavailableReason(): string | null {
  if (process.platform !== "linux") return `platform is ${process.platform}, not linux`;
  if (typeof process.getuid === "function" && process.getuid() !== 0) {
    return "not running as root (systemd-nspawn and debootstrap need root)";
  }
  for (const tool of ["systemd-nspawn", "debootstrap", "ssh", "ssh-keygen", "zstd"]) {
    if (spawnSync("sh", ["-c", `command -v ${tool}`]).status !== 0) {
      return `${tool} is not installed (run .ci/testhost-prereqs.sh)`;
    }
  }
  // Each host's root is an overlay of the cached tree.
  if (!/\toverlay$/m.test(readFileSync("/proc/filesystems", "utf8"))) return "the kernel has no overlayfs";
  return null;
}

/**
 * For suites: returns true when the suite should run. When the machine cannot run it, throws (the
 * suite fails loudly) unless GPUHOST_SKIP_TESTHOST=1, in which case it warns and returns false.
 */
export function requireTestHost(): boolean {
  const reason = testHostUnavailableReason();
  if (!reason) return true;
  if (process.env[SKIP_ENV] === "1") {
    console.warn(`[testhost] SKIPPED: ${reason}; ${SKIP_ENV}=1 is set. These suites did not run.`);
    return false;
  }
  throw new Error(
    `[testhost] cannot boot the real Debian test host: ${reason}. ` +
      `Fix the machine, or set ${SKIP_ENV}=1 to skip the test-host suites explicitly.`,
  );
}

/**
 * nspawn wants /run/systemd/nspawn on a filesystem it may unmount from; without systemd as this
 * machine's PID 1 it is on the root disk ("Attempted to remove disk file system"). A tmpfs fixes it.
 */
async function ensureNspawnRunDir(): Promise<void> {
  const dir = "/run/systemd/nspawn";
  await withLock("/run/gpuhost-testhost-nspawn.lock", 60_000, async () => {
    const mounted = readFileSync("/proc/self/mountinfo", "utf8")
      .split("\n")
      .some((l) => l.split(" ")[4] === dir);
    if (mounted) return;
    await fs.mkdir(dir, { recursive: true });
    await run("mount", ["-t", "tmpfs", "tmpfs", dir]);
  });
}

// The harness checks the host key too (a known_hosts with the key it generated), as gpuhost does.
const SSH_OPTIONS = [
  "-o",
  "BatchMode=yes",
  "-o",
  "StrictHostKeyChecking=yes",
  "-o",
  "LogLevel=ERROR",
  "-o",
  "ConnectTimeout=5",
  "-o",
  "IdentitiesOnly=yes",
];

const live = new Set<ChildProcess>();
function killLiveContainers(): void {
  // the process is going away without teardown: do not leave containers behind (our PIDs only)
  for (const child of live)
    if (child.pid)
      try {
        process.kill(child.pid, "SIGKILL");
      } catch {
        /* gone */
      }
}
process.on("exit", killLiveContainers);
for (const signal of ["SIGTERM", "SIGINT"] as const) {
  process.once(signal, () => {
    killLiveContainers();
    process.kill(process.pid, signal); // then die of the signal as we would have
  });
}

export async function bootTestHost(input: TestHostOptions = {}): Promise<TestHost> {
  const opts = TestHostOptionsSchema.parse(input);
  const unavailable = testHostUnavailableReason();
  if (unavailable) throw new Error(`[testhost] ${unavailable}`);
  const tree = await ensureRootfsTree(input.recipe ?? {});
  await ensureNspawnRunDir();

  const suffix = `${process.pid}-${randomBytes(3).toString("hex")}`;
  const machineName = `gpuhost-${opts.name}-${suffix}`.slice(0, 60);
  const work = await fs.mkdtemp(path.join(opts.workRoot, `gpuhost-testhost-${opts.name}-`));
  const rootDir = path.join(work, "root");
  const privateKeyPath = path.join(work, "id_ed25519");
  let child: ChildProcess | undefined;
  let mounted = false;
  const cleanup = async () => {
    if (child) await stopNspawn(child, opts.stopTimeoutMs);
    if (mounted) await unmountRoot(rootDir);
    // --one-file-system: a root that would not unmount is never followed into (its tree is the cache's).
    await run("rm", ["-rf", "--one-file-system", work], { allowFailure: true, timeoutMs: 120_000 });
  };
  try {
    const t0 = Date.now();
    // The cached tree below, this host's changes above (engine/contain.sh unmounts what a killed run left).
    for (const d of ["root", "upper", "overlay-work"]) await fs.mkdir(path.join(work, d));
    await run("mount", [
      "-t",
      "overlay",
      "overlay",
      "-o",
      `lowerdir=${tree},upperdir=${path.join(work, "upper")},workdir=${path.join(work, "overlay-work")}`,
      rootDir,
    ]);
    mounted = true;
    const rootAt = Date.now();
    const port = await freeLocalPort();
    const hostKey = await configureSsh(rootDir, privateKeyPath, port, opts.defaultKex);
    const knownHosts = path.join(work, "known_hosts");
    await fs.writeFile(knownHosts, `[127.0.0.1]:${port} ${hostKey}\n`, { mode: 0o600 });

    const log = createWriteStream(path.join(work, "nspawn.log"));
    child = spawn(
      "systemd-nspawn",
      [
        "-D",
        rootDir,
        "-b",
        "--register=no",
        "--keep-unit",
        `--machine=${machineName}`,
        "--console=pipe",
        "--quiet",
        ...opts.binds.map((b) => `${b.readOnly ? "--bind-ro" : "--bind"}=${b.from ? `${b.from}:` : ""}${b.path}`),
      ],
      { stdio: ["ignore", "pipe", "pipe"] },
    );
    live.add(child);
    child.stdout?.pipe(log);
    child.stderr?.pipe(log);
    const sshArgs = [
      ...SSH_OPTIONS,
      "-o",
      `UserKnownHostsFile=${knownHosts}`,
      "-i",
      privateKeyPath,
      "-p",
      String(port),
      "root@127.0.0.1",
    ];
    const exec = (cmd: string, o: { timeoutMs?: number; input?: string } = {}) =>
      run("ssh", [...sshArgs, cmd], { allowFailure: true, timeoutMs: o.timeoutMs ?? 300_000, input: o.input });
    const phases = await waitForBoot(child, exec, opts.bootTimeoutMs, path.join(work, "nspawn.log"));
    const timings = {
      rootSeconds: (rootAt - t0) / 1000,
      sshSeconds: (phases.sshAt - rootAt) / 1000,
      settledSeconds: (phases.settledAt - phases.sshAt) / 1000,
    };

    const started = child;
    return {
      timings,
      host: "127.0.0.1",
      port,
      user: "root",
      privateKeyPath,
      privateKey: await fs.readFile(privateKeyPath, "utf8"),
      hostKey,
      machineName,
      rootDir,
      sshArgs,
      exec,
      async execOk(cmd, o) {
        const r = await exec(cmd, o);
        if (r.code !== 0) throw new Error(`on test host: \`${cmd}\` exited ${r.code}\n${r.stdout}\n${r.stderr}`);
        return r;
      },
      stop: async () => {
        child = started;
        await cleanup();
      },
    };
  } catch (err) {
    await cleanup();
    throw err;
  }
}

/** A client key pair, sshd host key, and a drop-in making sshd listen on our port on loopback only. */
async function configureSsh(
  rootDir: string,
  privateKeyPath: string,
  port: number,
  defaultKex: boolean,
): Promise<string> {
  await run("ssh-keygen", ["-q", "-t", "ed25519", "-N", "", "-C", "gpuhost-testhost", "-f", privateKeyPath]);
  const sshDir = path.join(rootDir, "root/.ssh");
  await fs.mkdir(sshDir, { recursive: true, mode: 0o700 });
  await fs.copyFile(`${privateKeyPath}.pub`, path.join(sshDir, "authorized_keys"));
  await fs.chmod(path.join(sshDir, "authorized_keys"), 0o600);
  const hostKey = path.join(rootDir, "etc/ssh/ssh_host_ed25519_key");
  await run("ssh-keygen", ["-q", "-t", "ed25519", "-N", "", "-f", hostKey]);
  await fs.writeFile(
    path.join(rootDir, "etc/ssh/sshd_config.d/gpuhost-testhost.conf"),
    [
      "# written by test/testhost/harness.ts: this container shares the machine's loopback",
      `Port ${port}`,
      "ListenAddress 127.0.0.1",
      "HostKey /etc/ssh/ssh_host_ed25519_key",
      "PermitRootLogin prohibit-password",
      "PasswordAuthentication no",
      ...(defaultKex ? [] : [TEST_SSHD_KEX]),
      "",
    ].join("\n"),
  );
  return (await fs.readFile(`${hostKey}.pub`, "utf8")).trim().split(/\s+/).slice(0, 2).join(" ");
}

async function waitForBoot(
  child: ChildProcess,
  exec: (cmd: string, o?: { timeoutMs?: number }) => Promise<RunResult>,
  boundMs: number,
  logPath: string,
): Promise<{ sshAt: number; settledAt: number }> {
  const deadline = Date.now() + boundMs;
  // Typed by a cast: the exit listener sets it, which TypeScript's narrowing of `= null` cannot see.
  let exited = null as string | null;
  child.once("exit", (code, signal) => (exited = `systemd-nspawn exited (${code ?? signal}) during boot`));
  const tail = () => (existsSync(logPath) ? readFileSync(logPath, "utf8").slice(-3000) : "");
  let last = "";
  while (Date.now() < deadline) {
    if (exited) throw new Error(`[testhost] ${exited}\n${tail()}`);
    const r = await exec("true", { timeoutMs: 8_000 }).catch((e: Error) => ({
      code: 255,
      stdout: "",
      stderr: e.message,
    }));
    if (r.code === 0) {
      const sshAt = Date.now();
      // ssh answers; let systemd finish starting units so tests see a settled host
      const left = Math.max(1, Math.ceil((deadline - Date.now()) / 1000));
      const s = await exec(`timeout ${left} systemctl is-system-running --wait`, { timeoutMs: left * 1000 + 5000 });
      const state = s.stdout.trim();
      if (state === "running" || state === "degraded") return { sshAt, settledAt: Date.now() };
      throw new Error(`[testhost] systemd did not settle: state "${state}"\n${tail()}`);
    }
    last = r.stderr.trim();
    await new Promise((res) => setTimeout(res, 300));
  }
  throw new Error(`[testhost] SSH did not answer within ${boundMs} ms (last: ${last})\n${tail()}`);
}

/** Unmounts a host's overlay root: lazily where it is still busy (a process of the container not reaped yet). */
async function unmountRoot(rootDir: string): Promise<void> {
  const r = await run("umount", [rootDir], { allowFailure: true });
  if (r.code !== 0) await run("umount", ["-l", rootDir], { allowFailure: true });
}

async function stopNspawn(child: ChildProcess, boundMs: number): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null || !child.pid) {
    live.delete(child);
    return;
  }
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  // SIGTERM makes nspawn ask the container's systemd for a clean poweroff
  process.kill(child.pid, "SIGTERM");
  const clean = await Promise.race([
    exited.then(() => true),
    new Promise<boolean>((r) => setTimeout(() => r(false), boundMs)),
  ]);
  if (!clean) {
    process.kill(child.pid, "SIGKILL");
    await exited;
  }
  live.delete(child);
}
