/**
 * The program's own warning about pending operations (issue 19, point 4): a `pulumi up` killed while
 * a step ran leaves that step in the stack's state as a pending operation, and the engine keeps a
 * pending create through every later update until `pulumi refresh --clear-pending-creates`. The
 * engine says so itself only on an update that does not refresh (deploy/deployment_executor.go), and
 * Pulumi.yaml's `refresh: always` makes every `up` refresh: so the program, which runs under every
 * plain `pulumi up` and `pulumi preview`, reads the stack's pending operations and warns once,
 * naming them and the command that clears them (engine/pulumi.ts words it, as for `gpuhost drift`).
 *
 * The engine passes the program nothing about the state. On a file backend the program reads the
 * stack's state file itself, as the CLI would (a CLI start cost 0.3 s of CPU in every `up` and
 * preview); elsewhere it asks the CLI that runs it: `pulumi stack export` of this stack, by its fully
 * qualified name. Either is read before the program registers any resource, and blocks it
 * meanwhile: a checkpoint written later in the update holds this update's own steps in flight as
 * pending operations too, which must not be reported as left by an earlier one. Neither needs
 * secrets (nothing is decrypted), and a file backend does not lock the stack for them. Whatever goes
 * wrong (no CLI found, export failed or too slow) costs a debug line, never the update.
 */
import { spawnSync } from "node:child_process";
import * as fs from "node:fs";
import * as path from "node:path";
import * as zlib from "node:zlib";
import * as pulumi from "@pulumi/pulumi";
import {
  deadLocks,
  fileBackendStateFile,
  parseCheckpointPendingOperations,
  type PendingOperation,
  parsePendingOperations,
  pendingOperationsWarning,
  pulumiBin,
} from "../engine/pulumi";

/** Bound on the export: it took 0.35 s median, 0.54 s at most, in a no-op up on 2 cores at load 9 (docs/recovery.md). */
export const EXPORT_TIMEOUT_MS = 15_000;

/** The organization a file (DIY) backend gives every stack. */
const DIY_ORGANIZATION = "organization";

/** The parent pid in a /proc/<pid>/stat line ("pid (comm) state ppid ..."; comm may hold ") "). */
export function parentPidOfStat(stat: string): number | undefined {
  const fields = stat
    .slice(stat.lastIndexOf(")") + 1)
    .trim()
    .split(/\s+/);
  const ppid = Number(fields[1]);
  return Number.isInteger(ppid) && ppid > 0 ? ppid : undefined;
}

/**
 * The executables of this process's ancestors, nearest first (Linux's /proc; none elsewhere): the
 * program's parent is the language host, whose parent is the CLI running the update.
 */
function ancestorExecutables(depth = 6): string[] {
  const exes: string[] = [];
  let pid: number | undefined = process.ppid;
  for (let i = 0; i < depth && pid !== undefined && pid > 1; i++) {
    try {
      exes.push(fs.readlinkSync(`/proc/${pid}/exe`));
      pid = parentPidOfStat(fs.readFileSync(`/proc/${pid}/stat`, "utf8"));
    } catch {
      break;
    }
  }
  return exes;
}

function isExecutable(file: string): boolean {
  try {
    fs.accessSync(file, fs.constants.X_OK);
    return fs.statSync(file).isFile();
  } catch {
    return false;
  }
}

export interface CliSources {
  /** Executables of this process's ancestors, nearest first. */
  ancestors: readonly string[];
  /** The PATH to search. */
  pathEnv: string | undefined;
  /** The CLI engine/setup.sh chose for this checkout (.gpuhost/engine/bin/pulumi). */
  projectCli: string;
}

/**
 * The Pulumi CLI to ask: the one running this update when an ancestor is a `pulumi` (same version,
 * same login and PULUMI_HOME), else `pulumi` on PATH, else the checkout's own; undefined when none.
 */
export function findPulumiCli(
  sources: CliSources = {
    ancestors: ancestorExecutables(),
    pathEnv: process.env.PATH,
    projectCli: pulumiBin(),
  },
): string | undefined {
  // A binary replaced while it runs reads "<path> (deleted)": not one to start again.
  const running = sources.ancestors.find((exe) => path.basename(exe) === "pulumi" && isExecutable(exe));
  if (running) return running;
  for (const dir of (sources.pathEnv ?? "").split(path.delimiter)) {
    if (dir && isExecutable(path.join(dir, "pulumi"))) return path.join(dir, "pulumi");
  }
  return isExecutable(sources.projectCli) ? sources.projectCli : undefined;
}

/**
 * The environment of the export: the program's, less what the export does not need and must not see
 * in a process listing: the decrypted config (PULUMI_CONFIG), the passphrase, the language host's
 * settings. The backend (PULUMI_BACKEND_URL, PULUMI_HOME, an access token) stays.
 */
export function exportEnv(env: NodeJS.ProcessEnv): NodeJS.ProcessEnv {
  const out: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(env)) {
    if (/^PULUMI_CONFIG/.test(k) || k.startsWith("PULUMI_NODEJS_")) continue;
    out[k] = v;
  }
  return { ...out, PULUMI_SKIP_UPDATE_CHECK: "true", NO_COLOR: "1" };
}

/**
 * Operations an earlier update left. The stack's own resource is registered before the program
 * runs, so its create (a new stack) may be in flight in the checkpoint the export reads.
 */
export function earlierOperations(ops: readonly PendingOperation[]): PendingOperation[] {
  return ops.filter((op) => op.urn.split("::")[2] !== "pulumi:pulumi:Stack");
}

/** The stack's name as `pulumi --stack` takes it: short on a file backend, with its organization elsewhere. */
export function stackArgument(organization: string, project: string, stack: string): string {
  return organization === DIY_ORGANIZATION ? stack : `${organization}/${project}/${stack}`;
}

/** `pulumi stack export` of STACK (fully qualified) with CLI: its pending operations, or why not. */
export function readPendingOperations(
  cli: string,
  stack: string,
  env: NodeJS.ProcessEnv,
  timeoutMs = EXPORT_TIMEOUT_MS,
): PendingOperation[] | string {
  const r = spawnSync(cli, ["stack", "export", "--stack", stack, "--non-interactive"], {
    env: exportEnv(env),
    encoding: "utf8",
    timeout: timeoutMs,
    killSignal: "SIGKILL",
    maxBuffer: 512 * 1024 * 1024,
    stdio: ["ignore", "pipe", "pipe"],
  });
  if (r.error) return `${cli} stack export: ${r.error.message}`;
  if (r.status !== 0) return `${cli} stack export exited ${r.status ?? r.signal}: ${r.stderr.trim()}`;
  try {
    return parsePendingOperations(r.stdout);
  } catch (e) {
    return `${cli} stack export: ${(e as Error).message}`;
  }
}

/**
 * STACK's (organization/project/stack) pending operations read straight from its file backend's
 * state file, the one `pulumi stack export` would print them from, without starting the CLI (the
 * export cost about 0.3 s of CPU in every program run); undefined where that cannot be done (another
 * backend, no single state file, one this does not read): the CLI reads those.
 */
export function readPendingOperationsFromFile(
  stack: string,
  env: NodeJS.ProcessEnv,
): { ops: PendingOperation[]; file: string } | undefined {
  const file = fileBackendStateFile(stack, env);
  if (file === undefined) return undefined;
  try {
    const raw = fs.readFileSync(file);
    return {
      ops: parseCheckpointPendingOperations((file.endsWith(".gz") ? zlib.gunzipSync(raw) : raw).toString("utf8")),
      file,
    };
  } catch {
    return undefined;
  }
}

/** STACK's pending operations and where they were read, or why they could not be. */
function pendingOperationsOf(stack: string): { ops: PendingOperation[]; from: string } | string {
  const fromFile = readPendingOperationsFromFile(stack, process.env);
  if (fromFile) return { ops: fromFile.ops, from: fromFile.file };
  const cli = findPulumiCli();
  if (!cli) return "no pulumi CLI found (PATH, .gpuhost/engine/bin)";
  const ops = readPendingOperations(cli, stack, process.env);
  return typeof ops === "string" ? ops : { ops, from: `${cli} stack export` };
}

/**
 * Under the engine (`pulumi up`, `pulumi preview`): one warning when an earlier update left pending
 * operations. Call it before the program registers any resource.
 */
export function warnPendingOperations(): void {
  // Only a real engine run: under Pulumi's mocks (test/mocks) there is no stack to export.
  if (!process.env.PULUMI_NODEJS_ENGINE) return;
  const org = pulumi.getOrganization();
  const project = pulumi.getProject();
  const stack = pulumi.getStack();
  const started = performance.now();
  const read = pendingOperationsOf(`${org}/${project}/${stack}`);
  const took = `${((performance.now() - started) / 1000).toFixed(2)} s`;
  if (typeof read === "string") {
    void pulumi.log.debug(`pending operations not checked (${took}): ${read}`);
    return;
  }
  void pulumi.log.debug(`pending operations read from ${read.from} in ${took}: ${read.ops.length}`);
  // Under `preview` (no lock taken) a dead process's lock may be there, and the refresh would fail on it.
  const dead = deadLocks(`${org}/${project}/${stack}`);
  const warning = pendingOperationsWarning(stackArgument(org, project, stack), earlierOperations(read.ops), dead);
  if (warning) void pulumi.log.warn(warning);
}
