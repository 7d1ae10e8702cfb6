/**
 * ServiceComparison (`services.compare: true`): `pulumi up` measures each configured service of one
 * host in turn on the same GPUs, through the same units and the same gate, with the same workload;
 * it leaves per service the sweep, knee, acceptance and crossover and the recommendation as outputs,
 * and (with `services.active: auto`) the winner active. Its inputs are the units' stamps, the
 * workload and the policy: with none changed there is no diff, and nothing is measured again.
 */
import * as pulumi from "@pulumi/pulumi";
import type { ServiceComparisonOutputs } from "../../gate/reports/outputs";
import { callTimeProvider } from "../call-time-provider";
import type { ServiceKind } from "../services/schema";
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
  drafts: Partial<Record<ServiceKind, { algorithm: string; draftModelPath: string; acceptanceFloor: number }>>;
  plan: ComparisonPlan;
  activateTimeoutSeconds: number;
  deadlineSeconds: number;
}

type Out<K extends keyof ServiceComparisonOutputs> = pulumi.Output<ServiceComparisonOutputs[K]>;

export class ServiceComparison extends pulumi.dynamic.Resource {
  declare public readonly services: Out<"services">;
  declare public readonly recommended: Out<"recommended">;
  declare public readonly runnerUp: Out<"runnerUp">;
  declare public readonly margin: Out<"margin">;
  declare public readonly recommendation: Out<"recommendation">;
  declare public readonly activeService: pulumi.Output<ServiceKind>;
  declare public readonly activeUnit: Out<"activeUnit">;
  declare public readonly timeNote: Out<"timeNote">;
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
