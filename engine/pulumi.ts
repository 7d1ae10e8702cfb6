/**
 * Runs the Pulumi CLI engine/setup.sh chose (an official install when there is a recent enough one,
 * else the offline build; .gpuhost/engine/bin/pulumi names it) with the right backend and secrets:
 *   - the embedded `sim` stack (the demo's): its own file backend in .gpuhost/state and the documented
 *     non-secret passphrase, since it holds no credentials and anyone must be able to run it;
 *   - every other stack: the user's backend (`pulumi login`, PULUMI_BACKEND_URL) and secrets provider,
 *     untouched; requireSecretsProvider refuses a passphrase stack with no passphrase set.
 * The plugins are the engine's own business: beside the CLI (official or ours) and in the user's plugin
 * cache; nothing of gpuhost goes first on PATH. The CLI runs under umask 077, so the state and backups a
 * file backend writes are readable by the user alone.
 */
import { spawn, spawnSync } from "node:child_process";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { parse as parseYaml } from "yaml";
import { projectRoot } from "../project-files";

/** The gpuhost project root (engine/pulumi.ts runs from <root>/engine or <root>/dist/engine). */
export const PROJECT_ROOT = projectRoot();

/** The stack the demo runs, on the embedded backend with the documented passphrase. */
export const EMBEDDED_STACK = "sim";
/** Every stack of stacks/ that runs on the embedded backend: simulated hosts only, no credentials. */
export const EMBEDDED_STACKS: readonly string[] = [EMBEDDED_STACK, "sim-fleet"];

/**
 * The passphrase of the embedded `sim` stack only. It is deliberately not a secret: that stack holds no
 * credentials and anyone must be able to run it. No other stack ever gets it.
 */
export const EMBEDDED_PASSPHRASE = "gpuhost-embedded-stacks-passphrase-not-a-secret";

export interface EngineOptions {
  /** Project directory (holds Pulumi.yaml). Default: the gpuhost project. */
  cwd?: string;
  /** Run on the embedded backend (.gpuhost/state) with the documented passphrase: the `sim` stack only. */
  embedded?: boolean;
  /** A file backend in this folder (tests' throwaway stacks); otherwise the user's backend. */
  stateDir?: string;
  env?: NodeJS.ProcessEnv;
  /** Called with each chunk of output as it arrives (for live progress). */
  onOutput?: (chunk: string) => void;
  /** Kill the CLI after this many milliseconds. */
  timeoutMs?: number;
  /**
   * Stops the CLI: SIGINT first (the engine cancels, and stops its plugins), SIGKILL when it is
   * still there STOP_GRACE_MS later (the plugins then end by themselves when they see it gone).
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

export function runPulumi(args: string[], opts: EngineOptions = {}): Promise<EngineResult> {
  const bin = pulumiBin();
  if (!fs.existsSync(bin)) {
    return Promise.reject(new Error(`${bin} is missing: run \`npm run setup\` (engine/setup.sh) first`));
  }
  const env = engineEnv(opts);
  const repaired = repairTornMetadata(currentBackend(env));
  if (repaired.length > 0) {
    process.stderr.write(
      `gpuhost: removed ${repaired.length} empty or torn metadata file(s) a killed pulumi left in the file backend (the engine could not load the stack with them): ${repaired.join(", ")}\n`,
    );
  }
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
      resolve({ code: code ?? 1, stdout, stderr });
    });
  });
}

/** Selects STACK, creating it when it does not exist yet (the embedded one with the passphrase provider). */
export async function ensureStack(stack: string, opts: EngineOptions = {}): Promise<void> {
  const sel = await runPulumi(["stack", "select", stack], opts);
  if (sel.code === 0) return;
  const provider = opts.embedded ? ["--secrets-provider", "passphrase"] : [];
  const init = await runPulumi(["stack", "init", stack, ...provider], opts);
  if (init.code !== 0) throw new Error(`pulumi stack init ${stack} failed:\n${init.stdout}${init.stderr}`);
}

/**
 * Why STACK cannot run with the secrets this environment provides, as one sentence; undefined when it
 * can. A stack on the passphrase provider (its config file has an encryption salt or says so, or it has
 * no provider yet on a file backend, where passphrase is the default) needs PULUMI_CONFIG_PASSPHRASE or
 * PULUMI_CONFIG_PASSPHRASE_FILE; a KMS or service provider needs neither. STACK undefined: the selected
 * stack, asked of the CLI.
 */
export function secretsProviderProblem(stack: string | undefined, opts: EngineOptions = {}): string | undefined {
  const env = engineEnv(opts);
  if (env.PULUMI_CONFIG_PASSPHRASE || env.PULUMI_CONFIG_PASSPHRASE_FILE) return undefined;
  const cwd = opts.cwd ?? PROJECT_ROOT;
  const name = stack ?? selectedStack(opts);
  if (name === undefined) return undefined; // no stack selected: the CLI says so itself
  const stackFile = stackConfigFile(cwd, name);
  const doc = (stackFile && fs.existsSync(stackFile) ? parseYaml(fs.readFileSync(stackFile, "utf8")) : null) as {
    secretsprovider?: string;
    encryptionsalt?: string;
  } | null;
  const provider = doc?.secretsprovider;
  const passphrase =
    provider === "passphrase" ||
    (provider === undefined && (doc?.encryptionsalt !== undefined || currentBackend(env).startsWith("file://")));
  if (!passphrase) return undefined;
  return (
    `stack ${name} uses the passphrase secrets provider and no passphrase is set: set PULUMI_CONFIG_PASSPHRASE ` +
    `or PULUMI_CONFIG_PASSPHRASE_FILE (gpuhost's documented passphrase is for the embedded ${EMBEDDED_STACK} stack only), ` +
    `or move the stack to a KMS provider with \`pulumi stack change-secrets-provider\`.`
  );
}

function selectedStack(opts: EngineOptions): string | undefined {
  const r = spawnSync(pulumiBin(), ["stack", "--show-name", "--non-interactive"], {
    cwd: opts.cwd ?? PROJECT_ROOT,
    env: engineEnv(opts),
    encoding: "utf8",
    timeout: 60_000,
  });
  const name = r.status === 0 ? r.stdout.trim() : "";
  return name || undefined;
}

/** <stackConfigDir>/Pulumi.<stack>.yaml of the project in CWD (the last part of org/project/stack). */
function stackConfigFile(cwd: string, stack: string): string | undefined {
  const projectFile = ["Pulumi.yaml", "Pulumi.yml"].map((f) => path.join(cwd, f)).find((f) => fs.existsSync(f));
  if (!projectFile) return undefined;
  const project = (parseYaml(fs.readFileSync(projectFile, "utf8")) ?? {}) as { stackConfigDir?: string };
  const short = stack.split("/").pop()!;
  return path.join(cwd, project.stackConfigDir ?? ".", `Pulumi.${short}.yaml`);
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
 */
export function repairTornMetadata(backendUrl: string): string[] {
  if (!backendUrl.startsWith("file://")) return [];
  let root = backendUrl.slice("file://".length).split("?")[0];
  if (root.startsWith("~")) root = path.join(os.homedir(), root.slice(1));
  const removed: string[] = [];
  const walk = (dir: string, depth: number) => {
    let entries: fs.Dirent[];
    try {
      entries = fs.readdirSync(dir, { withFileTypes: true });
    } catch {
      return;
    }
    for (const e of entries) {
      const p = path.join(dir, e.name);
      if (e.isDirectory() && depth < 4) walk(p, depth + 1);
      else if (e.isFile() && e.name.endsWith(".attrs")) {
        try {
          JSON.parse(fs.readFileSync(p, "utf8"));
        } catch {
          fs.rmSync(p, { force: true });
          removed.push(p);
        }
      }
    }
  };
  for (const sub of ["stacks", "locks"]) walk(path.join(root, ".pulumi", sub), 0);
  return removed;
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
  const state = JSON.parse(exported) as {
    deployment?: { pending_operations?: { type?: string; resource?: { urn?: string } }[] | null };
  } | null;
  if (typeof state !== "object" || state === null || Array.isArray(state)) {
    throw new Error("pulumi stack export did not print a deployment");
  }
  return (state.deployment?.pending_operations ?? []).map((op) => ({
    type: op.type ?? "unknown",
    urn: op.resource?.urn ?? "(no urn)",
  }));
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
): string | undefined {
  if (ops.length === 0) return undefined;
  const names = ops.map((op) => `${op.type} ${op.urn.split("::").pop() ?? op.urn}`).join(", ");
  return (
    `stack ${stack ?? "(the selected one)"} has ${ops.length} pending operation(s) left by an update that was stopped while they ran ` +
    `(${names}): whether each finished is unknown. Check the host, then run \`${clearPendingCommand(stack)}\` ` +
    `to clear them (gpuhost's steps are idempotent: the next \`up\` runs a dropped create again).`
  );
}
