/**
 * FleetVerification: after the Router, `pulumi up` does not finish until the fleet answers through
 * the router (the gate's verify()), every registered worker is healthy in the router, and the fleet
 * is measured through it (the gate's bench(), concurrency scaled by the workers). Outputs: the
 * fleet's sustained tok/s, each worker's share of requests, the scaling efficiency (fleet over the
 * sum of the hosts' own figures) and the fleet's capacity plan. See provider.ts.
 */
import * as pulumi from "@pulumi/pulumi";
import { callTimeProvider } from "../call-time-provider";
import type { Certificate } from "../../gate/judge/certificate";
import type { BenchPlan, VerifyPolicy, Workload } from "../../gate/base/schema";
import type { FleetWorkers } from "../router";
import type { Drift } from "../drift/schema";
import { PROVIDER_VERSION, type FleetPlan, type SustainedInterval } from "./provider";
import type { RouterHostCheck } from "./router-host";
import type { MixedFleetOutput } from "./groups";
import type { RouterGroups } from "../router/schema";
import type { ServiceCurve } from "../../gate/plan/mixed-plan";

export { fleetPlan, sustainedInterval, type FleetPlan, type SustainedInterval } from "./provider";

export interface FleetVerificationArgs {
  router: pulumi.Input<{ url: string; metricsUrl: string; model: string }>;
  apiKey?: pulumi.Input<string>;
  /** What the router runs with (Router.identity): a change re-verifies and re-measures. */
  routerIdentity: pulumi.Input<string>;
  workers: pulumi.Input<FleetWorkers>;
  hostFigures: pulumi.Input<
    Record<
      string,
      pulumi.Input<{
        sustainedOutputTokensPerSecond: number | null;
        verifiedAt: string | null;
        /** The host's own sweep: a mixed fleet's split is planned from its groups' curves. */
        curve?: ServiceCurve["sweep"] | null;
        /** The service the host ran when measured (the mixed fleet's outputs say it per group). */
        activeService?: string | null;
      }>
    >
  >;
  /** router.groups: each class on its own group of hosts under its own served name (groups.ts). */
  groups?: pulumi.Input<RouterGroups>;
  minHealthyHosts?: number;
  verifyPolicy?: pulumi.Input<VerifyPolicy>;
  benchPlan?: pulumi.Input<BenchPlan>;
  /** Runs of each fleet level (router.benchRepeats, at least 2): the sustained figure carries an interval. */
  benchRepeats?: number;
  /** The hosts' seconds per wall second (simulated: the simulator's time scale): the fleet is measured in their clock. */
  timeScale?: number;
  workload?: pulumi.Input<Workload>;
  readyDeadlineSeconds?: number;
  /**
   * The router's machine and what the Router wrote there (Router.hostCheck plus its connection):
   * refresh probes it (unit, config, active, smg), the next create repairs it. Stored as a secret.
   */
  routerHost?: pulumi.Input<RouterHostCheck>;
}

export interface FleetWorkerFigures {
  name: string;
  url: string;
  requests: number;
  share: number | null;
  hostSustainedOutputTokensPerSecond: number | null;
}

export class FleetVerification extends pulumi.dynamic.Resource {
  declare public readonly endpoint: pulumi.Output<string>;
  declare public readonly registered: pulumi.Output<FleetWorkerFigures[]>;
  declare public readonly leftOut: pulumi.Output<Array<{ name: string; url: string; reason: string }>>;
  declare public readonly sweep: pulumi.Output<
    Array<{
      concurrency: number;
      offeredRequestsPerSecond?: number | null;
      outputTokensPerSecond: number;
      requests: number;
      errors: number;
      /** The level's validity certificate (gate/judge/certificate.ts); absent: recorded before certificates. */
      certificate?: Certificate | null;
    }>
  >;
  declare public readonly saturationConcurrency: pulumi.Output<number | null>;
  declare public readonly sustainedOutputTokensPerSecond: pulumi.Output<number>;
  declare public readonly sustainedInterval: pulumi.Output<SustainedInterval | null>;
  declare public readonly hostsSustainedOutputTokensPerSecond: pulumi.Output<number>;
  declare public readonly scalingEfficiency: pulumi.Output<number | null>;
  declare public readonly plan: pulumi.Output<FleetPlan>;
  declare public readonly drift: pulumi.Output<Drift[]>;
  /** A mixed fleet (groups): each class measured at once through the router, beside the plan's prediction; else null. */
  declare public readonly mixed: pulumi.Output<MixedFleetOutput | null>;
  declare public readonly verifiedAt: pulumi.Output<string>;

  constructor(name: string, args: FleetVerificationArgs, opts?: pulumi.CustomResourceOptions) {
    super(
      callTimeProvider("dist/components/fleet-verification/provider.js"),
      name,
      {
        providerVersion: PROVIDER_VERSION,
        router: args.router,
        apiKey: args.apiKey,
        routerIdentity: args.routerIdentity,
        workers: args.workers,
        hostFigures: args.hostFigures,
        groups: args.groups,
        minHealthyHosts: args.minHealthyHosts,
        verifyPolicy: args.verifyPolicy,
        benchPlan: args.benchPlan,
        benchRepeats: args.benchRepeats,
        timeScale: args.timeScale,
        workload: args.workload,
        readyDeadlineSeconds: args.readyDeadlineSeconds,
        routerHost: args.routerHost === undefined ? undefined : pulumi.secret(args.routerHost),
        endpoint: undefined,
        registered: undefined,
        leftOut: undefined,
        reconciled: undefined,
        readinessSeconds: undefined,
        sweep: undefined,
        saturationConcurrency: undefined,
        saturated: undefined,
        sustainedOutputTokensPerSecond: undefined,
        sustainedInterval: undefined,
        hostsSustainedOutputTokensPerSecond: undefined,
        scalingEfficiency: undefined,
        plan: undefined,
        drift: undefined,
        mixed: undefined,
        verifiedAt: undefined,
      },
      { ...opts, additionalSecretOutputs: [...(opts?.additionalSecretOutputs ?? []), "apiKey", "routerHost"] },
      "gpuhost",
      "FleetVerification",
    );
  }
}
