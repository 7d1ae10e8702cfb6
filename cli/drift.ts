// `gpuhost drift [--stack NAME] [--json]`: wraps `pulumi refresh --preview-only
// --expect-no-changes --json` (every ToolkitState re-probes its host; the engine runs the reads
// of several hosts concurrently) and prints what drifted, grouped by host, with the expected
// value, the value found and how to repair it. Fit for cron: exit 0 clean, 1 drift, 2 error.
import { EMBEDDED_STACK, runPulumi, secretsProviderProblem } from "../engine/pulumi";
import { type DriftReport, exitCodeOf, formatReport, parseRefreshOutput } from "../components/drift/report";

export const DRIFT_USAGE = `usage: gpuhost drift [--stack NAME] [--json]

Re-probes every host's CUDA toolkit through \`pulumi refresh --preview-only --expect-no-changes\`
and reports what no longer matches what was provisioned (nothing is changed).
  --stack NAME   stack to check (default: the selected stack)
  --json         print the report as JSON instead of text
Exit status: 0 clean, 1 drift, 2 error (a host could not be probed, or the engine failed).
`;

export interface DriftDeps {
  /** Runs the engine (default: engine/pulumi.ts runPulumi). */
  runPulumi?: typeof runPulumi;
  /** Why the stack cannot run with the secrets at hand (default: with the real engine only). */
  secretsProblem?: (stack: string | undefined) => string | undefined;
  out?: (text: string) => void;
  err?: (text: string) => void;
}

/** Build the refresh command line (exported for tests). */
export function refreshArgs(stack: string | undefined): string[] {
  return ["refresh", "--preview-only", "--expect-no-changes", "--json", ...(stack ? ["--stack", stack] : [])];
}

export async function driftMain(argv: string[], deps: DriftDeps = {}): Promise<number> {
  const out = deps.out ?? ((t: string) => process.stdout.write(t));
  const err = deps.err ?? ((t: string) => process.stderr.write(t));
  let stack: string | undefined;
  let json = false;
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (a === "--json") json = true;
    else if (a === "--stack" && argv[i + 1] !== undefined && !argv[i + 1].startsWith("--")) stack = argv[++i];
    else if (a.startsWith("--stack=")) stack = a.slice("--stack=".length);
    else if (a === "--help" || a === "-h") {
      out(DRIFT_USAGE);
      return 0;
    } else {
      err(`gpuhost drift: unexpected argument ${JSON.stringify(a)}\n${DRIFT_USAGE}`);
      return 2;
    }
  }
  if (stack !== undefined && !/^[A-Za-z0-9_./-]+$/.test(stack)) {
    err(`gpuhost drift: invalid stack name ${JSON.stringify(stack)}\n`);
    return 2;
  }

  // The embedded sim stack on its own backend and passphrase; any other on the user's backend and
  // secrets provider, refused in one sentence when it needs a passphrase and none is set.
  const embedded = stack === EMBEDDED_STACK;
  const check =
    deps.secretsProblem ?? (deps.runPulumi ? undefined : (s: string | undefined) => secretsProviderProblem(s));
  const problem = embedded ? undefined : check?.(stack);
  if (problem) {
    err(`gpuhost drift: ${problem}\n`);
    return 2;
  }

  let report: DriftReport;
  try {
    const run = deps.runPulumi ?? runPulumi;
    // Streaming JSON: one event per line, and the refresh's output events carry the fresh read.
    const env = { PULUMI_ENABLE_STREAMING_JSON_PREVIEW: "true" };
    const result = await run(refreshArgs(stack), embedded ? { embedded, env } : { env });
    report = parseRefreshOutput(result.stdout, stack);
    const stderr = result.stderr.trim();
    // pulumi exits non-zero both for drift (--expect-no-changes) and for errors (pulumi#8992):
    // the events decide; stderr only explains an engine that produced no verdict.
    if (report.errors.length > 0 && stderr !== "")
      report.errors.push(`pulumi: ${stderr.split("\n").slice(-5).join(" | ")}`);
  } catch (e) {
    report = { stack, hosts: [], otherChanges: [], errors: [(e as Error).message] };
  }
  out(json ? `${JSON.stringify({ ...report, exitCode: exitCodeOf(report) }, null, 2)}\n` : formatReport(report));
  return exitCodeOf(report);
}
