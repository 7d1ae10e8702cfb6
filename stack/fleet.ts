/**
 * The fleet as the program composes it (config `router`): the Router on its host entry's machine,
 * in front of the hosts whose VerifiedGeneration passed, then FleetVerification through it. What
 * index.ts exports as `fleet` (stack/outputs.ts FleetOutputsSchema).
 */
import * as pulumi from "@pulumi/pulumi";
import type { GpuhostConfig, HostConfig } from "./config";
import { FleetVerification } from "../components/fleet-verification";
import type { FleetOutputs } from "./outputs";
import type { HostConnectionInput } from "../components/host/script";
import type { VerifiedGeneration } from "../components/verified-generation";
import { urlSeenFrom } from "../components/services/endpoint";
import { Router } from "../components/router/router";

export interface FleetHost {
  host: HostConfig;
  connection: HostConnectionInput;
  verification: VerifiedGeneration;
  model: pulumi.Output<string>;
  /** The service the host runs (its comparison's pick, or the configured one): a mixed fleet says what it measured. */
  activeService: pulumi.Output<string>;
  /** Host seconds per wall second (the platform's; 1 on real hosts): the host's figures are in this clock. */
  timeScale: number;
}

type RouterConfig = NonNullable<GpuhostConfig["router"]>;

/** The fleet's outputs, or null when the stack configures no router. */
export function gpuFleet(
  config: GpuhostConfig,
  hosts: FleetHost[],
  apiKey?: pulumi.Output<string>,
): pulumi.Output<FleetOutputs> | null {
  const r = config.router;
  if (!r) return null;
  const on = hosts.find((h) => h.host.name === r.host);
  if (!on) throw new Error(`router.host ${r.host} names no host`);
  const router = fleetRouter(config, r, on, hosts, apiKey);
  // The fleet is measured in the hosts' own clock, so that scaling efficiency compares like with
  // like; hosts on different clocks (simulated beside real) have no common one: wall time then.
  const scales = [...new Set(hosts.map((h) => h.timeScale))];
  const timeScale = scales.length === 1 ? scales[0] : 1;
  // The router as seen from where `pulumi up` runs: this machine for a simulated or local router.
  const seen = (port: number) => urlSeenFrom("here", on.host, r.bind, port);
  const verification = new FleetVerification(
    "fleet-verified",
    {
      router: on.model.apply((model) => ({
        url: seen(r.port),
        metricsUrl: `${seen(r.prometheusPort)}/metrics`,
        model,
      })),
      apiKey,
      routerIdentity: router.identity,
      workers: router.workers,
      hostFigures: hostFigures(hosts, Boolean(r.groups)),
      groups: r.groups,
      minHealthyHosts: r.minHealthyHosts,
      verifyPolicy: config.verification,
      benchPlan: config.benchmark,
      benchRepeats: r.benchRepeats,
      timeScale,
      workload: config.workload,
      readyDeadlineSeconds: r.readyDeadlineSeconds,
      routerHost: pulumi
        .all([router.hostCheck, pulumi.output(on.connection)])
        .apply(([check, connection]) => ({ ...check, connection })),
    },
    { dependsOn: [router, router.configured] },
  );
  return fleetOutputs(router, verification);
}

/** The Router on ON's machine, in front of every host (those whose gate failed are left out, with why). */
function fleetRouter(
  config: GpuhostConfig,
  r: RouterConfig,
  on: FleetHost,
  hosts: FleetHost[],
  apiKey?: pulumi.Output<string>,
): Router {
  return new Router(
    "router",
    {
      connection: on.connection,
      router: r,
      apiKey,
      hosts: hosts.map((h) => ({
        name: h.host.name,
        url: urlSeenFrom(on.host, h.host, config.services.host, h.host.port ?? config.services.port),
        generating: h.verification.generating,
        failure: h.verification.gateFailure,
      })),
    },
    // Only hosts whose gate ran in this update are workers: the router waits for every gate.
    { dependsOn: hosts.map((h) => h.verification) },
  );
}

/** Each host's own measurement, by name; a mixed fleet's (GROUPED) with its sweep's curve. */
function hostFigures(hosts: FleetHost[], grouped: boolean) {
  return Object.fromEntries(
    hosts.map((h) => [
      h.host.name,
      pulumi
        .all([
          h.verification.sustainedOutputTokensPerSecond,
          h.verification.verifiedAt,
          h.verification.sweep,
          h.activeService,
        ])
        .apply(([sustained, at, sweep, active]) => ({
          sustainedOutputTokensPerSecond: typeof sustained === "number" ? sustained : null,
          verifiedAt: typeof at === "string" ? at : null,
          // A mixed fleet plans its split from its groups' own curves (the points the plan reads).
          curve: grouped && Array.isArray(sweep) ? sweep.map(curvePoint) : null,
          activeService: active,
        })),
    ]),
  );
}

/** What index.ts exports as `fleet`. */
function fleetOutputs(router: Router, v: FleetVerification): pulumi.Output<FleetOutputs> {
  const outputs: { [K in keyof FleetOutputs]: pulumi.Input<FleetOutputs[K]> } = {
    routerEndpoint: router.endpoint,
    smgVersion: router.smgVersion,
    registered: v.registered,
    leftOut: v.leftOut,
    sweep: v.sweep,
    saturationConcurrency: v.saturationConcurrency,
    sustainedOutputTokensPerSecond: v.sustainedOutputTokensPerSecond,
    sustainedInterval: v.sustainedInterval,
    hostsSustainedOutputTokensPerSecond: v.hostsSustainedOutputTokensPerSecond,
    scalingEfficiency: v.scalingEfficiency,
    plan: v.plan,
    drift: v.drift,
    mixed: v.mixed,
    verifiedAt: v.verifiedAt,
  };
  return pulumi.output(outputs);
}

/** The part of a sweep level the mixed plan reads (gate/plan/mixed-plan.ts's curve point). */
function curvePoint(l: {
  level: number;
  mode: "closed" | "open";
  outputTokensPerSecond: number;
  ttftP95Seconds: number | null;
  itlPerTokenP95Seconds: number | null;
  errors: number;
  withinErrorBudget: boolean;
}) {
  return {
    level: l.level,
    mode: l.mode,
    outputTokensPerSecond: l.outputTokensPerSecond,
    ttftP95Seconds: l.ttftP95Seconds,
    itlPerTokenP95Seconds: l.itlPerTokenP95Seconds,
    errors: l.errors,
    withinErrorBudget: l.withinErrorBudget,
  };
}
