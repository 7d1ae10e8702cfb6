/**
 * VerifiedGeneration: `pulumi up` does not finish until the served model has generated, and it
 * leaves measured throughput and a capacity plan behind as outputs. Create = readiness gate, then
 * benchmark, then capacity plan; refresh = one cheap generation (drift when it fails).
 */
import * as pulumi from "@pulumi/pulumi";
import { callTimeProvider } from "../call-time-provider";
import type { HostConnectionInput } from "../host/script";
import { gateTunnel, gateUrl } from "../services/endpoint";
import { type ServiceKind, type ServicesConfig, speculativeOf } from "../services/schema";
import { unitName } from "../services/unit";
import type { VerifiedGenerationOutputs } from "../../gate/reports/outputs";
import type { BenchPlan, VerifyPolicy, Workload } from "../../gate/base/schema";
import type { HealthBaseline, HealthCheck } from "../../gate/health/health";
import type { Drift } from "../drift/schema";
import { PROVIDER_VERSION } from "./provider";

export { PROVIDER_VERSION, INPUT_KEYS, REPLACE_KEYS } from "./provider";

export interface VerifiedGenerationArgs {
  /** The OpenAI-compatible endpoint as reached from where `pulumi up` runs, e.g. http://127.0.0.1:30000. Replaces on change. */
  url: pulumi.Input<string>;
  /** The served model id, as /v1/models lists it. Replaces on change. */
  model: pulumi.Input<string>;
  /** Bearer token (--api-key of the server); stored as a secret output. */
  apiKey?: pulumi.Input<string>;
  /** What the service is: e.g. its rendered unit and launch arguments, hashed. Replaces on change. */
  serviceIdentity: pulumi.Input<string>;
  /**
   * The start of the service this verifies (the host's activation id, ServingService.activationId):
   * every start gpuhost makes gives a new one, so a restart, even into a service identity verified
   * before (a reverted rollout), is verified again in the same update. Replaces on change.
   */
  activation?: pulumi.Input<string>;
  /** Fingerprint of the CUDA toolkit the service runs on. Replaces on change. */
  toolkitFingerprint: pulumi.Input<string>;
  /** Lock of the Python serving environment (package versions). Replaces on change. */
  environmentLock: pulumi.Input<string>;
  /** Readiness gate knobs, parsed once by the stack config (gate/base/schema.ts VerifyPolicySchema). */
  verifyPolicy?: pulumi.Input<VerifyPolicy>;
  /** Benchmark knobs, parsed (gate/base/schema.ts BenchPlanSchema); a change replaces the resource: it measures again. */
  benchPlan?: pulumi.Input<BenchPlan>;
  /** Workload of the capacity plan, parsed (gate/base/schema.ts WorkloadSchema); a change re-plans without re-measuring. */
  workload?: pulumi.Input<Workload>;
  /**
   * Simulated seconds per wall second of the server (absent: 1, real hardware): the benchmark's
   * figures are in the host's own time, like the service comparison's (output `timeNote`).
   */
  timeScale?: number;
  /**
   * The active service's speculative decoding (EAGLE-3, DFlash): after readiness its acceptance is
   * measured, and below acceptanceFloor the resource fails, naming the draft model.
   */
  speculative?: pulumi.Input<{ algorithm: string; draftModelPath: string; acceptanceFloor: number }>;
  /** argv run locally to read the unit's state, e.g. ["ssh", "root@h", "systemctl show -p NRestarts,ActiveState sglang"]. */
  serviceStateCommand?: pulumi.Input<pulumi.Input<string>[]>;
  /** argv run locally for the unit's last log lines, e.g. ["ssh", "root@h", "journalctl -u sglang -n 50 --no-pager"]. */
  serviceLogsCommand?: pulumi.Input<pulumi.Input<string>[]>;
  /**
   * SSH hosts: reach the service through an SSH tunnel over this connection and read the unit's
   * state and logs over it; `url` then names the service as seen on the host. Stored as a secret.
   */
  hostAccess?: pulumi.Input<{
    connection: pulumi.Input<Record<string, unknown>>;
    unit: string;
    remoteHost: string;
    remotePort: number;
  }>;
  /** A fleet's host: a gate that does not pass is recorded (generating false, gateFailure) instead of failing the update. */
  failureIsOutcome?: boolean;
}

/**
 * For SSH hosts: what VerifiedGeneration needs to tunnel to the service bound at bindHost:port and to
 * read the unit's state and logs over the same connection (a secret: it carries the private key).
 * Undefined otherwise.
 */
export function hostAccess(
  connection: HostConnectionInput,
  unit: pulumi.Input<string>,
  bindHost: string,
  port: number,
): VerifiedGenerationArgs["hostAccess"] {
  const target = gateTunnel(connection, bindHost, port);
  if (target === undefined) return undefined;
  return pulumi.all([pulumi.output(connection), unit]).apply(([conn, unitName]) => ({
    connection: conn,
    unit: unitName,
    ...target,
  }));
}

/** What a host's verification is built from: the stack's sections it reads, and what the components made. */
export interface VerificationSources {
  connection: HostConnectionInput;
  services: ServicesConfig;
  verification: VerifyPolicy;
  benchmark: BenchPlan;
  workload: Workload;
  apiKey?: pulumi.Input<string>;
  /** ServingService's served model name. */
  model: pulumi.Input<string>;
  /** Host seconds per wall-clock second (the platform's; 1 on real hosts): figures are in host time. */
  timeScale: number;
  /** The service that runs (the configured one, or the comparison's pick). */
  active: pulumi.Output<ServiceKind>;
  /** What identifies the running service (its unit's stamp): a change verifies again. */
  serviceIdentity: pulumi.Input<string>;
  /** Its start (the activation id, with the comparison's run where one switched the units): a change verifies again. */
  activation: pulumi.Input<string>;
  toolkitFingerprint: pulumi.Input<string>;
  environmentLock: pulumi.Input<string>;
  /** A fleet's host: a failing gate is recorded, not an update failure (VerifiedGenerationArgs). */
  failureIsOutcome?: boolean;
  /** The platform's probes of a unit's state and logs (components/platform.ts serviceProbes). */
  serviceProbes(unit: string): { state: pulumi.Input<string>[]; logs: pulumi.Input<string>[] } | undefined;
}

/**
 * The verification's arguments, in one place: the gate's URL (SSH hosts: through a tunnel), the
 * parsed policy, plan and workload, the active service's draft and acceptance floor, and the unit
 * probes (local hosts) or host access (SSH hosts) through which the gate reads the unit.
 */
export function verificationArgs(src: VerificationSources): VerifiedGenerationArgs {
  const s = src.services;
  const unit = src.active.apply(unitName);
  const probe = unit.apply((u) => src.serviceProbes(u));
  return {
    url: gateUrl(src.connection, s.host, s.port),
    model: src.model,
    apiKey: src.apiKey,
    serviceIdentity: src.serviceIdentity,
    activation: src.activation,
    toolkitFingerprint: src.toolkitFingerprint,
    environmentLock: src.environmentLock,
    verifyPolicy: src.verification,
    benchPlan: src.benchmark,
    workload: src.workload,
    timeScale: src.timeScale,
    failureIsOutcome: src.failureIsOutcome,
    speculative: src.active.apply((kind) => speculativeOf(s, kind)) as VerifiedGenerationArgs["speculative"],
    serviceStateCommand: probe.apply((p) => p?.state) as pulumi.Output<string[]>,
    serviceLogsCommand: probe.apply((p) => p?.logs) as pulumi.Output<string[]>,
    hostAccess: hostAccess(src.connection, unit, s.host, s.port),
  };
}

type Out<K extends keyof VerifiedGenerationOutputs> = pulumi.Output<VerifiedGenerationOutputs[K]>;

export class VerifiedGeneration extends pulumi.dynamic.Resource {
  /** Whether the endpoint generated at the last create or refresh; false is drift. */
  declare public readonly generating: Out<"generating">;
  /** "ok", or a short stable reason the last refresh found no generation. */
  declare public readonly generationCheck: Out<"generationCheck">;
  /** The served model id that was verified. */
  declare public readonly model: Out<"model">;
  /** The model(s) the server named in its responses (a server may ignore the request's `model`). */
  declare public readonly servedModels: Out<"servedModels">;
  /** A served model other than the one asked for, or null. */
  declare public readonly modelMismatch: Out<"modelMismatch">;
  /** ISO time verification and benchmark finished. */
  declare public readonly verifiedAt: Out<"verifiedAt">;
  /** The readiness gate: time to verified generation, each phase with its timing. */
  declare public readonly readiness: Out<"readiness">;
  /** Single requests at each max_tokens. */
  declare public readonly singleRequest: Out<"singleRequest">;
  /** The concurrency sweep, level by level. */
  declare public readonly sweep: Out<"sweep">;
  /** The knee: the concurrency past which throughput stops paying for latency. */
  declare public readonly saturationConcurrency: Out<"saturationConcurrency">;
  /** A knee was found; false: not saturated up to the last level. */
  declare public readonly saturated: Out<"saturated">;
  /** The knee in one sentence, with the levels excluded by the error budget. */
  declare public readonly saturationVerdict: Out<"saturationVerdict">;
  /** The intervals cannot tell whether a step gained more than kneeMinGain: run more repeats. */
  declare public readonly kneeUndetermined: Out<"kneeUndetermined">;
  /** Output tokens/s the host sustains at the knee: what the capacity plan is built on. */
  declare public readonly sustainedOutputTokensPerSecond: Out<"sustainedOutputTokensPerSecond">;
  /** Speculative services: the measured acceptance length (checked against the floor). */
  declare public readonly acceptanceLength: Out<"acceptanceLength">;
  /** Every sweep level ran. */
  declare public readonly benchComplete: Out<"benchComplete">;
  /** The capacity plan of the configured workload on this host. */
  declare public readonly capacity: Out<"capacity">;
  /** The answer check's certificate, beside the throughput certificates (gate/readiness/answers.ts). */
  declare public readonly answerCertificate: Out<"answerCertificate">;
  /** Which clock the figures are in: the host's own (simulated hosts: wall clock times the time scale). */
  declare public readonly timeNote: Out<"timeNote">;
  /** With failureIsOutcome: why the gate did not pass (undefined when it did). */
  declare public readonly gateFailure: pulumi.Output<string | undefined>;
  /** What each refresh's health check compares with: the reference answer, decode tok/s, acceptance (gate/health/health.ts). */
  declare public readonly healthBaseline: pulumi.Output<HealthBaseline | null | undefined>;
  /** The last refresh's health check: each figure measured (absent when none ran). */
  declare public readonly healthCheck: pulumi.Output<HealthCheck | undefined>;
  /** The health figures that drifted at the last refresh, each with expected, found and repair. */
  declare public readonly drift: pulumi.Output<Drift[] | undefined>;
  /** Why the last refresh could not check the service's health (then it is not clean); absent when it could. */
  declare public readonly notChecked: pulumi.Output<string | undefined>;

  constructor(name: string, args: VerifiedGenerationArgs, opts?: pulumi.CustomResourceOptions) {
    const props = {
      providerVersion: PROVIDER_VERSION,
      endpoint: pulumi.all([args.url, args.model]).apply(([url, model]) => ({ url, model })),
      apiKey: args.apiKey,
      serviceIdentity: args.serviceIdentity,
      activation: args.activation,
      toolkitFingerprint: args.toolkitFingerprint,
      environmentLock: args.environmentLock,
      verifyPolicy: args.verifyPolicy,
      benchPlan: args.benchPlan,
      workload: args.workload,
      timeScale: args.timeScale,
      speculative: args.speculative,
      serviceStateCommand: args.serviceStateCommand,
      serviceLogsCommand: args.serviceLogsCommand,
      hostAccess: args.hostAccess ? pulumi.secret(args.hostAccess) : undefined,
      failureIsOutcome: args.failureIsOutcome,
      // Declared so the engine fills them in as outputs.
      generating: undefined,
      generationCheck: undefined,
      model: undefined,
      servedModels: undefined,
      modelMismatch: undefined,
      verifiedAt: undefined,
      readiness: undefined,
      singleRequest: undefined,
      sweep: undefined,
      saturationConcurrency: undefined,
      saturated: undefined,
      saturationVerdict: undefined,
      kneeUndetermined: undefined,
      sustainedOutputTokensPerSecond: undefined,
      acceptanceLength: undefined,
      benchComplete: undefined,
      capacity: undefined,
      timeNote: undefined,
      gateFailure: undefined,
      healthBaseline: undefined,
      healthCheck: undefined,
      drift: undefined,
      notChecked: undefined,
    };
    super(
      callTimeProvider("dist/components/verified-generation/provider.js"),
      name,
      props,
      { ...opts, additionalSecretOutputs: [...(opts?.additionalSecretOutputs ?? []), "apiKey", "hostAccess"] },
      "gpuhost",
      "VerifiedGeneration",
    );
  }
}
