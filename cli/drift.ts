// `gpuhost drift`: wraps `pulumi refresh --preview-only
// --expect-no-changes --json` (every ToolkitState re-probes its host, every VerifiedGeneration asks
// its service for one small generation, a FleetVerification compares its router's workers with the
// stack's; the engine runs the reads concurrently) and prints what drifted, grouped by host, service
// and router, with the expected value, the value found and how to repair it. Fit for cron: exit 0 clean, 1 drift, 2 error, 130
// interrupted (the engine and everything it started are stopped first).
import {
  EMBEDDED_STACK,
  pendingOperations,
  pendingOperationsWarning,
  runPulumi,
  secretsProviderProblem,
  STOP_GRACE_MS,
} from "../engine/pulumi";
import { type DriftReport, exitCodeOf, formatReport, parseRefreshOutput } from "../components/drift/report";
import { EXIT, runCommand, UsageError, type CliIo } from "./common";
import type { CommandSpec } from "./options";

export const DRIFT = {
  name: "drift",
  about: `Re-probes every host's CUDA toolkit and units, checks that each service still generates and, in a
fleet, that the router's workers are the stack's, through \`pulumi refresh --preview-only --expect-no-changes\`,
and reports what no longer matches what was provisioned (nothing is changed). Fit for cron.`,
  flags: {
    stack: { type: "string", value: "NAME", description: "stack to check (default: the selected stack)" },
    json: { type: "boolean", description: "print the report as JSON instead of text" },
  },
  exits: [
    [EXIT.ok, "clean"],
    [EXIT.failed, "drift"],
    [EXIT.usage, "usage, or an error (a host could not be probed, or the engine failed)"],
    [EXIT.interrupted, "interrupted"],
  ],
} as const satisfies CommandSpec;

export interface DriftDeps {
  /** Runs the engine (default: engine/pulumi.ts runPulumi). */
  runPulumi?: typeof runPulumi;
  /** The stack's pending operations (default: with the real engine only, engine/pulumi.ts). */
  pendingOperations?: typeof pendingOperations;
  /** Why the stack cannot run with the secrets at hand (default: with the real engine only). */
  secretsProblem?: (stack: string | undefined) => string | undefined;
  out?: (text: string) => void;
  err?: (text: string) => void;
}

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
  return runCommand(DRIFT, argv, io, (values, signal) => drift(values.stack, values.json ?? false, deps, signal), {
    interruptGraceMs: STOP_GRACE_MS + 3000,
  });
}

async function drift(stack: string | undefined, json: boolean, deps: DriftDeps, signal: AbortSignal): Promise<number> {
  const out = deps.out ?? ((t: string) => process.stdout.write(t));
  const err = deps.err ?? ((t: string) => process.stderr.write(t));
  if (stack !== undefined && !/^[A-Za-z0-9_./-]+$/.test(stack))
    throw new UsageError(`invalid stack name ${JSON.stringify(stack)}`);

  // The embedded sim stack on its own backend and passphrase; any other on the user's backend and
  // secrets provider, refused in one sentence when it needs a passphrase and none is set.
  const embedded = stack === EMBEDDED_STACK;
  const check =
    deps.secretsProblem ?? (deps.runPulumi ? undefined : (s: string | undefined) => secretsProviderProblem(s));
  const problem = embedded ? undefined : check?.(stack);
  if (problem) {
    err(`gpuhost drift: ${problem}\n`);
    return EXIT.usage;
  }

  let report: DriftReport;
  try {
    const run = deps.runPulumi ?? runPulumi;
    // Streaming JSON: one event per line, and the refresh's output events carry the fresh read.
    const env = { PULUMI_ENABLE_STREAMING_JSON_PREVIEW: "true" };
    const result = await run(refreshArgs(stack), embedded ? { embedded, env, signal } : { env, signal });
    report = parseRefreshOutput(result.stdout, stack);
    const stderr = result.stderr.trim();
    // pulumi exits non-zero both for drift (--expect-no-changes) and for errors (pulumi#8992):
    // the events decide; stderr only explains an engine that produced no verdict.
    if (report.errors.length > 0 && stderr !== "")
      report.errors.push(`pulumi: ${stderr.split("\n").slice(-5).join(" | ")}`);
  } catch (e) {
    report = { stack, hosts: [], services: [], fleet: [], otherChanges: [], errors: [(e as Error).message] };
  }
  // A killed update leaves pending operations that no later update clears: say so on every check.
  const pending = deps.pendingOperations ?? (deps.runPulumi ? undefined : pendingOperations);
  if (pending && !signal.aborted) {
    const warning = pendingOperationsWarning(stack, await pending(stack, { embedded }).catch(() => []));
    if (warning) err(`warning: ${warning}\n`);
  }
  out(json ? `${JSON.stringify({ ...report, exitCode: exitCodeOf(report) }, null, 2)}\n` : formatReport(report));
  return exitCodeOf(report);
}
