// `gpuhost drift`: wraps `pulumi refresh --preview-only
// --expect-no-changes --json` (every ToolkitState re-probes its host, every VerifiedGeneration asks
// its service for one small generation, a FleetVerification compares its router's workers with the
// stack's; the engine runs the reads concurrently) and prints what drifted, grouped by host, service
// and router, with the expected value, the value found and how to repair it. Fit for cron: exit 0
// clean, 1 drift, and each kind of failure its own status (components/drift/outcome.ts); with
// --textfile DIR the check is also written as metrics for node_exporter's textfile collector, a
// failed check included (components/drift/metrics.ts). Before the refresh it looks whether the
// check should run at all (outcome.ts): not while an update holds the stack's lock (skipped), not
// after a failed update until a person acts (paused). With --repair, drift found runs `pulumi up`
// (at most --max-repairs a day, never twice for the same drift: components/drift/guard.ts), then
// checks again. The refresh takes no lock, so after it the lock and the history are looked at again:
// a result that an update overlapped is discarded (skipped, outcome.ts overlapped). A lock a dead
// process left is named, with `pulumi cancel` as what removes it.
import * as fs from "node:fs";
import {
  deadLocks,
  deadLockWarning,
  describeLock,
  engineMissing,
  type EngineOptions,
  lastUpdate,
  pendingOperations,
  pendingOperationsWarning,
  runPulumi,
  stackAccess,
  stackExists,
  stackLocks,
  type StackLock,
  STOP_GRACE_MS,
  upCommand,
} from "../engine/pulumi";
import {
  afterRepair,
  driftItems,
  type DriftState,
  pausedBy,
  readDriftState,
  repairHold,
  repairsToday,
  stateFile,
  type UpdateRecord,
  updateKey,
  writeDriftState,
} from "../components/drift/guard";
import { driftExposition, type RepairMetrics, writeTextfile } from "../components/drift/metrics";
import { DRIFT_OUTCOMES, type DriftFailure, engineFailure, exitCodeOfOutcome } from "../components/drift/outcome";
import { type DriftReport, formatReport, outcomeOf, parseRefreshOutput } from "../components/drift/report";
import { runCommand, UsageError, type CliIo } from "./common";
import type { CommandSpec } from "./options";

export const DRIFT = {
  name: "drift",
  about: `Re-probes every host's CUDA toolkit and units, checks that each service still generates and, in a
fleet, that the router's workers are the stack's, through \`pulumi refresh --preview-only --expect-no-changes\`,
and reports what no longer matches what was provisioned (nothing is changed). Fit for cron.`,
  flags: {
    stack: { type: "string", value: "NAME", description: "stack to check (default: the selected stack)" },
    json: { type: "boolean", description: "print the report as JSON instead of text" },
    textfile: {
      type: "path",
      value: "DIR",
      description:
        "also write the check as Prometheus metrics to DIR/gpuhost-drift-<stack>.prom for node_exporter's textfile collector (a failed check too)",
    },
    repair: {
      type: "boolean",
      description:
        "when drift is found, run the update (`pulumi up --yes --skip-preview`) and check again; at most --max-repairs a day, never twice for the same drift",
    },
    "max-repairs": {
      type: "integer",
      value: "N",
      default: 1,
      description: "the most updates --repair runs for a stack in a day (UTC)",
    },
    resume: {
      type: "boolean",
      description:
        "a person acted: check a stack paused by its failed last update (that failure is acknowledged), and let --repair run again for drift it already repaired once",
    },
  },
  exits: Object.values(DRIFT_OUTCOMES).map(({ code, meaning }) => [code, meaning] as const),
} as const satisfies CommandSpec;

/** The most a --repair update may take before it is stopped (the refresh has its own engine bounds). */
export const REPAIR_TIMEOUT_MS = 30 * 60_000;

export interface DriftDeps {
  /** Runs the engine (default: engine/pulumi.ts runPulumi). */
  runPulumi?: typeof runPulumi;
  /** The stack's pending operations (default: with the real engine only, engine/pulumi.ts). */
  pendingOperations?: typeof pendingOperations;
  /**
   * The stack's backend and secrets (default: engine/pulumi.ts stackAccess with the real engine; with a
   * stand-in engine, the stack as given, on the options the stand-in brings).
   */
  stackAccess?: typeof stackAccess;
  /** Whether the stack exists in its backend (default: with the real engine only, engine/pulumi.ts). */
  stackExists?: typeof stackExists;
  /** The locks an update holds on the stack (default: with the real engine only, engine/pulumi.ts). */
  stackLocks?: typeof stackLocks;
  /** The locks dead processes left on the stack (default: with the real engine only, engine/pulumi.ts). */
  deadLocks?: typeof deadLocks;
  /** The stack's last update (default: with the real engine only, engine/pulumi.ts). */
  lastUpdate?: typeof lastUpdate;
  /** The folder of the state files (default: components/drift/guard.ts stateDir). */
  stateDir?: string;
  /** The clock (ms since the epoch) the daily repair limit counts by (default: Date.now). */
  now?: () => number;
  out?: (text: string) => void;
  err?: (text: string) => void;
}

/** A stand-in engine's stack: as given, on the options the stand-in brings. */
const asGiven = (stack: string | undefined): ReturnType<typeof stackAccess> =>
  Promise.resolve({ stack, embedded: false, opts: {}, problem: undefined });

/** Build the refresh command line (exported for tests). */
export function refreshArgs(stack: string | undefined): string[] {
  return ["refresh", "--preview-only", "--expect-no-changes", "--json", ...(stack ? ["--stack", stack] : [])];
}

export function driftMain(argv: string[], deps: DriftDeps = {}): Promise<number> {
  const io: CliIo = {
    stdout: deps.out ? { write: deps.out } : process.stdout,
    stderr: deps.err ? { write: deps.err } : process.stderr,
  };
  // The engine is given time to cancel and stop its plugins (engine/pulumi.ts kills it after
  // STOP_GRACE_MS): gpuhost returns only once nothing it started is left.
  return runCommand(
    DRIFT,
    argv,
    io,
    (values, signal) =>
      drift(
        {
          stack: values.stack,
          json: values.json ?? false,
          textfile: values.textfile,
          repair: values.repair ?? false,
          maxRepairs: values["max-repairs"],
          resume: values.resume ?? false,
        },
        deps,
        signal,
      ),
    { interruptGraceMs: STOP_GRACE_MS + 3000 },
  );
}

/** DIR of --textfile, refused in one sentence unless it is a folder this process can write in. */
export function textfileDir(dir: string): string {
  try {
    if (!fs.statSync(dir).isDirectory()) throw new UsageError(`--textfile ${dir} is not a folder`);
    fs.accessSync(dir, fs.constants.W_OK);
  } catch (e) {
    if (e instanceof UsageError) throw e;
    throw new UsageError(
      `--textfile ${dir}: ${(e as NodeJS.ErrnoException).code === "ENOENT" ? "no such folder" : "not writable"}`,
    );
  }
  return dir;
}

interface DriftArgs {
  stack: string | undefined;
  json: boolean;
  textfile: string | undefined;
  repair: boolean;
  maxRepairs: number;
  resume: boolean;
}

/** The check, what --repair does, the report, the metrics: a list of stages. */
async function drift(args: DriftArgs, deps: DriftDeps, signal: AbortSignal): Promise<number> {
  const started = Date.now();
  const out = deps.out ?? ((t: string) => process.stdout.write(t));
  const err = deps.err ?? ((t: string) => process.stderr.write(t));
  const { stack, json } = args;
  if (stack !== undefined && !/^[A-Za-z0-9_./-]+$/.test(stack))
    throw new UsageError(`invalid stack name ${JSON.stringify(stack)}`);
  const dir = args.textfile === undefined ? undefined : textfileDir(args.textfile);

  // Nothing escapes as runCommand's generic 1, which is drift here: an unexpected error is the check's failure.
  const failedWith = (e: unknown): DriftReport => ({
    stack,
    hosts: [],
    services: [],
    fleet: [],
    otherChanges: [],
    errors: [(e as Error).message],
    failure: signal.aborted ? "interrupted" : "engine",
  });
  const session = new CheckSession(args, deps, signal, err);
  let report = await session.check().catch(failedWith);
  let repair: RepairMetrics | undefined;
  if (args.repair && outcomeOf(report) === "drift") {
    const repaired = await session
      .repair(report)
      .catch((e: unknown) => ({ report: failedWith(e), metrics: undefined }));
    report = repaired.report;
    repair = repaired.metrics;
  } else if (args.repair && session.state) {
    repair = { ran: false, today: repairsToday(session.state, session.now()), limit: args.maxRepairs };
  }
  const outcome = outcomeOf(report);
  // A failure said in one sentence on stderr (failed) has no report to print as text; JSON always has one.
  if (json) out(`${JSON.stringify({ ...report, outcome, exitCode: exitCodeOfOutcome(outcome), repair }, null, 2)}\n`);
  else if (report.errors.length > 0 || !report.failure) out(formatReport(report));
  if (dir !== undefined) {
    try {
      const timing = { endedAtMs: Date.now(), durationMs: Date.now() - started };
      writeTextfile(dir, report.stack, await driftExposition(report, outcome, timing, repair));
    } catch (e) {
      err(`gpuhost drift: the metrics file in ${dir} could not be written: ${(e as Error).message}\n`);
      return exitCodeOfOutcome("textfile");
    }
  }
  return exitCodeOfOutcome(outcome);
}

/**
 * One `gpuhost drift` run on one stack: its access, its state file (guard.ts), the checks (the
 * first, and the one after a repair) and the repair between them.
 */
class CheckSession {
  /** The stack's state, once the stack is known (read by the first check). */
  state: DriftState | undefined;
  private access: Awaited<ReturnType<typeof stackAccess>> | undefined;
  readonly now: () => number;
  /** --resume, for the first check only: the check after a repair never acknowledges that repair's failure. */
  private resume: boolean;
  /** The stack's last update as the check found it before its refresh (known: the history was read). */
  private before: { known: boolean; last: UpdateRecord | undefined } | undefined;
  /** The locks dead processes left on the stack, as the check found them (deadLocks). */
  private dead: StackLock[] = [];

  constructor(
    private readonly args: DriftArgs,
    private readonly deps: DriftDeps,
    private readonly signal: AbortSignal,
    private readonly err: (t: string) => void,
  ) {
    this.now = deps.now ?? Date.now;
    this.resume = args.resume;
  }

  /** The check: the stack's access, whether it may run now (held), the refresh. */
  async check(): Promise<DriftReport> {
    const { deps, err } = this;
    // One answer for which backend and secrets (engine/pulumi.ts stackAccess): an embedded stack on the
    // project's backend and passphrase, any other on the user's, refused in one sentence when it needs
    // a passphrase and none is set.
    const access = (this.access ??= await (deps.stackAccess ?? (deps.runPulumi ? asGiven : stackAccess))(
      this.args.stack,
    ));
    // Its problems: with a stack, only its secrets (secretsProviderProblem); without one, none is selected
    // (usage) or the engine is missing.
    if (access.problem)
      return failed(
        access.stack,
        access.stack !== undefined ? "auth" : engineMissing() ? "engine" : "usage",
        access.problem,
        err,
      );
    const name = access.stack;
    if (name === undefined) return refresh(name, access, deps, this.signal, err, []);
    const held = await this.held(name, access.opts);
    if (held) return held;
    const report = await refresh(name, access, deps, this.signal, err, this.dead);
    if (report.failure !== undefined) return report;
    const overlap = await this.overlap(name, access.opts);
    return overlap === undefined
      ? report
      : failed(
          name,
          "overlapped",
          `skipped: an update ran during the check (${overlap}); its result is discarded, and the next check runs as usual.`,
          err,
        );
  }

  /**
   * Whether an update ran while the refresh read (it takes no lock, so nothing stopped one): an
   * update's lock there now, or a history whose last update is not the one seen before the refresh
   * (one that began and ended meanwhile; the service's "in-progress" too). What it was, in words, or
   * undefined when none ran (or the history could not be read before: then the lock alone decides).
   */
  private async overlap(name: string, opts: EngineOptions): Promise<string | undefined> {
    const locks = this.liveLocks(name, opts);
    if (locks.length > 0) return `it holds the stack's lock now: ${locks.map(describeLock).join(", ")}`;
    const before = this.before;
    const history = this.deps.lastUpdate ?? (this.deps.runPulumi ? undefined : lastUpdate);
    if (!history || !before?.known) return undefined;
    const now = await history(name, opts).catch(() => "unknown" as const);
    if (now === "unknown") return undefined;
    const key = (u: UpdateRecord | undefined) => (u ? `${u.version ?? ""} ${u.startTime ?? ""} ${u.result}` : "none");
    if (key(now) === key(before.last)) return undefined;
    return `the stack's last update is now one started ${now?.startTime ?? "?"} (${now?.result ?? "?"})`;
  }

  /** The locks live updates hold on the stack (file backend), none where they cannot be read. */
  private liveLocks(name: string, opts: EngineOptions): StackLock[] {
    return (this.deps.stackLocks ?? (this.deps.runPulumi ? undefined : stackLocks))?.(name, opts) ?? [];
  }

  /**
   * A report when the check must not run now, else undefined: an update holds the lock (locked), or
   * the last update failed and no one has acted since (paused). --resume acknowledges that failure.
   */
  private async held(name: string, opts: EngineOptions): Promise<DriftReport | undefined> {
    const { deps, err } = this;
    const locks = this.liveLocks(name, opts);
    if (locks.length > 0) {
      return failed(
        name,
        "locked",
        `skipped: an update holds stack ${name}'s lock (${locks.map(describeLock).join(", ")}); the next check runs as usual.`,
        err,
      );
    }
    // A dead process's lock stops no read, so the check runs; every update and refresh would fail on it.
    this.dead = (deps.deadLocks ?? (deps.runPulumi ? undefined : deadLocks))?.(name, opts) ?? [];
    const stale = deadLockWarning(name, this.dead);
    if (stale) err(`warning: ${stale}\n`);
    const resume = this.resume;
    this.resume = false;
    const file = stateFile(name, deps.stateDir);
    const state = (this.state ??= readDriftState(file, this.now()));
    if (resume && state.lastRepaired) {
      delete state.lastRepaired;
      writeDriftState(file, state);
    }
    const history = deps.lastUpdate ?? (deps.runPulumi ? undefined : lastUpdate);
    // A history that cannot be read (no such stack, the engine failing) decides nothing: the refresh
    // then fails in its own words (no-stack, auth, engine).
    const last = history ? await history(name, opts).catch(() => "unknown" as const) : "unknown";
    this.before = { known: last !== "unknown", last: last === "unknown" ? undefined : last };
    if (last === "unknown") return undefined;
    // The service records an update while it runs: its lock, as the file backend's lock files are.
    if (last?.result === "in-progress")
      return failed(
        name,
        "locked",
        `skipped: an update of stack ${name} is in progress (since ${last.startTime ?? "?"}); the next check runs as usual.`,
        err,
      );
    if (last && pausedBy(last, state)) {
      if (!resume)
        return failed(
          name,
          "paused",
          `paused: the last update of stack ${name} (started ${last.startTime ?? "?"}) failed, so nothing is checked until a person acts: fix what failed and run \`${upCommand(name, this.access?.embedded ?? false)}\`, or run \`gpuhost drift --stack ${name} --resume\` to check it as it is.`,
          err,
        );
      state.acknowledged = updateKey(last);
      writeDriftState(file, state);
      err(
        `gpuhost drift: resumed: the failed update of stack ${name} (started ${last.startTime ?? "?"}) is acknowledged.\n`,
      );
    }
    return undefined;
  }

  /**
   * --repair on REPORT's drift: the update, unless today's repairs are used up or it ran for this very
   * drift before (guard.ts repairHold), then the check again (which pauses when the update failed).
   */
  async repair(report: DriftReport): Promise<{ report: DriftReport; metrics: RepairMetrics }> {
    const { args, deps, err } = this;
    const name = report.stack;
    const state = this.state;
    if (name === undefined || state === undefined || this.access === undefined)
      throw new Error("--repair needs a named stack, and its check to have run");
    const file = stateFile(name, deps.stateDir);
    const items = driftItems(report);
    // A dead process's lock: the update would fail on it and use up a repair (the warning said what removes it).
    if (this.dead.length > 0) {
      err(`gpuhost drift: not repaired: ${deadLockWarning(name, this.dead)}\n`);
      return {
        report,
        metrics: { ran: false, held: "dead-lock", today: repairsToday(state, this.now()), limit: args.maxRepairs },
      };
    }
    const held = repairHold(state, items, this.now(), args.maxRepairs);
    if (held) {
      err(
        held === "same-drift"
          ? `gpuhost drift: not repaired: --repair ran the update for this same drift before and it came back; after a look, \`--resume\` lets it run again.\n`
          : `gpuhost drift: not repaired: --repair ran ${repairsToday(state, this.now())} update(s) for stack ${name} today (--max-repairs ${args.maxRepairs}).\n`,
      );
      return { report, metrics: { ran: false, held, today: repairsToday(state, this.now()), limit: args.maxRepairs } };
    }
    // Counted before it runs: an update that is killed half-way still used its turn.
    this.state = afterRepair(state, items, this.now());
    writeDriftState(file, this.state);
    err(`gpuhost drift: repairing stack ${name}: pulumi up (${items.length} item(s) drifted)\n`);
    const run = deps.runPulumi ?? runPulumi;
    const up = await run(["up", "--yes", "--skip-preview", "--stack", name], {
      timeoutMs: REPAIR_TIMEOUT_MS,
      ...this.access.opts,
      signal: this.signal,
    });
    if (up.code !== 0) {
      // pulumi prints an update's errors on stdout (its diagnostics), the CLI's own on stderr
      const why = `${up.stdout}\n${up.stderr}`.split("\n").filter((l) => /error:/.test(l));
      err(
        `gpuhost drift: the repair's pulumi up exited ${up.code}: ${why
          .slice(-3)
          .map((l) => l.trim())
          .join(" | ")}\n`,
      );
    }
    const metrics = {
      ran: true,
      updateExit: up.code,
      today: repairsToday(this.state, this.now()),
      limit: args.maxRepairs,
    };
    if (this.signal.aborted) return { report: { ...report, failure: "interrupted" }, metrics };
    return { report: await this.check(), metrics };
  }
}

/** A report of what never reached the engine's events: FAILURE, said in one sentence on stderr. */
function failed(stack: string | undefined, failure: DriftFailure, why: string, err: (t: string) => void): DriftReport {
  err(`gpuhost drift: ${why}\n`);
  return { stack, hosts: [], services: [], fleet: [], otherChanges: [], errors: [], failure };
}

/** The refresh itself on the stack NAME: the report, with its failure when there is one. */
async function refresh(
  name: string | undefined,
  access: Awaited<ReturnType<typeof stackAccess>>,
  deps: DriftDeps,
  signal: AbortSignal,
  err: (t: string) => void,
  dead: readonly StackLock[],
): Promise<DriftReport> {
  let report: DriftReport;
  try {
    const run = deps.runPulumi ?? runPulumi;
    // Streaming JSON: one event per line, and the refresh's output events carry the fresh read.
    const env = { PULUMI_ENABLE_STREAMING_JSON_PREVIEW: "true" };
    const result = await run(refreshArgs(name), { ...access.opts, env, signal });
    report = parseRefreshOutput(result.stdout, name);
    report.engineExit = result.code;
    const stderr = result.stderr.trim();
    // The engine's status and stderr name the failures that leave no verdict (outcome.ts); otherwise
    // the events decide, and stderr only explains an engine that produced none.
    report.failure = signal.aborted ? "interrupted" : engineFailure(result.code, stderr);
    if ((report.errors.length > 0 || report.failure) && stderr !== "")
      report.errors.push(`pulumi: ${stderr.split("\n").slice(-5).join(" | ")}`);
  } catch (e) {
    report = { stack: name, hosts: [], services: [], fleet: [], otherChanges: [], errors: [(e as Error).message] };
    if (signal.aborted) report.failure = "interrupted";
  }
  // A stack never brought up has nothing to refresh: say that, and how to bring it up, rather than
  // the engine's error. Asked only when the refresh failed, so a clean check costs nothing more.
  const exists = deps.stackExists ?? (deps.runPulumi ? undefined : stackExists);
  if (exists && name !== undefined && report.errors.length > 0 && !signal.aborted) {
    if ((await exists(name, access.opts)) === false) {
      return failed(
        name,
        "no-stack",
        `stack ${name} has not been brought up (${access.embedded ? "the project's embedded backend, .gpuhost/state," : "your backend"} holds no such stack): run \`${upCommand(name, access.embedded)}\` first.`,
        err,
      );
    }
  }
  // A killed update leaves pending operations that no later update clears: say so on every check.
  const pending = deps.pendingOperations ?? (deps.runPulumi ? undefined : pendingOperations);
  if (pending && !signal.aborted) {
    const warning = pendingOperationsWarning(name, await pending(name, access.opts).catch(() => []), dead);
    if (warning) err(`warning: ${warning}\n`);
  }
  return report;
}
