/**
 * ServiceComparison (`services.compare: true`): `pulumi up` measures each configured service of one
 * host in turn on the same GPUs, through the same units and the same gate, with the same workload;
 * it leaves per service the sweep, knee, acceptance and crossover and the recommendation as outputs,
 * and (with `services.active: auto`) the winner active. Its inputs are the units' stamps, the
 * workload and the policy: with none changed there is no diff, and nothing is measured again.
 */
import * as pulumi from "@pulumi/pulumi";
import type { ServiceComparisonOutputs } from "../../gate/reports/outputs";
import type { BenchPlan, VerifyPolicy, Workload } from "../../gate/base/schema";
import { callTimeProvider } from "../call-time-provider";
import type { HostConnectionInput } from "../host/script";
import { gateTunnel, gateUrl } from "../services/endpoint";
import {
  configuredServices,
  initialService,
  type ServiceKind,
  type ServicesConfig,
  type Speculative,
  speculativeOf,
} from "../services/schema";
import { PROVIDER_VERSION, type ComparisonPlan } from "./provider";

export { PROVIDER_VERSION, INPUT_KEYS, MEASURE_KEYS, type ComparisonPlan } from "./provider";

export interface ServiceComparisonArgs {
  /** The host connection (SSH keys as Pulumi secrets); activations run over it. Stored as a secret. */
  connection: pulumi.Input<Record<string, unknown>>;
  /** The endpoint as the gate reaches it (SSH hosts: as seen on the host, see `tunnel`). */
  url: pulumi.Input<string>;
  model: pulumi.Input<string>;
  apiKey?: pulumi.Input<string>;
  /** SSH hosts: tunnel to this address on the host over the connection. */
  tunnel?: { remoteHost: string; remotePort: number };
  /** Each configured service's activation stamp (ServingService.stamps). */
  stamps: pulumi.Input<Partial<Record<ServiceKind, string>>>;
  services: ServiceKind[];
  drafts: Partial<Record<ServiceKind, Speculative>>;
  plan: ComparisonPlan;
  activateTimeoutSeconds: number;
  deadlineSeconds: number;
}

/** What a host's comparison is built from: the stack's sections it reads, and what ServingService made. */
export interface ComparisonSources {
  connection: HostConnectionInput;
  services: ServicesConfig;
  verification: VerifyPolicy;
  benchmark: BenchPlan;
  workload: Workload;
  /** GPUs on the host (the capacity job's plan is per host). */
  gpus: number;
  /** Host seconds per wall-clock second (the platform's; 1 on real hosts). */
  timeScale: number;
  /** ServingService's served model name and per-service activation stamps. */
  model: pulumi.Input<string>;
  stamps: pulumi.Input<Partial<Record<ServiceKind, string>>>;
  apiKey?: pulumi.Input<string>;
}

/**
 * The comparison's arguments, in one place: the same gate policy and the benchmark's settings
 * (levels or rates, request length, workload, SLO, repeats, error budget and knee) as VerifiedGeneration, the capacity workload as the job, the platform's time
 * scale; a deadline of each service's verification, benchmark and start-up, plus slack.
 */
export function comparisonArgs(src: ComparisonSources): ServiceComparisonArgs {
  const s = src.services;
  const bench = src.benchmark;
  const services = configuredServices(s);
  const drafts: Partial<Record<ServiceKind, Speculative>> = {};
  for (const kind of services) {
    const spec = speculativeOf(s, kind);
    if (spec) drafts[kind] = spec;
  }
  const perService = src.verification.deadlineSeconds + bench.deadlineSeconds + s.timeoutStartSec + 120;
  return {
    connection: pulumi.output(src.connection),
    url: gateUrl(src.connection, s.host, s.port),
    tunnel: gateTunnel(src.connection, s.host, s.port),
    model: src.model,
    apiKey: src.apiKey,
    stamps: src.stamps,
    services,
    drafts,
    plan: {
      // The host's one benchmark plan, as VerifiedGeneration takes it: no knob translated here.
      plan: bench,
      timeScale: src.timeScale,
      verifyPolicy: src.verification,
      job: {
        purpose: "batch" as const,
        completions: src.workload.completions,
        outputTokensPerCompletion: src.workload.outputTokensPerCompletion,
        deadlineDays: src.workload.deadlineDays,
        gpusPerHost: Math.max(1, src.gpus),
      },
      auto: s.active === "auto",
      restore: initialService(s),
      acceptanceFloor: 1.5,
    },
    activateTimeoutSeconds: s.timeoutStartSec + 120,
    deadlineSeconds: services.length * perService,
  };
}

type Out<K extends keyof ServiceComparisonOutputs> = pulumi.Output<ServiceComparisonOutputs[K]>;

export class ServiceComparison extends pulumi.dynamic.Resource {
  /** Per service, in the order measured: sweep, knee, acceptance, crossover. */
  declare public readonly services: Out<"services">;
  /** The service the comparison recommends; null: none could be measured. */
  declare public readonly recommended: Out<"recommended">;
  /** The next best service. */
  declare public readonly runnerUp: Out<"runnerUp">;
  /** How much better the recommendation is than the runner-up (0.12 = 12 %). */
  declare public readonly margin: Out<"margin">;
  /** The recommendation with its reason, one sentence. */
  declare public readonly recommendation: Out<"recommendation">;
  /** The service left active: the recommendation under `active: auto`, else the configured one. */
  declare public readonly activeService: pulumi.Output<ServiceKind>;
  /** Its unit, e.g. sglang-eagle3.service. */
  declare public readonly activeUnit: Out<"activeUnit">;
  /** What clock the figures are in (the simulated host's own time when time-scaled). */
  declare public readonly timeNote: Out<"timeNote">;
  /** ISO time the comparison finished. */
  declare public readonly comparedAt: Out<"comparedAt">;

  constructor(name: string, args: ServiceComparisonArgs, opts?: pulumi.CustomResourceOptions) {
    const props = {
      providerVersion: PROVIDER_VERSION,
      connection: pulumi.secret(args.connection),
      tunnel: args.tunnel,
      endpoint: pulumi.all([args.url, args.model]).apply(([url, model]) => ({ url, model })),
      apiKey: args.apiKey,
      stamps: args.stamps,
      serviceKinds: args.services,
      drafts: args.drafts,
      plan: args.plan,
      activateTimeoutSeconds: args.activateTimeoutSeconds,
      deadlineSeconds: args.deadlineSeconds,
      // Declared so the engine fills them in as outputs.
      services: undefined,
      recommended: undefined,
      runnerUp: undefined,
      margin: undefined,
      recommendation: undefined,
      activeService: undefined,
      activeUnit: undefined,
      timeNote: undefined,
      comparedAt: undefined,
    };
    super(
      callTimeProvider("dist/components/service-comparison/provider.js"),
      name,
      props,
      { ...opts, additionalSecretOutputs: [...(opts?.additionalSecretOutputs ?? []), "apiKey", "connection"] },
      "gpuhost",
      "ServiceComparison",
    );
  }
}
