/**
 * The ServiceComparison dynamic provider, as plain functions (tests call them directly: the
 * engine's closure serialization cannot run inside vitest).
 *
 * Like VerifiedGeneration's, this module is not serialized: the state holds only
 * components/call-time-provider.ts's object, which loads the compiled copy of this module from
 * wherever gpuhost is when a method runs (a stack survives a move of its checkout).
 * Create runs the gate's comparison (gate/plan/compare-run.ts): each service made the one active unit by
 * the same activate.sh ServingService runs, verified, measured with the same workload; then the
 * winner (auto) or the configured service is left active. Nothing is cached outside the state: the
 * resource's inputs (each unit's stamp, the workload, the policy) are the cache key, so an `up` with
 * nothing changed has no diff and re-measures nothing.
 */

import { randomBytes } from "node:crypto";
import * as fs from "node:fs";
import * as gate from "../../gate/index";
import { projectFile } from "../../project-files";
import type { HostConnection } from "../host/connection";
import { execOnHost } from "../host/exec";
import { unitHooks } from "../host/unit-hooks";
import { openTunnel } from "../host/tunnel";
import { z } from "zod";
import { providerGuard, providerInputs } from "../provider-helpers";

/** Bump when the provider's behaviour changes. */
export const PROVIDER_VERSION = "2";

/** The comparison's knobs, parsed by the stack config: the gate's CompareOptions minus the per-call parts. */
const ComparisonPlanSchema = z.object({
  plan: gate.BenchPlanSchema,
  timeScale: z.number().positive(),
  verifyPolicy: gate.VerifyPolicySchema,
  job: gate.JobSchema,
  auto: z.boolean(),
  restore: z.enum(gate.SERVICE_NAMES),
  acceptanceFloor: z.number(),
});
export type ComparisonPlan = z.infer<typeof ComparisonPlanSchema>;

const draft = z.object({ algorithm: z.string(), draftModelPath: z.string(), acceptanceFloor: z.number() });
const seconds = (key: string) =>
  z.number(`${key} must be a positive number of seconds`).positive(`${key} must be a positive number of seconds`);

/** ServiceComparison's inputs, declared once: check, diff and picking derive from it (provider-helpers.ts). */
export const ServiceComparisonInputsSchema = z.object({
  providerVersion: z.string(),
  /** The host connection (components/host/connection.ts); secret: an SSH one holds the private key. */
  connection: z.custom<HostConnection>((v) => typeof v === "object" && v !== null, "must be a host connection"),
  /** SSH hosts: the service as seen on the host, reached through a tunnel over the connection. */
  tunnel: z.object({ remoteHost: z.string(), remotePort: z.number().int() }).optional(),
  endpoint: z.object({ url: z.string(), model: z.string() }),
  apiKey: z.string().optional(),
  /** Each configured service's activation stamp (its unit, the environment lock, the key's hash). */
  stamps: z.partialRecord(z.enum(gate.SERVICE_NAMES), z.string()),
  /** The services to compare, in order (the output `services` is the per-service table). */
  serviceKinds: z
    .array(z.enum(gate.SERVICE_NAMES), "serviceKinds must list at least one service to compare")
    .min(1, "serviceKinds must list at least one service to compare"),
  drafts: z.partialRecord(z.enum(gate.SERVICE_NAMES), draft),
  plan: ComparisonPlanSchema,
  /** How long one activation (stop the others, start one) may take on the host. */
  activateTimeoutSeconds: seconds("activateTimeoutSeconds"),
  /** The whole comparison's deadline. */
  deadlineSeconds: seconds("deadlineSeconds"),
});
export type ServiceComparisonInputs = z.infer<typeof ServiceComparisonInputsSchema>;

/**
 * What the measurement depends on: a change re-measures every service. projectRoot: an input of
 * states written before the checkout's path left them (dropped on update).
 */
const INPUTS = providerInputs(ServiceComparisonInputsSchema, {
  replaces: ["endpoint", "stamps", "serviceKinds", "drafts", "plan"],
  retired: ["projectRoot"],
});
export const MEASURE_KEYS: readonly string[] = INPUTS.replaceKeys;
export const INPUT_KEYS: readonly string[] = INPUTS.keys;

type ServiceName = "autoregressive" | "eagle3" | "dflash";

/** One systemctl call on the host. */
const RESET_TIMEOUT_MS = 60_000;

const pickInputs = INPUTS.pick;
const pickMeasured = INPUTS.measured;

export async function check(_olds: Record<string, unknown>, news: Record<string, unknown>) {
  return INPUTS.check(news);
}

export async function diff(_id: string, olds: Record<string, unknown>, news: Record<string, unknown>) {
  return INPUTS.diff(olds, news, { stables: ["activeService", "activeUnit", "recommended"] });
}

/** Measure every service in turn, compare, leave the winner (or the configured one) active. */
export async function create(inputs: Record<string, unknown>) {
  const input = INPUTS.decode(inputs);
  const say = (line: string) => process.stderr.write(`[ServiceComparison ${input.endpoint.url}] ${line}\n`);
  const { signal, onLeave } = providerGuard();
  const { connection } = input;
  // The units this comparison started: what it measured (or failed on) and then left, it clears.
  const started = new Set<ServiceName>();
  const tunnel =
    input.tunnel && connection.kind === "ssh"
      ? await openTunnel(connection, input.tunnel.remoteHost, input.tunnel.remotePort)
      : undefined;
  const off = onLeave(() => tunnel?.close());
  const configured = ALL_SERVICES.filter((s) => input.stamps[s] !== undefined);
  let completed = false;
  try {
    const url = tunnel ? `http://127.0.0.1:${tunnel.localPort}` : input.endpoint.url;
    const result = await compareOnHost(input, url, { started, signal, say });
    completed = true;
    await nameFailedUnits(connection, unitsOf(configured.filter((s) => !started.has(s))), say);
    if (!result.comparison)
      throw new Error(
        `no service could be measured: ${result.outcomes.map((o) => `${o.service}: ${o.failure ?? "no levels"}`).join("; ")}`,
      );
    const outs = { ...pickInputs(inputs), ...gate.comparisonOutputs(result) };
    say(outs.recommendation);
    const suffix = randomBytes(4).toString("hex");
    return { id: `compare@${input.endpoint.url}#${suffix}`, outs };
  } finally {
    off();
    await tunnel?.close();
    // Stopped half-way (its deadline, Ctrl-C, a failed activation): nothing was left deliberately
    // active, so every unit it started loses a failed state (harmless on one that is not failed).
    if (!completed) await resetFailed(connection, unitsOf(started)).catch(() => undefined);
  }
}

const ALL_SERVICES: ServiceName[] = ["autoregressive", "eagle3", "dflash"];

interface Comparing {
  /** The services this comparison made active so far (it adds each before activating it). */
  started: Set<ServiceName>;
  signal: AbortSignal;
  say: (line: string) => void;
}

/** The gate's comparison of the services at URL (the host's as reached from here), within the whole's deadline. */
async function compareOnHost(input: ServiceComparisonInputs, url: string, c: Comparing) {
  const run = gate.runComparison(
    {
      ...input.plan,
      endpoint: { url, model: input.endpoint.model, apiKey: input.apiKey },
      services: input.serviceKinds,
      drafts: input.drafts,
    },
    {
      activate: activator(input, c.started),
      identity: async (s) => input.stamps[s] ?? "",
      unit: (s) => unitHooks(input.connection, unitOf(s)),
      onProgress: c.say,
    },
  );
  // Its own deadline: the gate's levels and readiness each have theirs, this bounds the whole.
  return gate.raceTimeout(
    run,
    [c.signal],
    input.deadlineSeconds * 1000,
    () => `the service comparison did not finish within its deadline of ${input.deadlineSeconds} s`,
  );
}

/** Makes a service the one active unit by the same activate.sh ServingService runs, noting it in STARTED. */
function activator(input: ServiceComparisonInputs, started: Set<ServiceName>) {
  const activateScript = fs.readFileSync(projectFile("components/services/scripts/activate.sh"), "utf8");
  return async (service: ServiceName) => {
    const stamp = input.stamps[service];
    if (!stamp) throw new Error(`service ${service} is not configured on this host`);
    const others = unitsOf(ALL_SERVICES.filter((s) => s !== service));
    started.add(service);
    const r = await execOnHost(input.connection, activateScript, [unitOf(service), stamp, ...others], {
      timeoutMs: input.activateTimeoutSeconds * 1000,
      scriptName: "activate.sh",
    });
    if (r.code !== 0)
      throw new Error(`making ${service} the active service failed (exit ${r.code}): ${r.stderr.trim().slice(-2000)}`);
    // activate.sh stopped the others; one that crashed stays "failed" after a stop, which the drift
    // probe reads as "expected inactive, found failed" on every later `up`. Its failure is in this
    // comparison's outcome (and its journal), so the state is cleared.
    await resetFailed(input.connection, unitsOf([...started].filter((s) => s !== service)));
  };
}

const unitOf = (service: ServiceName) => `sglang-${service}.service`;
const unitsOf = (services: Iterable<ServiceName>) => [...services].map(unitOf);

/** `systemctl reset-failed` for the units given (as arguments: nothing reaches the script's text). */
async function resetFailed(connection: HostConnection, units: string[]): Promise<void> {
  if (units.length === 0) return;
  const r = await execOnHost(connection, 'systemctl reset-failed -- "$@"', units, {
    timeoutMs: RESET_TIMEOUT_MS,
    scriptName: "gpuhost-reset-failed",
  });
  if (r.code !== 0)
    throw new Error(`systemctl reset-failed ${units.join(" ")} failed (exit ${r.code}): ${r.stderr.trim()}`);
}

/**
 * A unit this comparison did not start that systemd reports failed is someone else's to look at:
 * named, with what to run, and left as it is (the drift probe names it too).
 */
async function nameFailedUnits(
  connection: HostConnection,
  units: string[],
  say: (line: string) => void,
): Promise<void> {
  if (units.length === 0) return;
  const r = await execOnHost(
    connection,
    'for u in "$@"; do if systemctl is-failed --quiet -- "$u"; then echo "$u"; fi; done',
    units,
    { timeoutMs: RESET_TIMEOUT_MS, scriptName: "gpuhost-failed-units" },
  );
  if (r.code !== 0) return; // only a notice: the comparison's result stands without it
  for (const unit of r.stdout.split("\n").filter((u) => units.includes(u)))
    say(
      `${unit} is failed and this comparison did not start it (left as it is): journalctl -u ${unit} says why; systemctl reset-failed ${unit} clears it`,
    );
}

/** Nothing the measurement depends on changed (a new key, a moved project): keep the measurements. */
export async function update(
  _id: string,
  olds: Record<string, unknown>,
  news: Record<string, unknown>,
): Promise<{ outs: Record<string, unknown> }> {
  return { outs: { ...pickMeasured(olds), ...pickInputs(news) } };
}

/**
 * Refresh reads nothing from the host: the comparison is a record of what was measured. Whether the
 * service it left active still runs is ToolkitState's probe (it expects this resource's activeUnit).
 */
export async function read(
  id: string,
  props: Record<string, unknown>,
): Promise<{ id: string; props: Record<string, unknown>; inputs: Record<string, unknown> }> {
  return { id, props, inputs: pickInputs(props) };
}

export async function deleteResource(): Promise<void> {
  // The units belong to ServingService; there is nothing of the comparison's own on the host.
}

/** What callTimeProvider("dist/components/service-comparison/provider.js") calls. */
export const provider = { check, diff, create, update, read, delete: deleteResource };
