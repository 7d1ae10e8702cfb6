// ToolkitState's provider methods as plain functions. The serialized provider in index.ts holds
// nothing but `require(<projectRoot>/dist/components/toolkit-state/provider-impl.js)` per method,
// so this code (with zod and the host exec layer) is loaded at call time and never captured into
// the state. Unit tests call these functions directly (the engine cannot run inside Vitest).
//
// State layout (outputs): the inputs, plus
//   hostLabel  where the probe ran (never the key)
//   observed   the last probe (probe.sh's JSON)
//   baseline   what create recorded that provisioning does not state: file hashes, driver, GPUs
//   drift      observed vs expected (and baseline): [{ field, expected, found, repair }]
// read re-probes and returns props AND inputs; diff compares observed vs expected, so
// `pulumi refresh --preview-only --expect-no-changes` fails exactly when something drifted.
import * as crypto from "node:crypto";
import { describeConnection, type HostConnection, parseConnection } from "../host/connection";
import { baselineOf, findDrift } from "./drift";
import { probeHost } from "./probe";
import { type Baseline, type Drift, type ExpectedState, expectedStateSchema, type ObservedState, type OnDrift, onDriftSchema } from "./schema";

/** What the program passes (pulumi.Input values resolved). */
export interface ToolkitStateInputs {
  projectRoot: string;
  providerVersion: string;
  connection: HostConnection;
  expected: ExpectedState;
  onDrift?: OnDrift;
}

/** What the state holds. */
export interface ToolkitStateOutputs extends ToolkitStateInputs {
  hostLabel: string;
  observed: ObservedState;
  baseline: Baseline;
  drift: Drift[];
}

const INPUT_KEYS = ["projectRoot", "providerVersion", "connection", "expected", "onDrift"] as const;

/** During preview, unknown inputs reach check/diff as this string (pulumi#6310). */
const UNKNOWN = "04da6b54-80e4-46f7-96ec-b56ff0331ba9";

export class ToolkitDriftError extends Error {
  constructor(readonly hostLabel: string, readonly drift: Drift[]) {
    super(`toolkit on ${hostLabel} does not match what was provisioned:\n${drift
      .map((d) => `  ${d.field}: expected ${d.expected ?? "(absent)"}, found ${d.found ?? "(absent)"}; repair: ${d.repair}`)
      .join("\n")}`);
    this.name = "ToolkitDriftError";
  }
}

function inputsOf(props: ToolkitStateInputs): ToolkitStateInputs {
  const out: Record<string, unknown> = {};
  for (const key of INPUT_KEYS) if (props[key] !== undefined) out[key] = props[key];
  return out as unknown as ToolkitStateInputs;
}

function parsed(inputs: ToolkitStateInputs): { connection: HostConnection; expected: ExpectedState; onDrift: OnDrift } {
  return {
    connection: parseConnection(inputs.connection),
    expected: expectedStateSchema.parse(inputs.expected),
    onDrift: onDriftSchema.parse(inputs.onDrift),
  };
}

/** The resource id: stable per host and toolkit location, and free of secrets. */
export function stateId(connection: HostConnection, expected: ExpectedState): string {
  const label = describeConnection(connection);
  const digest = crypto.createHash("sha256").update(`${label}\n${expected.cudaHome}`).digest("hex").slice(0, 16);
  return `toolkit-state-${digest}`;
}

async function observe(inputs: ToolkitStateInputs, baseline: Baseline | undefined): Promise<ToolkitStateOutputs> {
  const { connection, expected } = parsed(inputs);
  const observed = await probeHost(connection, expected);
  const base = baseline ?? baselineOf(observed);
  return {
    ...inputsOf(inputs),
    hostLabel: describeConnection(connection),
    observed,
    baseline: base,
    drift: findDrift(expected, base, observed),
  };
}

export async function check(_olds: unknown, news: ToolkitStateInputs): Promise<{ inputs: ToolkitStateInputs; failures: { property: string; reason: string }[] }> {
  const failures: { property: string; reason: string }[] = [];
  if (typeof news.projectRoot !== "string" || !news.projectRoot.startsWith("/")) {
    failures.push({ property: "projectRoot", reason: "must be the absolute path of the gpuhost project (its dist/ holds the provider code)" });
  }
  if (!JSON.stringify(news.expected ?? null).includes(UNKNOWN)) {
    const r = expectedStateSchema.safeParse(news.expected);
    if (!r.success) for (const i of r.error.issues) failures.push({ property: ["expected", ...i.path.map(String)].join("."), reason: i.message });
  }
  const d = onDriftSchema.safeParse(news.onDrift);
  if (!d.success) failures.push({ property: "onDrift", reason: d.error.issues[0]?.message ?? "invalid" });
  return { inputs: news, failures };
}

/** Records the state observed after provisioning; fails (unless onDrift is "record") when it already differs from what was expected. */
export async function create(inputs: ToolkitStateInputs): Promise<{ id: string; outs: ToolkitStateOutputs }> {
  const outs = await observe(inputs, undefined);
  const { connection, expected, onDrift } = parsed(inputs);
  if (outs.drift.length > 0 && onDrift === "fail") throw new ToolkitDriftError(outs.hostLabel, outs.drift);
  return { id: stateId(connection, expected), outs };
}

/** Re-probes the host. Returns props and inputs, so diffs after a refresh compare observed against what was provisioned. */
export async function read(id: string, props: ToolkitStateOutputs): Promise<{ id: string; props: ToolkitStateOutputs; inputs: ToolkitStateInputs }> {
  const outs = await observe(props, props.baseline);
  return { id, props: outs, inputs: inputsOf(props) };
}

/**
 * Changed when provisioning expects something else (inputs), when newer provider code must take
 * over (providerVersion), or when the recorded observation drifted from what is expected. In a
 * refresh the engine passes the fresh read as `olds` and the stored inputs as `news`.
 */
export async function diff(_id: string, olds: ToolkitStateOutputs, news: ToolkitStateInputs): Promise<{ changes: boolean; replaces: string[] }> {
  if (JSON.stringify(news).includes(UNKNOWN)) return { changes: true, replaces: [] };
  const changedInputs = INPUT_KEYS.filter((k) => k !== "projectRoot" && JSON.stringify(olds[k] ?? null) !== JSON.stringify(news[k] ?? null));
  if (changedInputs.length > 0) return { changes: true, replaces: [] };
  if (!olds.observed || !olds.baseline) return { changes: true, replaces: [] };
  const drift = findDrift(expectedStateSchema.parse(news.expected), olds.baseline, olds.observed);
  return { changes: drift.length > 0, replaces: [] };
}

/**
 * Re-records after provisioning ran again. The baseline (file hashes, driver) is kept unless what
 * provisioning expects changed, so a replaced header stays drift until the package is reinstalled;
 * `pulumi up --replace` re-records it on purpose.
 */
export async function update(_id: string, olds: ToolkitStateOutputs, news: ToolkitStateInputs): Promise<{ outs: ToolkitStateOutputs }> {
  const expectationChanged = JSON.stringify(olds.expected) !== JSON.stringify(news.expected);
  const outs = await observe(news, expectationChanged ? undefined : olds.baseline);
  const { onDrift } = parsed(news);
  if (outs.drift.length > 0 && onDrift === "fail") throw new ToolkitDriftError(outs.hostLabel, outs.drift);
  return { outs };
}

/** Recording only: deleting the record leaves the host as it is. */
export async function remove(_id: string, _props: ToolkitStateOutputs): Promise<void> {}
