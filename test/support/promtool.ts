/**
 * Prometheus's own promtool (.ci/promtool.sh: built from its Go module once per machine, before any
 * test, by engine/test-prereqs.sh), for the tests that check the metrics file and the alert rules.
 * GPUHOST_SKIP_PROMTOOL=1 skips them knowingly; otherwise a machine without it fails them loudly.
 */
import * as path from "node:path";
import { PROJECT_ROOT } from "../../engine/pulumi";
import { run, runOk, type RunResult } from "./run";

export const SKIP_PROMTOOL = process.env.GPUHOST_SKIP_PROMTOOL === "1";

let bin: Promise<string> | undefined;

/** The cached promtool's path (the script answers from the cache in under a second). */
export function promtoolBin(): Promise<string> {
  bin ??= runOk("bash", [path.join(PROJECT_ROOT, ".ci", "promtool.sh")], { timeout: 1_800_000 }).then((o) => o.trim());
  return bin;
}

/** `promtool ARGS`, its exit status and output; INPUT on stdin when given. */
export async function promtool(args: readonly string[], input?: string): Promise<RunResult> {
  return run(await promtoolBin(), args, { input, timeout: 120_000 });
}
