/**
 * The VerifiedGeneration dynamic provider, as plain functions (tests call them directly: the
 * engine's closure serialization cannot run inside vitest).
 *
 * This module is not serialized: the state stores only components/call-time-provider.ts's small
 * object, which loads the compiled copy of this module (dist/components/verified-generation/provider.js)
 * from wherever gpuhost is when a method runs, so a stack survives a move of its checkout.
 * PROVIDER_VERSION travels as an input and shows in diff.
 */
import { randomBytes } from "node:crypto";
import * as gate from "../../gate/index";
import type { HostConnection } from "../host/connection";
import { hostKeyRefusalOf } from "../host/exec";
import { openTunnel } from "../host/tunnel";
import { unitHooks } from "../host/unit-hooks";
import { providerGuard, providerInputs } from "../provider-helpers";
import { z } from "zod";
import type { Drift } from "../drift/schema";

/** Bump when the provider's behaviour changes. */
export const PROVIDER_VERSION = "5";

/** A URL the gate can use, refused before any request in one sentence naming it. */
const gateUrl = z.string().superRefine((url, ctx) => {
  try {
    gate.baseUrl(url);
  } catch (err) {
    ctx.addIssue({ code: "custom", message: (err as Error).message });
  }
});
const nonEmpty = (key: string) =>
  z.string(`${key} must be a non-empty string`).min(1, `${key} must be a non-empty string`);

/** VerifiedGeneration's inputs, declared once: check, diff and picking derive from it (provider-helpers.ts). */
export const VerifiedGenerationInputsSchema = z.object({
  providerVersion: z.string(),
  endpoint: z.object({ url: gateUrl, model: z.string() }, "endpoint must be { url: string, model: string }"),
  apiKey: z.string().optional(),
  serviceIdentity: nonEmpty("serviceIdentity"),
  /** The start of the service it verified (the host's activation id): a restart gpuhost made changes it. */
  activation: z.string("activation must be a string").optional(),
  toolkitFingerprint: nonEmpty("toolkitFingerprint"),
  environmentLock: nonEmpty("environmentLock"),
  /** Parsed once, by the stack config (stack/config.ts); validated again here only as untrusted state. */
  verifyPolicy: gate.VerifyPolicySchema.optional(),
  benchPlan: gate.BenchPlanSchema.optional(),
  workload: gate.WorkloadSchema.optional(),
  /** The active service's speculative decoding: its acceptance is checked against the floor. */
  speculative: z.object({ algorithm: z.string(), draftModelPath: z.string(), acceptanceFloor: z.number() }).optional(),
  serviceStateCommand: z.array(z.string()).optional(),
  serviceLogsCommand: z.array(z.string()).optional(),
  /**
   * For SSH hosts: the gate reaches the service through an SSH tunnel (the serving port is bound to
   * the host's loopback, or firewalled) and reads the unit's state and logs over the same connection.
   * `endpoint.url` then names the service as seen on the host. Secret: it holds the private key.
   */
  hostAccess: z
    .object({
      connection: z.custom<HostConnection>((v) => typeof v === "object" && v !== null, "must be a host connection"),
      unit: z.string(),
      remoteHost: z.string(),
      remotePort: z.number().int(),
    })
    .optional(),
  /** Simulated seconds per wall second of the server (absent: 1): the figures are in the host's own time. */
  timeScale: z.number().positive().optional(),
  /**
   * A fleet's host (config `router`): a gate that does not pass is recorded (generating: false,
   * gateFailure: why) instead of failing the update, so the router leaves this host out and the
   * other hosts still serve; the next `up` verifies it again (diff replaces on generating: false).
   */
  failureIsOutcome: z.boolean().optional(),
});
export type VerifiedGenerationInputs = z.infer<typeof VerifiedGenerationInputsSchema>;

/**
 * What defines the served thing, or what its figures measured: a change means a fresh verification
 * and benchmark. A changed benchmark plan (concurrencies, lengths, repeats) or time scale measures
 * again: an in-place update would keep the earlier plan's figures under the new plan's name.
 * projectRoot: an input of states written before the checkout's path left them (dropped on update).
 */
const INPUTS = providerInputs(VerifiedGenerationInputsSchema, {
  replaces: [
    "endpoint",
    "serviceIdentity",
    "activation",
    "toolkitFingerprint",
    "environmentLock",
    "benchPlan",
    "timeScale",
  ],
  retired: ["projectRoot"],
});
export const REPLACE_KEYS: readonly string[] = INPUTS.replaceKeys;
export const INPUT_KEYS: readonly string[] = INPUTS.keys;

type Gate = typeof gate;

const pickInputs = INPUTS.pick;
const pickMeasured = INPUTS.measured;

export async function check(_olds: Record<string, unknown>, news: Record<string, unknown>) {
  return INPUTS.check(news);
}

export async function diff(_id: string, olds: Record<string, unknown>, news: Record<string, unknown>) {
  const extraReplaces: string[] = [];
  // A refresh that found the host no longer generating leaves generating=false in state: the next
  // `up` verifies and measures again instead of keeping numbers from a host that stopped working.
  if (olds.generating === false) extraReplaces.push("generating");
  // The same for the model's own health (a changed answer, a slower decode, collapsed acceptance):
  // the next `up` verifies and measures the service again, and records a new baseline.
  if (Array.isArray(olds.drift) && olds.drift.length > 0) extraReplaces.push("health");
  const d = INPUTS.diff(olds, news, {
    extraReplaces,
    stables: ["generating", "model", "sustainedOutputTokensPerSecond", "saturationConcurrency"],
  });
  // The last refresh could not reach the host (its key refused): the update checks it with the current connection.
  return typeof olds.hostKeyRefused === "string" ? { ...d, changes: true } : d;
}

/** The inputs that say how the service is reached from here (withHostAccess). */
const HOST_ACCESS = ["endpoint", "apiKey", "hostAccess", "serviceStateCommand", "serviceLogsCommand"] as const;
type HostAccessKey = (typeof HOST_ACCESS)[number];

/**
 * Runs `fn` with the URL to use from here and the service hooks for the host: for SSH hosts through
 * a tunnel opened for the call and closed after it, with `systemctl show` / `journalctl` over the
 * connection; otherwise the endpoint as given and the argv hooks.
 */
async function withHostAccess<T>(
  input: Pick<VerifiedGenerationInputs, HostAccessKey>,
  gate: Gate,
  fn: (url: string, hooks: Record<string, unknown>) => Promise<T>,
): Promise<T> {
  const access = input.hostAccess;
  if (!access || access.connection.kind !== "ssh") {
    return fn(
      input.endpoint.url,
      gate.commandHooks({
        serviceStateCommand: input.serviceStateCommand,
        serviceLogsCommand: input.serviceLogsCommand,
      }),
    );
  }
  const hooks = unitHooks(access.connection, access.unit);
  const tunnel = await openTunnel(access.connection, access.remoteHost, access.remotePort);
  // The engine gone or SIGTERM: the tunnel (and its key folder) is closed before the process leaves.
  const off = providerGuard().onLeave(() => tunnel.close());
  try {
    return await fn(`http://127.0.0.1:${tunnel.localPort}`, hooks);
  } finally {
    off();
    await tunnel.close();
  }
}

/** Verify, then benchmark, then plan. Fails with the gate's diagnosis, so `pulumi up` shows it. */
export async function create(inputs: Record<string, unknown>) {
  const input = INPUTS.decode(inputs);
  const measure = withHostAccess(input, gate, (url, hostHooks) =>
    verifyAndMeasure(inputs, input, gate, url, hostHooks),
  );
  if (input.failureIsOutcome !== true) return measure;
  try {
    return await measure;
  } catch (e) {
    // Interrupted (Ctrl-C, a cancelled up) is no verdict on the host: that still fails.
    if (providerGuard().signal.aborted) throw e;
    const gateFailure = (e as Error).message;
    process.stderr.write(`[VerifiedGeneration ${input.endpoint.url}] left out of the fleet: ${gateFailure}\n`);
    return {
      id: `${input.endpoint.model}@${input.endpoint.url}#${randomBytes(4).toString("hex")}`,
      outs: { ...pickInputs(inputs), generating: false, gateFailure, verifiedAt: new Date().toISOString() },
    };
  }
}

async function verifyAndMeasure(
  inputs: Record<string, unknown>,
  input: VerifiedGenerationInputs,
  gate: Gate,
  url: string,
  hostHooks: Record<string, unknown>,
) {
  const endpoint = { url, model: input.endpoint.model, apiKey: input.apiKey };
  const { signal } = providerGuard();
  const say = (line: string) => process.stderr.write(`[VerifiedGeneration ${input.endpoint.url}] ${line}\n`);
  // The gate reports phase changes and, while waiting, one line per progressIntervalSeconds.
  const hooks = { ...hostHooks, signal, onPhase: (phase: string, detail: string) => say(`${phase}: ${detail}`) };
  // The benchmark that follows counts tokens from usage: a server whose streams carry none is not ready for it.
  const readiness = await gate.verify(endpoint, { ...(input.verifyPolicy ?? {}), requireUsage: true }, hooks);
  if (!readiness.ready) throw new Error(readiness.diagnosis ?? "the readiness gate failed");
  // Speculation that collapsed to ~1 token per step generates, but slower than none: not ready.
  const spec = input.speculative;
  if (spec) {
    const measured = await gate.measureAcceptance(endpoint, { signal });
    const failure = gate.acceptanceFailure(measured, spec.acceptanceFloor, spec);
    if (failure) throw new Error(failure);
    say(`speculative acceptance ${(measured.perRequest ?? measured.serverWide ?? 0).toFixed(2)} tokens per step`);
  }
  say(`ready after ${readiness.elapsedSeconds.toFixed(1)} s; benchmarking`);
  const result = await gate.bench(endpoint, input.benchPlan ?? {}, {
    signal,
    timeScale: input.timeScale ?? 1,
    acceptanceFloor: spec?.acceptanceFloor,
    onProgress: (e) => {
      if (e.kind === "stage") say(`bench ${e.stage}: ${e.detail}`);
      if (e.kind === "level")
        say(
          `${gate.levelName(e.summary)}: ${e.summary.outputTokensPerSecond.toFixed(1)} tok/s, ${e.summary.errors} errors`,
        );
    },
  });
  if (signal.aborted)
    throw new Error(`the benchmark was ${String((signal.reason as Error)?.message ?? "interrupted")}`);
  // The one verdict (gate/judge/verdict.ts): a server gone, a level over the error budget, a
  // run that stopped or measured nothing fails the create, so no plan is published beside a broken
  // level and the next `up` measures again. Rates the server kept up with pass, with no capacity figure.
  const verdict = gate.verdictOf(result);
  if (!verdict.ok) throw new Error(`the benchmark ${verdict.failure}; no throughput or capacity plan is published`);
  const plan = gate.capacity(result.sustainedOutputTokensPerSecond, input.workload ?? {});
  const measured = gate.measuredOutputs(readiness, result, plan);
  const healthBaseline = await gate.recordHealth(endpoint, gate.VerifyPolicySchema.parse(input.verifyPolicy ?? {}), {
    timeScale: input.timeScale ?? 1,
    speculative: input.speculative,
    signal,
    answerScore: gate.answerScoreBaseline(readiness.answers),
  });
  const outs = { ...pickInputs(inputs), ...measured, healthBaseline, drift: [] };
  const suffix = randomBytes(4).toString("hex");
  return { id: `${endpoint.model}@${input.endpoint.url}#${suffix}`, outs };
}

/**
 * The health check of a refresh, on a service that still generates: its findings become drift
 * (diff replaces on it, so the next `up` re-gates), a figure it could not measure `notChecked`.
 */
async function readHealth(
  props: Record<string, unknown>,
  gate: Gate,
): Promise<{ healthCheck: gate.HealthCheck; drift: Drift[]; notChecked?: string }> {
  const input = INPUTS.decode(props, [...HOST_ACCESS, "verifyPolicy", "timeScale", "speculative"]);
  const baseline = props.healthBaseline as gate.HealthBaseline;
  const policy = gate.VerifyPolicySchema.parse(input.verifyPolicy ?? {});
  const healthCheck = await withHostAccess(input, gate, (url) =>
    gate.checkHealth({ url, model: input.endpoint.model, apiKey: input.apiKey }, baseline, {
      policy,
      health: policy.health,
      timeScale: input.timeScale ?? 1,
      speculative: input.speculative,
      signal: providerGuard().signal,
    }),
  );
  const drift = gate.healthDrift(healthCheck);
  return healthCheck.notChecked === null
    ? { healthCheck, drift }
    : { healthCheck, drift, notChecked: `health not checked: ${healthCheck.notChecked}` };
}

/** Nothing that defines the served thing changed: keep the measurements, re-plan capacity. */
export async function update(
  _id: string,
  olds: Record<string, unknown>,
  news: Record<string, unknown>,
): Promise<{ outs: Record<string, unknown> }> {
  const sustained = Number(olds.sustainedOutputTokensPerSecond);
  const plan = gate.capacity(
    Number.isFinite(sustained) ? sustained : 0,
    INPUTS.decode(news, ["workload"]).workload ?? {},
  );
  const { hostKeyRefused, ...measured } = pickMeasured(olds);
  // The refresh before this update was refused on the host key (the state's connection pinned another
  // one): its check runs now, with the connection the program gives. Refused again, this fails.
  const checked = typeof hostKeyRefused === "string" ? await readGenerating(news, gate) : {};
  // The answers behind the figure are those of the recorded verification: the note travels with the re-plan.
  const recorded = olds.capacity;
  const answers =
    typeof recorded === "object" && recorded !== null && "answers" in recorded ? recorded.answers : undefined;
  const capacity = typeof answers === "string" ? { ...plan, answers } : plan;
  return { outs: { ...measured, ...pickInputs(news), ...checked, capacity } };
}

/** The refresh's one generation waits this long unless verification.refreshTimeoutSeconds says otherwise. */
const REFRESH_TIMEOUT_SECONDS = 60;

/** One tiny generation through the host access `props` name: whether the service still generates. */
async function readGenerating(
  props: Record<string, unknown>,
  gate: Gate,
): Promise<{ generating: boolean; generationCheck: unknown }> {
  const input = INPUTS.decode(props, [...HOST_ACCESS, "verifyPolicy"]);
  const timeout = input.verifyPolicy?.refreshTimeoutSeconds ?? REFRESH_TIMEOUT_SECONDS;
  const result = await withHostAccess<{ generating: boolean; check: unknown }>(input, gate, (url) =>
    gate.checkGenerating({ url, model: input.endpoint.model, apiKey: input.apiKey }, input.verifyPolicy ?? {}, timeout),
  );
  return { generating: result.generating, generationCheck: result.check };
}

/**
 * Refresh: one tiny generation; a host that stopped generating shows as drift (generating: false).
 * A host whose key the stored connection refuses (the user pinned its new key since) is not read:
 * the record is kept, marked hostKeyRefused, and the update that follows checks with the current
 * connection (see update), instead of failing every `pulumi up` until one ran with --refresh=false.
 */
export async function read(
  id: string,
  props: Record<string, unknown>,
): Promise<{ id: string; props: Record<string, unknown>; inputs: Record<string, unknown> }> {
  try {
    const { hostKeyRefused: _stale, notChecked: _unchecked, healthCheck: _last, ...rest } = props;
    const generation = await readGenerating(props, gate);
    // Health is checked on a service that still generates and has a baseline (one verified since
    // health existed and with it enabled); one that stopped generating is already drift.
    const enabled = gate.VerifyPolicySchema.parse(props.verifyPolicy ?? {}).health.enabled;
    const health =
      generation.generating && enabled && props.healthBaseline ? await readHealth(props, gate) : { drift: [] };
    return { id, props: { ...rest, ...generation, ...health }, inputs: pickInputs(props) };
  } catch (e) {
    const refusal = hostKeyRefusalOf(e);
    if (refusal === undefined) throw e;
    process.stderr.write(
      `[VerifiedGeneration] not checked: ${refusal}. The recorded verification is kept; the next update checks with the connection the program gives now\n`,
    );
    return { id, props: { ...props, hostKeyRefused: refusal }, inputs: pickInputs(props) };
  }
}

export async function deleteResource(): Promise<void> {
  // A verification is a record of what was measured; there is nothing on the host to remove.
}

/** What callTimeProvider("dist/components/verified-generation/provider.js") calls. */
export const provider = { check, diff, create, update, read, delete: deleteResource };
