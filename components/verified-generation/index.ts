/**
 * VerifiedGeneration: `pulumi up` does not finish until the served model has generated, and it
 * leaves measured throughput and a capacity plan behind as outputs. Create = readiness gate, then
 * benchmark, then capacity plan; refresh = one cheap generation (drift when it fails).
 */
import * as pulumi from "@pulumi/pulumi";
import { callTimeProvider } from "../call-time-provider";
import type { VerifiedGenerationOutputs } from "../../gate/reports/outputs";
import type { BenchPlan, VerifyPolicy, Workload } from "../../gate/schema";
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
  /** Fingerprint of the CUDA toolkit the service runs on. Replaces on change. */
  toolkitFingerprint: pulumi.Input<string>;
  /** Lock of the Python serving environment (package versions). Replaces on change. */
  environmentLock: pulumi.Input<string>;
  /** Readiness gate knobs, parsed once by the stack config (gate/schema.ts VerifyPolicySchema). */
  verifyPolicy?: pulumi.Input<VerifyPolicy>;
  /** Benchmark knobs, parsed (gate/schema.ts BenchPlanSchema); a change replaces the resource: it measures again. */
  benchPlan?: pulumi.Input<BenchPlan>;
  /** Workload of the capacity plan, parsed (gate/schema.ts WorkloadSchema); a change re-plans without re-measuring. */
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
  /** Timeout of the refresh's single generation, seconds (default 60). */
  refreshTimeoutSeconds?: pulumi.Input<number>;
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
}

type Out<K extends keyof VerifiedGenerationOutputs> = pulumi.Output<VerifiedGenerationOutputs[K]>;

export class VerifiedGeneration extends pulumi.dynamic.Resource {
  declare public readonly generating: Out<"generating">;
  declare public readonly generationCheck: Out<"generationCheck">;
  declare public readonly model: Out<"model">;
  declare public readonly servedModels: Out<"servedModels">;
  declare public readonly modelMismatch: Out<"modelMismatch">;
  declare public readonly verifiedAt: Out<"verifiedAt">;
  declare public readonly readiness: Out<"readiness">;
  declare public readonly singleRequest: Out<"singleRequest">;
  declare public readonly sweep: Out<"sweep">;
  declare public readonly saturationConcurrency: Out<"saturationConcurrency">;
  declare public readonly saturated: Out<"saturated">;
  declare public readonly saturationVerdict: Out<"saturationVerdict">;
  declare public readonly kneeUndetermined: Out<"kneeUndetermined">;
  declare public readonly sustainedOutputTokensPerSecond: Out<"sustainedOutputTokensPerSecond">;
  declare public readonly acceptanceLength: Out<"acceptanceLength">;
  declare public readonly benchComplete: Out<"benchComplete">;
  declare public readonly capacity: Out<"capacity">;
  declare public readonly timeNote: Out<"timeNote">;

  constructor(name: string, args: VerifiedGenerationArgs, opts?: pulumi.CustomResourceOptions) {
    const props = {
      providerVersion: PROVIDER_VERSION,
      endpoint: pulumi.all([args.url, args.model]).apply(([url, model]) => ({ url, model })),
      apiKey: args.apiKey,
      serviceIdentity: args.serviceIdentity,
      toolkitFingerprint: args.toolkitFingerprint,
      environmentLock: args.environmentLock,
      verifyPolicy: args.verifyPolicy,
      benchPlan: args.benchPlan,
      workload: args.workload,
      timeScale: args.timeScale,
      speculative: args.speculative,
      serviceStateCommand: args.serviceStateCommand,
      serviceLogsCommand: args.serviceLogsCommand,
      refreshTimeoutSeconds: args.refreshTimeoutSeconds,
      hostAccess: args.hostAccess ? pulumi.secret(args.hostAccess) : undefined,
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
