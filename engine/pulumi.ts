/**
 * Runs the Pulumi CLI engine/setup.sh chose (an official install when there is a recent enough one,
 * else the offline build; .gpuhost/engine/bin/pulumi names it) with the right backend and secrets,
 * which stackAccess decides for every command (the demo, its destroy, `gpuhost drift`):
 *   - an embedded stack (every host simulated: `sim`, `sim-fleet`): the project's own file backend in
 *     .gpuhost/state and the documented non-secret passphrase, since it reaches no machine but this one,
 *     holds no credentials and anyone must be able to run it from a fresh clone;
 *   - every other stack: the user's backend (`pulumi login`, PULUMI_BACKEND_URL) and secrets provider,
 *     untouched; one that needs a passphrase and has none is refused in one sentence.
 * The plugins are the engine's own business: beside the CLI (official or ours) and in the user's plugin
 * cache; nothing of gpuhost goes first on PATH. The CLI runs under umask 077, so the state and backups a
 * file backend writes are readable by the user alone.
 */
import { spawn } from "node:child_process";
import { createDecipheriv, pbkdf2Sync, randomUUID } from "node:crypto";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { parse as parseYaml } from "yaml";
import { processAlive } from "../ports";
import { projectRoot } from "../project-files";
import type { UpdateRecord } from "../components/drift/guard";

/** The gpuhost project root (engine/pulumi.ts runs from <root>/engine or <root>/dist/engine). */
export const PROJECT_ROOT = projectRoot();

/** The stack the demo runs by default, an embedded one (isEmbeddedStack). */
export const EMBEDDED_STACK = "sim";

/**
 * The passphrase of the embedded stacks only (isEmbeddedStack). It is deliberately not a secret: those
 * stacks hold no credentials and anyone must be able to run them. No other stack ever gets it.
 */
export const EMBEDDED_PASSPHRASE = "gpuhost-embedded-stacks-passphrase-not-a-secret";

export interface EngineOptions {
  /** Project directory (holds Pulumi.yaml). Default: the gpuhost project. */
  cwd?: string;
  /** Run on the embedded backend (.gpuhost/state) with the documented passphrase: embedded stacks only. */
  embedded?: boolean;
  /** A file backend in this folder (tests' throwaway stacks); otherwise the user's backend. */
  stateDir?: string;
  env?: NodeJS.ProcessEnv;
  /** Called with each chunk of output as it arrives (for live progress). */
  onOutput?: (chunk: string) => void;
  /** Kill the CLI after this many milliseconds. */
  timeoutMs?: number;
  /**
   * Stops the CLI: one SIGINT (the engine cancels, and stops its plugins), SIGKILL when it is still
   * there STOP_GRACE_MS later (the plugins then end by themselves when they see it gone). The CLI then
   * runs in a session of its own, so neither a second Ctrl-C nor a closed terminal's SIGHUP reaches it:
   * only this process signals it (a second SIGINT would make it quit leaving the stack locked).
   */
  signal?: AbortSignal;
}

/** How long a cancelled engine has to end by itself before it is killed. */
export const STOP_GRACE_MS = 5000;

export interface EngineResult {
  code: number;
  stdout: string;
  stderr: string;
}

/** The CLI engine/setup.sh chose: a link to an official install, or the offline build. */
export const pulumiBin = (): string => path.join(PROJECT_ROOT, ".gpuhost", "engine", "bin", "pulumi");

/** The embedded stack's backend folder, created owner-only. */
export function embeddedStateDir(): string {
  return privateDir(path.join(PROJECT_ROOT, ".gpuhost", "state"));
}

function privateDir(dir: string): string {
  fs.mkdirSync(dir, { recursive: true, mode: 0o700 });
  fs.chmodSync(dir, 0o700);
  return dir;
}

export function engineEnv(opts: EngineOptions = {}): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    PULUMI_SKIP_UPDATE_CHECK: "true",
    PULUMI_AUTOMATION_API_SKIP_VERSION_CHECK: "true",
    PULUMI_DIY_BACKEND_NO_LEGACY_WARNING: "true",
    // Plugins come from the setup (or the user's own installs), never from a download mid-deployment.
    PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION: process.env.PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION ?? "true",
    NO_COLOR: "1",
  };
  // Where the stand-in command provider's launcher looks first (engine/setup.sh): this checkout's,
  // when it has one (an installed package has none).
  if (fs.existsSync(path.join(PROJECT_ROOT, "dist", "engine", "offline-plugins")))
    env.GPUHOST_OFFLINE_PLUGINS_ROOT = PROJECT_ROOT;
  if (opts.embedded) {
    env.PULUMI_BACKEND_URL = `file://${embeddedStateDir()}`;
    // The user's own passphrase (for their real stacks) must not become the sim stack's.
    env.PULUMI_CONFIG_PASSPHRASE = EMBEDDED_PASSPHRASE;
    delete env.PULUMI_CONFIG_PASSPHRASE_FILE;
  } else if (opts.stateDir) {
    env.PULUMI_BACKEND_URL = `file://${privateDir(opts.stateDir)}`;
  }
  return { ...env, ...opts.env };
}

/** Why the engine cannot run, in one sentence (not set up yet); undefined when it can. */
export function engineMissing(): string | undefined {
  const bin = pulumiBin();
  return fs.existsSync(bin) ? undefined : `${bin} is missing: run \`npm run setup\` (engine/setup.sh) first`;
}

export function runPulumi(args: string[], opts: EngineOptions = {}): Promise<EngineResult> {
  const missing = engineMissing();
  if (missing) return Promise.reject(new Error(missing));
  const bin = pulumiBin();
  const env = engineEnv(opts);
  const repaired = repairTornMetadata(currentBackend(env));
  if (repaired.length > 0) {
    process.stderr.write(
      `gpuhost: removed ${repaired.length} empty or torn metadata file(s) a killed pulumi left in the file backend (the engine could not load the stack with them): ${repaired.join(", ")}\n`,
    );
  }
  const startedAt = Date.now();
  return new Promise((resolve, reject) => {
    // umask 077 for the CLI and everything it starts: a file backend's state, backups and history
    // hold encrypted secrets and the hosts' addresses, readable by this user alone.
    const child = spawn("/bin/sh", ["-c", 'umask 077 && exec "$0" "$@"', bin, ...args, "--non-interactive"], {
      cwd: opts.cwd ?? PROJECT_ROOT,
      env,
      stdio: ["ignore", "pipe", "pipe"],
      // A process group of its own: a terminal's Ctrl-C reaches the caller, which stops the engine
      // once (opts.signal); a second SIGINT would make the CLI quit without stopping its plugins.
      detached: opts.signal !== undefined,
    });
    let stdout = "";
    let stderr = "";
    // This process leaving while the CLI runs (a second Ctrl-C exits at once, a closed terminal):
    // the CLI is killed and its lock removed before it goes, so the stack is not left locked.
    const onExit = () => {
      const removed = killAndUnlock(child.pid, env);
      if (removed.length > 0) {
        try {
          process.stderr.write(`gpuhost: stopped pulumi and removed the lock it held: ${removed.join(", ")}\n`);
        } catch {
          // the terminal is gone
        }
      }
    };
    process.on("exit", onExit);
    const timer = opts.timeoutMs ? setTimeout(() => child.kill("SIGTERM"), opts.timeoutMs) : undefined;
    let killer: NodeJS.Timeout | undefined;
    const stop = () => {
      child.kill("SIGINT");
      killer = setTimeout(() => child.kill("SIGKILL"), STOP_GRACE_MS);
    };
    if (opts.signal?.aborted) stop();
    else opts.signal?.addEventListener("abort", stop, { once: true });
    child.stdout.on("data", (b: Buffer) => {
      stdout += b.toString();
      opts.onOutput?.(b.toString());
    });
    child.stderr.on("data", (b: Buffer) => {
      stderr += b.toString();
      opts.onOutput?.(b.toString());
    });
    child.on("error", reject);
    child.on("close", (code) => {
      if (timer) clearTimeout(timer);
      clearTimeout(killer);
      opts.signal?.removeEventListener("abort", stop);
      process.off("exit", onExit);
      // A CLI killed (the stop's SIGKILL, the timeout) or crashed leaves its lock: the stack would
      // refuse every later update until `pulumi cancel`. The lock is this run's: remove it.
      const unlocked = child.pid === undefined ? [] : removeLocksOf(currentBackend(env), child.pid);
      if (unlocked.length > 0) {
        const line = `gpuhost: removed the lock the stopped pulumi left on the stack: ${unlocked.join(", ")}\n`;
        stderr += line;
        opts.onOutput?.(line);
      }
      logEngineCommand(args, Date.now() - startedAt, code);
      resolve({ code: code ?? 1, stdout, stderr });
    });
  });
}

/** Where a run's time goes (docs/development.md): with GPUHOST_ENGINE_LOG set, one line per engine command. */
function logEngineCommand(args: readonly string[], ms: number, code: number | null): void {
  const log = process.env.GPUHOST_ENGINE_LOG;
  if (log) fs.appendFileSync(log, `${ms}\t${code}\t${loggedArgs(args)}\n`);
}

/** ARGS for the engine log: a config command's keys and values left out, since they may be secrets. */
export function loggedArgs(args: readonly string[]): string {
  if (args[0] === "config") return `${args.slice(0, 2).join(" ")} (its arguments left out: they may be secrets)`;
  return args.map((a, i) => (i > 0 && ["--config", "-c"].includes(args[i - 1]) ? `${a.split("=")[0]}=…` : a)).join(" ");
}

/**
 * Selects STACK, creating it when it does not exist yet (the embedded one with the passphrase
 * provider): one CLI start, not a failing `select` and an `init`.
 */
export async function ensureStack(stack: string, opts: EngineOptions = {}): Promise<void> {
  const provider = opts.embedded ? ["--secrets-provider", "passphrase"] : [];
  const r = await runPulumi(["stack", "select", "--create", stack, ...provider], opts);
  if (r.code !== 0) throw new Error(`pulumi stack select --create ${stack} failed:\n${r.stdout}${r.stderr}`);
}

/** The stacks the project ships for rehearsal (stacks/Pulumi.<name>.yaml), every host simulated. */
export const EMBEDDED_STACKS: readonly string[] = [EMBEDDED_STACK, "sim-fleet", "sim-mixed"];

/**
 * Whether STACK is embedded: one of the stacks the project ships for rehearsal, and its config file
 * (stacks/Pulumi.<stack>.yaml here) still names at least one host and every host is `connection.kind:
 * simulated`. Such a stack reaches no machine but this one (its hosts are folders of the project) and
 * holds only the documented test key, so it lives on the project's own backend under the public
 * passphrase, whoever runs it and whatever backend they use for their real stacks. Any other stack is
 * the user's, a simulated one they made included: it may hold their own secrets, which never go under
 * a public passphrase (and it may live on their backend already, under theirs).
 */
export function isEmbeddedStack(stack: string, cwd: string = PROJECT_ROOT): boolean {
  if (!EMBEDDED_STACKS.includes(stack)) return false;
  const config = readStackConfig(cwd, stack);
  const hosts = config?.doc?.config?.[`${config.project}:hosts`];
  return Array.isArray(hosts) && hosts.length > 0 && stackConfigMachines(cwd, stack).length === 0;
}

/**
 * The real machines a stack's config names, each as its config path and kind: every `hosts` entry
 * that is not simulated (SSH, a bastion with it, or this machine) and the drift check's own machine
 * when it is one of its own (`ssh`, `local`; `host` and `router` name a `hosts` entry, judged there).
 * The router runs on a `hosts` entry too. CONFIG is the `gpuhost` namespace's values, parsed or raw.
 */
export function realMachines(config: { hosts?: unknown; operations?: unknown }): string[] {
  const found: string[] = [];
  const hosts: unknown[] = Array.isArray(config.hosts) ? config.hosts : [];
  hosts.forEach((h, i) => {
    const kind = (h as { connection?: { kind?: unknown } } | null)?.connection?.kind;
    if (kind !== "simulated") found.push(`hosts[${i}] (connection.kind ${String(kind)})`);
  });
  const operations = config.operations as { driftCheck?: { machine?: { kind?: unknown } | null } } | null | undefined;
  const machine = operations?.driftCheck?.machine;
  if (machine && machine.kind !== "host" && machine.kind !== "router")
    found.push(`operations.driftCheck.machine (kind ${String(machine.kind)})`);
  return found;
}

/** realMachines of STACK's config file in CWD (none when it has no file). */
export function stackConfigMachines(cwd: string, stack: string): string[] {
  const config = readStackConfig(cwd, stack);
  const values = config?.doc?.config ?? {};
  return realMachines({
    hosts: values[`${config?.project}:hosts`],
    operations: values[`${config?.project}:operations`],
  });
}

/** Whether ENV hands the engine gpuhost's public passphrase (PULUMI_CONFIG_PASSPHRASE or its file). */
export function usesEmbeddedPassphrase(env: NodeJS.ProcessEnv): boolean {
  if (env.PULUMI_CONFIG_PASSPHRASE !== undefined && env.PULUMI_CONFIG_PASSPHRASE !== "")
    return env.PULUMI_CONFIG_PASSPHRASE === EMBEDDED_PASSPHRASE;
  try {
    const file = env.PULUMI_CONFIG_PASSPHRASE_FILE;
    return file !== undefined && fs.readFileSync(file, "utf8").trim() === EMBEDDED_PASSPHRASE;
  } catch {
    return false;
  }
}

/**
 * The one sentence that refuses the public passphrase for STACK, which names the real MACHINES: their
 * credentials (an SSH key set with `config set --secret`) would be encrypted under a passphrase anyone
 * can read in the project, so the stack must have the user's own secrets provider before anything
 * connects (preview included).
 */
export function embeddedPassphraseRefusal(stack: string, machines: readonly string[]): string {
  return (
    `stack ${stack} names a real machine (${machines.join(", ")}), and gpuhost's embedded passphrase is public, ` +
    `so its secrets need your own secrets provider: make it a stack of your own (\`pulumi stack init NAME\` with your ` +
    `own PULUMI_CONFIG_PASSPHRASE, or \`--secrets-provider\` a KMS) with this config; nothing was connected to.`
  );
}

/** The backend and secrets a stack runs with: stackAccess's answer. */
export interface StackAccess {
  /** The stack: the one asked for, else the selected one; undefined when neither is. */
  stack: string | undefined;
  /** Whether it is embedded (isEmbeddedStack): the project's backend and the public passphrase. */
  embedded: boolean;
  /** The engine options to run every command on it with (the caller's, with `embedded` decided). */
  opts: EngineOptions;
  /** Why it cannot run with the secrets at hand, in one sentence; undefined when it can. */
  problem: string | undefined;
}

/**
 * Which backend and secrets STACK runs with: the one answer every command uses (the demo's up and
 * destroy, `gpuhost drift`), so a stack never lives in one backend for one command and in another for
 * the next. An embedded stack: the project's backend and passphrase, the user's PULUMI_BACKEND_URL and
 * passphrase set aside. Any other: the user's backend and secrets provider, with the sentence that
 * refuses it when it needs a passphrase and none is set. STACK undefined: the selected stack (looked
 * up on the embedded backend first, where `npm run demo -- --stack` selects it, then on the user's).
 */
export async function stackAccess(stack: string | undefined, opts: EngineOptions = {}): Promise<StackAccess> {
  const cwd = opts.cwd ?? PROJECT_ROOT;
  const embeddedOpts = { ...opts, embedded: true };
  const userOpts = { ...opts, embedded: false };
  const name =
    stack ??
    (await selectedStack(embeddedOpts).then((s) => (s !== undefined && isEmbeddedStack(s, cwd) ? s : undefined))) ??
    (await selectedStack(userOpts));
  if (name !== undefined && isEmbeddedStack(name, cwd))
    return { stack: name, embedded: true, opts: embeddedOpts, problem: undefined };
  return {
    stack: name,
    embedded: false,
    opts: userOpts,
    problem:
      name === undefined
        ? (engineMissing() ??
          "no stack is selected: name one with --stack NAME (`sim`, `sim-fleet` and `sim-mixed` are the embedded ones).")
        : (publicPassphraseProblem(name, userOpts) ?? secretsProviderProblem(name, userOpts)),
  };
}

/**
 * The refusal of a stack that names a real machine and runs under the public passphrase: its config
 * file's encryption salt is that passphrase's (the shipped stacks' files, a copy of one), or the
 * environment hands the engine that passphrase. Undefined otherwise.
 */
function publicPassphraseProblem(stack: string, opts: EngineOptions): string | undefined {
  const cwd = opts.cwd ?? PROJECT_ROOT;
  const machines = stackConfigMachines(cwd, stack);
  if (machines.length === 0) return undefined;
  const salt = readStackConfig(cwd, stack)?.doc?.encryptionsalt;
  const underPublic =
    usesEmbeddedPassphrase(engineEnv(opts)) || (salt !== undefined && saltOfPassphrase(salt, EMBEDDED_PASSPHRASE));
  return underPublic ? embeddedPassphraseRefusal(stack, machines) : undefined;
}

/**
 * Whether a stack config's `encryptionsalt` was made with PASSPHRASE, as the engine's passphrase
 * secrets manager checks it (sdk/go/common/secrets/passphrase): `v1:<salt>:v1:<nonce>:<sealed>`,
 * where sealed is "pulumi" under AES-256-GCM with the key PBKDF2-SHA256(passphrase, salt, 1,000,000
 * rounds, 32 bytes). About a quarter of a second, asked only of a stack that names a real machine.
 */
export function saltOfPassphrase(encryptionsalt: string, passphrase: string): boolean {
  const m = /^v1:([^:]+):v1:([^:]+):([^:]+)$/.exec(encryptionsalt.trim());
  if (!m) return false;
  const sealed = Buffer.from(m[3], "base64");
  if (sealed.length <= 16) return false;
  try {
    const key = pbkdf2Sync(passphrase, Buffer.from(m[1], "base64"), 1_000_000, 32, "sha256");
    const decipher = createDecipheriv("aes-256-gcm", key, Buffer.from(m[2], "base64"));
    decipher.setAuthTag(sealed.subarray(-16));
    return Buffer.concat([decipher.update(sealed.subarray(0, -16)), decipher.final()]).toString() === "pulumi";
  } catch {
    return false;
  }
}

/** The command that brings STACK up: the demo's for an embedded stack, else plain `pulumi up`. */
export function upCommand(stack: string, embedded: boolean): string {
  if (!embedded) return `pulumi up --stack ${stack}`;
  return `${stack === EMBEDDED_STACK ? "" : `GPUHOST_STACK=${stack} `}npm run demo -- --stack`;
}

/** Whether STACK exists in the backend OPTS run on (`pulumi stack ls`); undefined when that fails. */
export async function stackExists(stack: string, opts: EngineOptions = {}): Promise<boolean | undefined> {
  const r = await runPulumi(["stack", "ls", "--json"], { timeoutMs: 60_000, ...opts }).catch(() => undefined);
  if (r?.code !== 0) return undefined;
  try {
    const short = stack.split("/").pop();
    return (JSON.parse(r.stdout) as { name?: string }[]).some(
      (s) => s.name === stack || s.name?.split("/").pop() === short,
    );
  } catch {
    return undefined;
  }
}

/**
 * Why STACK cannot run with the secrets this environment provides, as one sentence; undefined when it
 * can. A stack on the passphrase provider (its config file has an encryption salt or says so, or it has
 * no provider yet on a file backend, where passphrase is the default) needs PULUMI_CONFIG_PASSPHRASE or
 * PULUMI_CONFIG_PASSPHRASE_FILE; a KMS or service provider needs neither. An embedded stack (opts.embedded)
 * has its passphrase.
 */
export function secretsProviderProblem(stack: string, opts: EngineOptions = {}): string | undefined {
  const env = engineEnv(opts);
  if (env.PULUMI_CONFIG_PASSPHRASE || env.PULUMI_CONFIG_PASSPHRASE_FILE) return undefined;
  const doc = readStackConfig(opts.cwd ?? PROJECT_ROOT, stack)?.doc;
  const provider = doc?.secretsprovider;
  const passphrase =
    provider === "passphrase" ||
    (provider === undefined && (doc?.encryptionsalt !== undefined || currentBackend(env).startsWith("file://")));
  if (!passphrase) return undefined;
  return (
    `stack ${stack} uses the passphrase secrets provider and no passphrase is set: set PULUMI_CONFIG_PASSPHRASE ` +
    `or PULUMI_CONFIG_PASSPHRASE_FILE (gpuhost's documented passphrase is for its embedded, all-simulated stacks only), ` +
    `or move the stack to a KMS provider with \`pulumi stack change-secrets-provider\`.`
  );
}

/** The selected stack's name on the backend OPTS run on, when it exists there. */
async function selectedStack(opts: EngineOptions): Promise<string | undefined> {
  const r = await runPulumi(["stack", "--show-name"], { timeoutMs: 60_000, ...opts }).catch(() => undefined);
  const name = r?.code === 0 ? r.stdout.trim() : "";
  return name || undefined;
}

interface StackConfigDoc {
  secretsprovider?: string;
  encryptionsalt?: string;
  config?: Record<string, unknown>;
}

/**
 * The project in CWD's name and STACK's config file (<stackConfigDir>/Pulumi.<stack>.yaml, the last
 * part of org/project/stack), parsed; doc undefined when the file is absent, undefined without a project.
 */
function readStackConfig(cwd: string, stack: string): { project: string; doc?: StackConfigDoc } | undefined {
  const projectFile = ["Pulumi.yaml", "Pulumi.yml"].map((f) => path.join(cwd, f)).find((f) => fs.existsSync(f));
  if (!projectFile) return undefined;
  const project = (parseYaml(fs.readFileSync(projectFile, "utf8")) ?? {}) as { name?: string; stackConfigDir?: string };
  const short = stack.split("/").pop()!;
  const file = path.join(cwd, project.stackConfigDir ?? ".", `Pulumi.${short}.yaml`);
  const doc = fs.existsSync(file)
    ? ((parseYaml(fs.readFileSync(file, "utf8")) ?? undefined) as StackConfigDoc | undefined)
    : undefined;
  return { project: project.name ?? "", doc };
}

/**
 * The `.attrs` files of a file backend's stacks and locks that hold no JSON, removed; their paths.
 *
 * The file backend (gocloud's fileblob) writes each object's data atomically (a temp file, then a
 * rename) but its metadata file beside it (`<object>.attrs`: content type and MD5) in place: created
 * empty, then written. A `pulumi up` killed (kill -9, a lost machine) between the two leaves it empty,
 * and every later command on the stack fails with "failed to load checkpoint: EOF" (or the lock check
 * fails the same way). The object itself is whole; fileblob reads an object without an `.attrs` as one
 * with default metadata, so removing the torn one loses nothing. Only the stacks and locks folders are
 * read (a few files): they are what every command loads.
 *
 * A running `up` writes that same file, empty for a moment each time it saves a checkpoint: removing
 * it then loses the metadata of a live write. So a stack's files are repaired only under the stack's
 * lock (withStackLock), which an `up` holds while it writes, and only where the object exists (the
 * first write of an object, unlocked for a new stack, creates the `.attrs` before it).
 */
export function repairTornMetadata(backendUrl: string): string[] {
  const root = fileBackendRoot(backendUrl);
  if (root === undefined) return [];
  const meta = path.join(root, ".pulumi");
  // torn files, by the lock folder of the stack they belong to
  const byLock = new Map<string, string[]>();
  const trees: [string, (file: string) => string | undefined][] = [
    [path.join(meta, "stacks"), (file) => stackLockDir(meta, file)],
    // a lock's own metadata: the lock folder is the one it lies in
    [path.join(meta, "locks"), (file) => path.dirname(file)],
  ];
  for (const [tree, lockDirOf] of trees) {
    for (const p of backendFiles(tree)) {
      if (!p.endsWith(".attrs") || !isTorn(p) || !fs.existsSync(p.slice(0, -".attrs".length))) continue;
      const lockDir = lockDirOf(p);
      if (lockDir !== undefined) byLock.set(lockDir, [...(byLock.get(lockDir) ?? []), p]);
    }
  }
  const removed: string[] = [];
  for (const [lockDir, files] of byLock) {
    withStackLock(meta, lockDir, () => {
      for (const f of files.filter(isTorn)) {
        fs.rmSync(f, { force: true });
        removed.push(f);
      }
    });
  }
  return removed;
}

/** Whether the metadata file F holds no JSON (empty, or cut short). False when it is gone. */
function isTorn(f: string): boolean {
  let text: string;
  try {
    text = fs.readFileSync(f, "utf8");
  } catch {
    return false;
  }
  try {
    JSON.parse(text);
    return false;
  } catch {
    return true;
  }
}

/**
 * The lock folder of the stack whose file (under <meta>/stacks) is FILE, as the file backend names
 * both: `stacks/<project>/<stack>.json[.gz][.bak]` and `locks/organization/<project>/<stack>/`, or in
 * a backend of the older layout (no projects) `stacks/<stack>.json` and `locks/<stack>/`. Undefined
 * for anything else.
 */
function stackLockDir(meta: string, file: string): string | undefined {
  const parts = path.relative(path.join(meta, "stacks"), file).split(path.sep);
  const stack = parts[parts.length - 1].replace(/\.attrs$/, "").replace(/(\.json)(\.gz)?(\.bak)?$/, "");
  if (parts.length === 2) return path.join(meta, "locks", "organization", parts[0], stack);
  if (parts.length === 1) return path.join(meta, "locks", stack);
  return undefined;
}

/**
 * Runs FN holding the stack lock in LOCKDIR, as the file backend's own lock works: no other lock
 * there, ours written (whole: a temp file renamed in), still no other; false (FN not run) when another
 * one is there. A lock whose process is gone (same host, no such PID: an `up` that was killed) does
 * not count: the repair is for the stack such a run left. A live one, or one from another host
 * (whose PID cannot be checked here), does. Two lockers at once both see the other after writing
 * their own, so at most one goes on; pulumi then fails saying the stack is locked and by whom, which
 * happens only while a stack has a torn file to repair (the command would fail on it anyway).
 */
function withStackLock(meta: string, lockDir: string, fn: () => void): boolean {
  const othersHeld = (mine?: string) => {
    let names: string[];
    try {
      names = fs.readdirSync(lockDir);
    } catch {
      return false;
    }
    // the backend's lock objects are the .json files (it lists no .attrs)
    return names.some((n) => n.endsWith(".json") && n !== mine && !lockOfDeadProcess(path.join(lockDir, n)));
  };
  if (othersHeld()) return false;
  fs.mkdirSync(lockDir, { recursive: true, mode: 0o700 });
  const mine = `gpuhost-repair-${randomUUID()}.json`;
  // written beside .pulumi's own folders (the backend lists none there), then renamed in whole
  const temp = path.join(meta, `.${mine}.tmp`);
  const content = {
    pid: process.pid,
    username: os.userInfo().username,
    hostname: os.hostname(),
    timestamp: new Date(),
  };
  fs.writeFileSync(temp, JSON.stringify(content), { mode: 0o600 });
  fs.renameSync(temp, path.join(lockDir, mine));
  try {
    if (othersHeld(mine)) return false;
    fn();
    return true;
  } finally {
    fs.rmSync(path.join(lockDir, mine), { force: true });
  }
}

/** Whether the lock file F names a process of this host that is gone. False when unreadable. */
function lockOfDeadProcess(f: string): boolean {
  let lock: { pid?: unknown; hostname?: unknown };
  try {
    lock = JSON.parse(fs.readFileSync(f, "utf8")) as { pid?: unknown; hostname?: unknown };
  } catch {
    return false;
  }
  return lock.hostname === os.hostname() && typeof lock.pid === "number" && !processAlive(lock.pid);
}

/**
 * The lock files a file backend holds for the CLI process PID of this machine, removed (with their
 * `.attrs`); their paths. The engine's lock (pkg/backend/diy/lock.go) is
 * `.pulumi/locks/<org>/<project>/<stack>/<id>.json` (`locks/<stack>/` for a backend without projects)
 * holding {pid, username, hostname, timestamp} of the CLI that took it; a CLI that ends normally
 * deletes its own. Only PID's are touched: another update's lock on the same stack stays.
 */
export function removeLocksOf(backendUrl: string, pid: number): string[] {
  const root = fileBackendRoot(backendUrl);
  if (root === undefined) return [];
  const host = os.hostname();
  const removed: string[] = [];
  for (const p of backendFiles(path.join(root, ".pulumi", "locks"))) {
    if (!p.endsWith(".json")) continue;
    let lock: { pid?: unknown; hostname?: unknown };
    try {
      lock = JSON.parse(fs.readFileSync(p, "utf8")) as typeof lock;
    } catch {
      continue;
    }
    if (lock.pid !== pid || lock.hostname !== host) continue;
    fs.rmSync(p, { force: true });
    fs.rmSync(`${p}.attrs`, { force: true });
    removed.push(p);
  }
  return removed;
}

/** A lock a file backend holds on a stack: its file and who took it (the CLI's pid, user, host, time). */
export interface StackLock {
  file: string;
  pid?: number;
  username?: string;
  hostname?: string;
  timestamp?: string;
}

/**
 * The locks an update holds on STACK in the file backend OPTS run on, as the engine writes them
 * (removeLocksOf): `.pulumi/locks/organization/<project>/<stack>/*.json`, or `locks/<stack>/` in a
 * backend without projects. A lock of a process of this host that is gone (a killed update) is not
 * held: no update runs (deadLocks names it). Undefined for any other backend, whose locks are the
 * service's own (lastUpdate's "in-progress" says it there). Reads a few files, starts no engine:
 * `pulumi refresh --preview-only` takes no lock, so it cannot tell.
 */
export function stackLocks(stack: string, opts: EngineOptions = {}): StackLock[] | undefined {
  return lockFilesOf(stack, opts)
    ?.filter((l) => !l.dead)
    .map(({ dead: _, ...lock }) => lock);
}

/**
 * The locks on STACK that a process of this host left when it died (SIGKILL of an `up`, of the demo
 * whose engine then died on its closed output): no update runs, yet every update and refresh fails
 * on the lock until `pulumi cancel` removes it. Empty for any backend but a file backend.
 */
export function deadLocks(stack: string, opts: EngineOptions = {}): StackLock[] {
  return (lockFilesOf(stack, opts) ?? []).filter((l) => l.dead).map(({ dead: _, ...lock }) => lock);
}

/** Every lock file of STACK in the file backend OPTS run on, read, each marked dead or not. */
function lockFilesOf(stack: string, opts: EngineOptions): (StackLock & { dead: boolean })[] | undefined {
  const root = fileBackendRoot(currentBackend(engineEnv(opts)));
  if (root === undefined) return undefined;
  const parts = stack.split("/");
  const short = parts[parts.length - 1];
  const project = parts.length === 3 ? parts[1] : readStackConfig(opts.cwd ?? PROJECT_ROOT, short)?.project;
  const locks = path.join(root, ".pulumi", "locks");
  const dirs = [path.join(locks, short), ...(project ? [path.join(locks, "organization", project, short)] : [])];
  return dirs
    .flatMap((d) => backendFiles(d, 0))
    .filter((f) => f.endsWith(".json"))
    .map((file) => {
      let lock: Omit<StackLock, "file"> = {};
      try {
        lock = JSON.parse(fs.readFileSync(file, "utf8")) as typeof lock;
      } catch {
        // being written or torn: still a lock
      }
      return { ...lock, file, dead: lockOfDeadProcess(file) };
    });
}

/** The command that removes a stack's locks (pulumi cancel: every lock file of the stack, in a file backend). */
export function cancelCommand(stack: string | undefined): string {
  return `pulumi cancel --yes${stack ? ` --stack ${stack}` : ""}`;
}

/** Who took LOCK, in words: "pid 123 of root@host since <time> (<file>)". */
export function describeLock(lock: StackLock): string {
  return `pid ${lock.pid ?? "?"} of ${lock.username ?? "?"}@${lock.hostname ?? "?"} since ${lock.timestamp ?? "?"} (${lock.file})`;
}

/**
 * One sentence on STACK's locks left by dead processes (deadLocks), or undefined when it has none:
 * which process, and `pulumi cancel`, the one command that gets past them (a refresh or an update
 * fails on the same lock). Said only when no live process holds the stack: cancel removes every lock.
 */
export function deadLockWarning(stack: string | undefined, locks: readonly StackLock[]): string | undefined {
  if (locks.length === 0) return undefined;
  return (
    `stack ${stack ?? "(the selected one)"} is locked by a process that is gone (${locks.map(describeLock).join(", ")}): ` +
    `no update runs, yet every update and refresh fails on the lock; run \`${cancelCommand(stack)}\` to remove it.`
  );
}

/**
 * The files under DIR, at most DEPTH folders down (a file backend's stacks/ and locks/ trees are
 * `<org>/<project>/<stack>/`); none where DIR cannot be read.
 */
function backendFiles(dir: string, depth = 3): string[] {
  let entries: fs.Dirent[];
  try {
    entries = fs.readdirSync(dir, { withFileTypes: true });
  } catch {
    return [];
  }
  return entries.flatMap((e) => {
    const p = path.join(dir, e.name);
    if (e.isDirectory()) return depth > 0 ? backendFiles(p, depth - 1) : [];
    return e.isFile() ? [p] : [];
  });
}

/**
 * For a process about to exit with the CLI PID still running: SIGKILL to it, a wait (up to 2 s) until
 * it is dead, so it writes nothing more, then removeLocksOf. Synchronous: it runs in an `exit` handler.
 */
function killAndUnlock(pid: number | undefined, env: NodeJS.ProcessEnv): string[] {
  if (pid === undefined) return [];
  try {
    process.kill(pid, "SIGKILL");
  } catch {
    return removeLocksOf(currentBackend(env), pid);
  }
  const nap = new Int32Array(new SharedArrayBuffer(4));
  for (let i = 0; i < 200; i++) {
    let stat: string;
    try {
      stat = fs.readFileSync(`/proc/${pid}/stat`, "utf8");
    } catch {
      break; // reaped
    }
    if (stat.slice(stat.lastIndexOf(")") + 2).startsWith("Z")) break; // dead, not yet reaped
    Atomics.wait(nap, 0, 0, 10);
  }
  return removeLocksOf(currentBackend(env), pid);
}

/** A file backend's folder (its `.pulumi` lies inside), or undefined for any other backend. */
function fileBackendRoot(backendUrl: string): string | undefined {
  if (!backendUrl.startsWith("file://")) return undefined;
  const root = backendUrl.slice("file://".length).split("?")[0];
  return root.startsWith("~") ? path.join(os.homedir(), root.slice(1)) : root;
}

/** The backend the CLI will use: PULUMI_BACKEND_URL, else `pulumi login`'s current one, else the Cloud. */
function currentBackend(env: NodeJS.ProcessEnv): string {
  if (env.PULUMI_BACKEND_URL) return env.PULUMI_BACKEND_URL;
  const home = env.PULUMI_HOME || path.join(os.homedir(), ".pulumi");
  try {
    const creds = JSON.parse(fs.readFileSync(path.join(home, "credentials.json"), "utf8")) as { current?: string };
    if (creds.current) return creds.current;
  } catch {
    // not logged in: the CLI defaults to Pulumi Cloud
  }
  return "https://api.pulumi.com";
}

/** An operation the engine began and never saw end: the update was killed while it ran. */
export interface PendingOperation {
  /** creating, updating, deleting, reading, importing */
  type: string;
  urn: string;
}

/** The stack's pending operations, read from `pulumi stack export`. */
export async function pendingOperations(
  stack: string | undefined,
  opts: EngineOptions = {},
): Promise<PendingOperation[]> {
  const r = await runPulumi(["stack", "export", ...(stack ? ["--stack", stack] : [])], opts);
  if (r.code !== 0) throw new Error(`pulumi stack export exited ${r.code}: ${r.stderr.trim()}`);
  return parsePendingOperations(r.stdout);
}

/**
 * The pending operations of a `pulumi stack export` document (its deployment's pending_operations;
 * none when the stack has no deployment yet). Throws on anything that is not such a document.
 */
export function parsePendingOperations(exported: string): PendingOperation[] {
  const state = JSON.parse(exported) as { deployment?: DeploymentPart } | null;
  if (typeof state !== "object" || state === null || Array.isArray(state)) {
    throw new Error("pulumi stack export did not print a deployment");
  }
  return pendingOf(state.deployment);
}

/** What a deployment (an export's `deployment`, a checkpoint's `latest`) says of its pending operations. */
interface DeploymentPart {
  pending_operations?: { type?: string; resource?: { urn?: string } }[] | null;
}

function pendingOf(deployment: DeploymentPart | null | undefined): PendingOperation[] {
  return (deployment?.pending_operations ?? []).map((op) => ({
    type: op.type ?? "unknown",
    urn: op.resource?.urn ?? "(no urn)",
  }));
}

/**
 * The pending operations of a file backend's state file (the checkpoint the CLI writes, whose
 * `latest` is what `pulumi stack export` prints as `deployment`; none when the stack has no
 * deployment yet). Throws on anything that is not such a file.
 */
export function parseCheckpointPendingOperations(checkpoint: string): PendingOperation[] {
  const state = JSON.parse(checkpoint) as { checkpoint?: { latest?: DeploymentPart | null } } | null;
  if (typeof state !== "object" || state === null || typeof state.checkpoint !== "object" || !state.checkpoint) {
    throw new Error("not a Pulumi checkpoint");
  }
  return pendingOf(state.checkpoint.latest);
}

/**
 * STACK's state file in the file backend ENV selects, as the CLI keeps it: `.pulumi/stacks/<project>/
 * <stack>.json` (`.json.gz` where the backend compresses its state), or `.pulumi/stacks/<stack>.json`
 * in a backend from before projects. Undefined for any other backend, where there is no such file,
 * or where more than one is there (the CLI alone knows which it reads). STACK: organization/project/stack.
 */
export function fileBackendStateFile(stack: string, env: NodeJS.ProcessEnv): string | undefined {
  const root = fileBackendRoot(currentBackend(env));
  const [, project, short] = stack.split("/");
  if (root === undefined || !project || !short) return undefined;
  const stacks = path.join(root, ".pulumi", "stacks");
  const found = [path.join(stacks, project, short), path.join(stacks, short)]
    .flatMap((base) => [`${base}.json`, `${base}.json.gz`])
    .filter((f) => fs.statSync(f, { throwIfNoEntry: false })?.isFile());
  return found.length === 1 ? found[0] : undefined;
}

/** How many history entries lastUpdate reads: enough to reach past a few refreshes since the last up. */
const HISTORY_PAGE = 10;

/**
 * STACK's last `pulumi up` (the newest history entry of kind "update"), undefined when it has none
 * (never brought up). Measured on 3.276.0: an up that fails is recorded with result "failed"; the
 * file backend writes an entry only when an update ends, the service also while it runs
 * ("in-progress": its lock).
 */
export async function lastUpdate(stack: string, opts: EngineOptions = {}): Promise<UpdateRecord | undefined> {
  const r = await runPulumi(["stack", "history", "--json", "--page-size", String(HISTORY_PAGE), "--stack", stack], {
    timeoutMs: 120_000,
    ...opts,
  });
  if (r.code !== 0) throw new Error(`pulumi stack history exited ${r.code}: ${r.stderr.trim()}`);
  return parseLastUpdate(r.stdout);
}

/** The newest entry of kind "update" of a `pulumi stack history --json` document (newest first). */
export function parseLastUpdate(history: string): UpdateRecord | undefined {
  const entries = JSON.parse(history || "[]") as unknown;
  if (!Array.isArray(entries)) throw new Error("pulumi stack history did not print a list");
  const last = (entries as Partial<UpdateRecord>[]).find((e) => e?.kind === "update");
  return last && typeof last.result === "string" ? { ...last, kind: "update", result: last.result } : undefined;
}

/** The command that clears a stack's pending operations (a refresh; pending creates are dropped). */
export function clearPendingCommand(stack: string | undefined): string {
  return `pulumi refresh --clear-pending-creates --yes${stack ? ` --stack ${stack}` : ""}`;
}

/**
 * Two sentences on a stack's pending operations, or undefined when it has none: what they are, and
 * the command that clears them. A later update that succeeds does not clear them: the engine keeps
 * them until a refresh resolves them.
 */
export function pendingOperationsWarning(
  stack: string | undefined,
  ops: readonly PendingOperation[],
  dead: readonly StackLock[] = [],
): string | undefined {
  if (ops.length === 0) return undefined;
  const names = ops.map((op) => `${op.type} ${op.urn.split("::").pop() ?? op.urn}`).join(", ");
  // The refresh takes the stack's lock: one a dead process left (deadLocks) must go first.
  const commands =
    dead.length > 0
      ? `\`${cancelCommand(stack)}\` (the stopped update's lock is still there: ${dead.map(describeLock).join(", ")}), then \`${clearPendingCommand(stack)}\``
      : `\`${clearPendingCommand(stack)}\``;
  return (
    `stack ${stack ?? "(the selected one)"} has ${ops.length} pending operation(s) left by an update that was stopped while they ran ` +
    `(${names}): whether each finished is unknown. Check the host, then run ${commands} ` +
    `to clear them (gpuhost's steps are idempotent: the next \`up\` runs a dropped create again).`
  );
}
