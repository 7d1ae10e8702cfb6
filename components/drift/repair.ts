// Repairing drift: which steps to run for the fields that drifted, and running them on the host.
// The steps are the provisioning steps themselves (the same script files and arguments the
// components' Commands run, from builders those components export), because @pulumi/command has
// no read: a Command whose work was undone on the host never runs again by itself.
// No Pulumi import: provider-impl.ts loads this from dist/ at call time.
import * as fs from "node:fs";
import * as path from "node:path";
import type { HostConnection } from "../host/connection";
import { execOnHost } from "../host/exec";
import type { Drift, ExpectedState, RepairStep } from "./schema";

/** Drift fields the toolkit's provisioning steps repair: nvcc, /usr/local/cuda, packages, missing files. */
export const TOOLKIT_FIELDS: readonly string[] = ["nvcc.", "cudaLink", "packages.", "files."];
/** Drift fields of the serving venv's CUDA wheels: `venv.wheels.<wheel>` (drift.ts venvWheelDrift; serving-env/lock.ts repairs them). */
export const VENV_WHEELS_FIELD = "venv.wheels.";
/** Every unit field (content, enabled, active): the activation step repairs enabled/active. */
export const UNIT_FIELDS = "units.";
/** The drift field of a unit file's content. */
export function unitContentField(unitFile: string): string {
  return `units.${unitFile}.sha256`;
}

/** The drift field of a running unit whose service started with a key other than the configured one. */
export function unitApiKeyField(unitFile: string): string {
  return `units.${unitFile}.apiKey`;
}

/** ToolkitState's own scripts: what no provisioning step does. */
export const REINSTALL_SCRIPT = "components/drift/scripts/reinstall-packages.sh";
export const RESTART_UNIT_SCRIPT = "components/drift/scripts/restart-unit.sh";

/**
 * Restart a unit after its file was restored (install-unit.sh only reloads systemd, and the
 * activation step restarts only when the rendered unit changed, which a restore does not): the
 * running process may have been started from the edited file. Likewise when it runs with a key
 * other than the configured one (systemd copied the key file at its start): run after the key
 * file's own repair, so it starts with the rewritten file.
 */
export function restartUnitStep(unitFile: string): RepairStep {
  return {
    fields: [unitContentField(unitFile), unitApiKeyField(unitFile)],
    script: RESTART_UNIT_SCRIPT,
    args: [unitFile.slice(unitFile.lastIndexOf("/") + 1)],
  };
}

export interface PlannedRepair extends RepairStep {
  /** The drifted fields that make this step run. */
  because: string[];
}

export interface RepairPlan {
  steps: PlannedRepair[];
  /** Drifted fields no step repairs (the driver, GPUs, a stale JIT cache): they stay drift. */
  unrepairable: string[];
}

/**
 * The steps to run, in order: first a reinstall of the packages whose files changed content (apt
 * restores a file that is present only with --reinstall, and the install step only checks that
 * files exist), then every given step one of whose field prefixes drifted, in the given order.
 */
export function planRepairs(
  drift: readonly Drift[],
  expected: ExpectedState,
  steps: readonly RepairStep[],
): RepairPlan {
  const planned: PlannedRepair[] = [];
  const changedFiles = drift.filter((d) => d.field.startsWith("files.") && d.found !== null);
  const owners = [
    ...new Set(changedFiles.map((d) => expected.files[d.field.slice("files.".length)]).filter((p): p is string => !!p)),
  ].sort();
  if (owners.length > 0) {
    planned.push({
      fields: ["files."],
      script: REINSTALL_SCRIPT,
      args: owners,
      because: changedFiles.map((d) => d.field),
    });
  }
  for (const step of steps) {
    const because = drift.map((d) => d.field).filter((f) => step.fields.some((prefix) => f.startsWith(prefix)));
    if (because.length > 0) planned.push({ ...step, because });
  }
  const covered = new Set(planned.flatMap((p) => p.because));
  return { steps: planned, unrepairable: drift.map((d) => d.field).filter((f) => !covered.has(f)) };
}

export class RepairError extends Error {
  constructor(
    message: string,
    readonly step: PlannedRepair,
    readonly stderr: string,
  ) {
    super(message);
    this.name = "RepairError";
  }
}

export interface RepairOptions {
  /** Per step (default 30 min: a real apt install of the toolkit downloads gigabytes). */
  timeoutMs?: number;
  /** Progress lines (one per step). */
  log?: (line: string) => void;
  /** The secrets a step may ask for on standard input (RepairStep.stdin). */
  secrets?: { apiKey?: string };
}

/** A script path from a step, resolved inside the project root (never outside it). */
export function repairScriptPath(projectRoot: string, script: string): string {
  const root = path.resolve(projectRoot);
  const file = path.resolve(root, script);
  if (!file.startsWith(`${root}${path.sep}`))
    throw new Error(`repair script ${script} is outside the project root ${root}`);
  return file;
}

/** What a step that ran printed on standard output (activate.sh and restart-unit.sh: `activation=ID`). */
export interface RepairOutput {
  step: PlannedRepair;
  stdout: string;
}

/**
 * The activation id of the start the repairs made (activate.sh and restart-unit.sh print
 * `restarted=...` and `activation=ID`), or undefined when no step started the service.
 */
export function repairedActivation(outputs: readonly RepairOutput[]): string | undefined {
  const restarted = outputs.some((o) => /^restarted=(?!false)/m.test(o.stdout));
  if (!restarted) return undefined;
  const ids = outputs.flatMap((o) => [...o.stdout.matchAll(/^activation=(\S+)$/gm)].map((m) => m[1]));
  // A start with no id printed must still be verified again: a fresh token does that.
  return ids.at(-1) ?? `restart-${new Date().toISOString()}`;
}

/** Run the planned steps one after another through execOnHost; the first failure stops and throws RepairError. */
export async function runRepairs(
  connection: HostConnection,
  projectRoot: string,
  steps: readonly PlannedRepair[],
  opts: RepairOptions = {},
): Promise<RepairOutput[]> {
  const outputs: RepairOutput[] = [];
  for (const step of steps) {
    const file = repairScriptPath(projectRoot, step.script);
    const name = path.basename(file);
    const why =
      step.because.length > 3
        ? `${step.because.slice(0, 3).join(", ")} and ${step.because.length - 3} more`
        : step.because.join(", ");
    opts.log?.(`running ${name} to repair ${why}`);
    let stdin: string | undefined;
    if (step.stdin === "apiKey") {
      if (opts.secrets?.apiKey === undefined)
        throw new RepairError(`repair step ${step.script} needs the API key`, step, "");
      stdin = `${opts.secrets.apiKey}\n`;
    }
    const result = await execOnHost(connection, fs.readFileSync(file, "utf8"), step.args, {
      scriptName: name,
      environment: step.env,
      timeoutMs: opts.timeoutMs ?? 30 * 60_000,
      stdin,
    });
    if (result.code !== 0) {
      const why = result.code === 124 ? "timed out" : `exited ${result.code}`;
      throw new RepairError(
        `repair step ${step.script} (for ${step.because.join(", ")}) ${why}: ${result.stderr.trim().slice(-800)}`,
        step,
        result.stderr,
      );
    }
    outputs.push({ step, stdout: result.stdout });
  }
  return outputs;
}
