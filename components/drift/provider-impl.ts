// ToolkitState's provider methods as plain functions. The state stores only
// components/call-time-provider.ts's small object, which loads the compiled copy of this module from
// wherever gpuhost is when a method runs (a stack survives a move of its checkout), so this code
// (with zod and the host exec layer) is never captured into the state. Unit tests call these functions directly (the engine cannot run inside Vitest).
//
// State layout (outputs): the inputs, plus
//   hostLabel  where the probe ran (never the key)
//   observed   the last probe (probe.sh's JSON)
//   baseline   what create recorded that provisioning does not state: file hashes, driver, GPUs
//   drift      observed vs expected (and baseline): [{ field, expected, found, repair }]
//   hostKeyRefused  only after a read refused on the host key: the refusal; the rest is the stored state
// read re-probes and returns props AND inputs; diff compares observed vs expected, so
// `pulumi refresh --preview-only --expect-no-changes` fails exactly when something drifted.
// update with onDrift "repair" runs the `repairs` steps for what drifted (repair.ts), re-probes,
// and records the repaired host, so the next plain `pulumi up` (refresh: always) repairs drift.
import { z } from "zod";
import { holdsUnknown, providerInputs } from "../provider-helpers";
import * as crypto from "node:crypto";
import * as fs from "node:fs";
import { describeConnection, type HostConnection, parseConnection } from "../host/connection";
import { execOnHost } from "../host/exec";
import { baselineOf, findDrift } from "./drift";
import { ProbeError, probeHost } from "./probe";
import { planRepairs, repairedActivation, repairScriptPath, runRepairs } from "./repair";
import { installProcessGuard } from "../../gate/transport/process-guard";
import { projectRoot } from "../../project-files";
import {
  type Baseline,
  type Drift,
  type ExpectedState,
  expectedStateSchema,
  type ObservedState,
  type OnDrift,
  onDriftSchema,
  type RepairStep,
  type RepairStepInput,
  repairStepSchema,
  repairsSchema,
} from "./schema";

// In the dynamic-provider host the engine started, this process must not outlive the engine (an
// EPIPE loop after `kill -9` of pulumi, key folders left behind): gate/transport/process-guard.ts.
if (/dynamic-provider/.test(String(process.argv[1] ?? ""))) installProcessGuard();

/** A repair step whose script exists: a missing one would only fail the day a host drifted. */
const repairStep = repairStepSchema.superRefine((step, ctx) => {
  // A path the schema refused already says why; only a well-formed one is looked for.
  if (!repairStepSchema.shape.script.safeParse(step.script).success) return;
  let file: string;
  try {
    file = repairScriptPath(projectRoot(), step.script);
  } catch (e) {
    ctx.addIssue({ code: "custom", path: ["script"], message: (e as Error).message });
    return;
  }
  if (!fs.existsSync(file)) ctx.addIssue({ code: "custom", path: ["script"], message: `${file} does not exist` });
});

/** ToolkitState's inputs, declared once: check and picking derive from it (provider-helpers.ts). */
export const ToolkitStateInputsSchema = z.object({
  providerVersion: z.string(),
  connection: z.custom<HostConnection>((v) => typeof v === "object" && v !== null, "must be a host connection"),
  expected: expectedStateSchema,
  onDrift: onDriftSchema.optional(),
  /** The provisioning steps that repair drift (onDrift "repair"). */
  repairs: z.array(repairStep, "must be a list of repair steps").optional(),
  /** The API key (a secret input: encrypted in the state) and its file on the host, compared on every probe. */
  apiKey: z.string().optional(),
  /** `credential`: the id the units load the file as (LoadCredential=): systemd's copy is what the service runs with. */
  apiKeyFile: z.object({ path: z.string(), script: z.string(), credential: z.string().optional() }).optional(),
});

/** What the program passes (pulumi.Input values resolved): the repair steps as written, parsed by the provider. */
export type ToolkitStateInputs = Omit<z.infer<typeof ToolkitStateInputsSchema>, "repairs"> & {
  repairs?: RepairStepInput[];
};

// ToolkitState is never replaced (a changed input is an update that re-records): no replace keys.
const INPUTS = providerInputs(ToolkitStateInputsSchema, { replaces: [] });

/** What the state holds. */
export interface ToolkitStateOutputs extends ToolkitStateInputs {
  hostLabel: string;
  observed: ObservedState;
  baseline: Baseline;
  drift: Drift[];
  /**
   * Set by a read that the host's key refused (the stored connection pins another key): the host was
   * not probed, and the rest is the state recorded before. diff then always reports a change, so the
   * update that follows probes with the connection the program gives now: a newly pinned key goes
   * through and clears this; the same pin is refused again and fails the update, naming both keys.
   */
  hostKeyRefused?: string;
  /**
   * The activation id of the last start a repair made (activate.sh, restart-unit.sh), "" before any:
   * VerifiedGeneration takes it as part of its `activation`, so the update that restarted the
   * service is followed by the gate in the same `pulumi up`. Kept by read and by updates that start nothing.
   */
  repairActivation?: string;
}

const INPUT_KEYS = INPUTS.keys;

export class ToolkitDriftError extends Error {
  /** `repaired`: the repair steps that ran before the host was probed again (onDrift "repair"). */
  constructor(
    readonly hostLabel: string,
    readonly drift: Drift[],
    readonly repaired?: string[],
  ) {
    const lead =
      repaired === undefined
        ? `toolkit on ${hostLabel} does not match what was provisioned:`
        : `toolkit on ${hostLabel} still does not match what was provisioned after the repair steps (${repaired.join(", ") || "none applied"}):`;
    super(
      `${lead}\n${drift
        .map(
          (d) =>
            `  ${d.field}: expected ${d.expected ?? "(absent)"}, found ${d.found ?? "(absent)"}; repair: ${d.repair}`,
        )
        .join("\n")}`,
    );
    this.name = "ToolkitDriftError";
  }
}

function inputsOf(props: ToolkitStateInputs): ToolkitStateInputs {
  return INPUTS.pick(props);
}

function parsed(inputs: ToolkitStateInputs): {
  connection: HostConnection;
  expected: ExpectedState;
  onDrift: OnDrift;
  repairs: RepairStep[];
} {
  return {
    connection: parseConnection(inputs.connection),
    expected: expectedStateSchema.parse(inputs.expected),
    onDrift: onDriftSchema.parse(inputs.onDrift),
    repairs: repairsSchema.parse(inputs.repairs),
  };
}

/** The resource id: stable per host and toolkit location, and free of secrets. */
export function stateId(connection: HostConnection, expected: ExpectedState): string {
  const label = describeConnection(connection);
  const digest = crypto.createHash("sha256").update(`${label}\n${expected.cudaHome}`).digest("hex").slice(0, 16);
  return `toolkit-state-${digest}`;
}

async function observe(
  inputs: ToolkitStateInputs,
  baseline: Baseline | undefined,
  repairActivation: string,
): Promise<ToolkitStateOutputs> {
  const { connection, expected } = parsed(inputs);
  const observed = await probeHost(connection, expected);
  if (inputs.apiKey !== undefined && inputs.apiKeyFile !== undefined) {
    const key = await checkApiKeyFile(connection, projectRoot(), inputs.apiKeyFile, inputs.apiKey, runningCopy(inputs));
    observed.apiKeyFile = key.file;
    if (key.running !== undefined) observed.apiKeyRunning = key.running;
  }
  const base = baseline ?? baselineOf(observed);
  return {
    ...inputsOf(inputs),
    hostLabel: describeConnection(connection),
    observed,
    baseline: base,
    drift: findDrift(expected, base, observed),
    repairActivation,
  };
}

/**
 * systemd's copy of the active unit's key credential (/run/credentials/UNIT/ID): the key the
 * running service was started with, which may differ from the file once the file was rewritten.
 */
function runningCopy(inputs: ToolkitStateInputs): string | undefined {
  const credential = inputs.apiKeyFile?.credential;
  const active = Object.entries(inputs.expected.units ?? {}).find(([, u]) => u.active === "active")?.[0];
  if (credential === undefined || active === undefined) return undefined;
  return `/run/credentials/${active.slice(active.lastIndexOf("/") + 1)}/${credential}`;
}

export async function check(
  _olds: unknown,
  news: ToolkitStateInputs,
): Promise<{ inputs: ToolkitStateInputs; failures: { property: string; reason: string }[] }> {
  const { failures } = INPUTS.check(news);
  return { inputs: news, failures };
}

/** Records the state observed after provisioning; fails (unless onDrift is "record") when it already differs from what was expected. */
export async function create(inputs: ToolkitStateInputs): Promise<{ id: string; outs: ToolkitStateOutputs }> {
  const outs = await observe(inputs, undefined, "");
  const { connection, expected, onDrift } = parsed(inputs);
  if (outs.drift.length > 0 && onDrift !== "record") throw new ToolkitDriftError(outs.hostLabel, outs.drift);
  return { id: stateId(connection, expected), outs };
}

/** Re-probes the host. Returns props and inputs, so diffs after a refresh compare observed against what was provisioned. */
export async function read(
  id: string,
  props: ToolkitStateOutputs,
): Promise<{ id: string; props: ToolkitStateOutputs; inputs: ToolkitStateInputs }> {
  try {
    const outs = await observe(props, props.baseline, props.repairActivation ?? "");
    return { id, props: outs, inputs: inputsOf(props) };
  } catch (e) {
    // Refresh reads with the connection stored in the state. After the user pinned a host's new key,
    // that connection still pins the old one: failing here failed every `pulumi up` (refresh: always)
    // until one ran with --refresh=false. Nothing was sent to that host (the session stops at key
    // verification), so keep what was recorded, say why, and let the update decide (see hostKeyRefused).
    if (!(e instanceof ProbeError) || e.hostKeyRefusal === undefined) throw e;
    process.stderr.write(
      `[ToolkitState ${props.hostLabel}] not probed: ${e.hostKeyRefusal}. The recorded state is kept; the next update probes with the connection the program gives now\n`,
    );
    return { id, props: { ...props, hostKeyRefused: e.hostKeyRefusal }, inputs: inputsOf(props) };
  }
}

/**
 * Changed when provisioning expects something else (inputs), when newer provider code must take
 * over (providerVersion), or when the recorded observation drifted from what is expected. In a
 * refresh the engine passes the fresh read as `olds` and the stored inputs as `news`.
 */
export async function diff(
  _id: string,
  olds: ToolkitStateOutputs,
  news: ToolkitStateInputs,
): Promise<{ changes: boolean; replaces: string[] }> {
  if (holdsUnknown(news)) return { changes: true, replaces: [] };
  // Only today's input keys: a state written when the checkout's path was an input still diffs clean.
  const changedInputs = INPUT_KEYS.filter((k) => JSON.stringify(olds[k] ?? null) !== JSON.stringify(news[k] ?? null));
  if (changedInputs.length > 0) return { changes: true, replaces: [] };
  // The last read could not probe (host key refused): the update probes with the current connection.
  if (olds.hostKeyRefused !== undefined) return { changes: true, replaces: [] };
  if (!olds.observed || !olds.baseline) return { changes: true, replaces: [] };
  const drift = findDrift(expectedStateSchema.parse(news.expected), olds.baseline, olds.observed);
  return { changes: drift.length > 0, replaces: [] };
}

/**
 * Re-records after provisioning ran again, or after a refresh found drift. The baseline (file
 * hashes, driver) is kept unless what provisioning expects changed, so a replaced header stays
 * drift until the package is reinstalled; `pulumi up --replace` re-records it on purpose.
 * With onDrift "repair", a host that differs is repaired first: the repair steps of the drifted
 * fields run in order (repair.ts), the host is probed again, and update succeeds only when it is
 * clean, else fails naming what is still wrong.
 */
export async function update(
  _id: string,
  olds: ToolkitStateOutputs,
  news: ToolkitStateInputs,
): Promise<{ outs: ToolkitStateOutputs }> {
  const expectationChanged = JSON.stringify(olds.expected) !== JSON.stringify(news.expected);
  const baseline = expectationChanged ? undefined : olds.baseline;
  let outs = await observe(news, baseline, olds.repairActivation ?? "");
  const { connection, expected, onDrift, repairs } = parsed(news);
  if (outs.drift.length > 0 && onDrift === "repair") {
    const plan = planRepairs(outs.drift, expected, repairs);
    const ran = await runRepairs(connection, projectRoot(), plan.steps, {
      log: (line) => process.stderr.write(`[ToolkitState ${outs.hostLabel}] ${line}\n`),
      secrets: { apiKey: news.apiKey },
    });
    // The baseline is kept: a repaired host must match what was recorded before it drifted.
    outs = await observe(news, outs.baseline, repairedActivation(ran) ?? outs.repairActivation ?? "");
    if (outs.drift.length > 0)
      throw new ToolkitDriftError(
        outs.hostLabel,
        outs.drift,
        plan.steps.map((s) => s.script.slice(s.script.lastIndexOf("/") + 1)),
      );
  }
  if (outs.drift.length > 0 && onDrift === "fail") throw new ToolkitDriftError(outs.hostLabel, outs.drift);
  return { outs };
}

/**
 * Compares the host's API key file, and systemd's copy the running service started with, with the
 * configured key ON the host (the key goes over standard input to `api-key-file.sh --check`): the
 * state records match/differs/missing/unknown, nothing derived from the key.
 */
async function checkApiKeyFile(
  connection: HostConnection,
  projectRoot: string,
  file: { path: string; script: string },
  apiKey: string,
  runningCopy: string | undefined,
): Promise<{ file: "match" | "differs" | "missing"; running?: "match" | "differs" | "unknown" }> {
  const script = repairScriptPath(projectRoot, file.script);
  const args = ["--check", file.path, ...(runningCopy === undefined ? [] : [runningCopy])];
  const r = await execOnHost(connection, fs.readFileSync(script, "utf8"), args, {
    scriptName: "api-key-file.sh",
    stdin: `${apiKey}\n`,
    timeoutMs: 60_000,
  });
  const state = /^state=(match|differs|missing)$/m.exec(r.stdout)?.[1] as "match" | "differs" | "missing" | undefined;
  const running = /^running=(match|differs|unknown)$/m.exec(r.stdout)?.[1] as
    "match" | "differs" | "unknown" | undefined;
  if (r.code !== 0 || state === undefined || (runningCopy !== undefined && running === undefined))
    throw new Error(`api-key-file.sh --check exited ${r.code}: ${r.stderr.trim().slice(-300)}`);
  return { file: state, ...(running === undefined ? {} : { running }) };
}

/** Recording only: deleting the record leaves the host as it is. */
export async function remove(_id: string, _props: ToolkitStateOutputs): Promise<void> {}

/** What callTimeProvider("dist/components/drift/provider-impl.js") calls. */
export const provider = { check, diff, create, read, update, delete: remove };
