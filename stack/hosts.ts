/**
 * The hosts as the program composes them: per host entry its platform (SSH or this machine, or the
 * simulated one, chosen here once), its GpuServingHost, and its outputs (stack/outputs.ts
 * HostOutputsSchema) with the roofline beside the measured figures.
 */
import * as pulumi from "@pulumi/pulumi";
import { type GpuhostConfig, type HostConfig, hostConfig, hostConnection, simulatedRoot } from "./config";
import type { FleetHost } from "./fleet";
import type { HostOutputs } from "./outputs";
import { GpuServingHost } from "../components/gpu-serving-host";
import { trustConnection } from "../components/host-key";
import type { HostConnectionInput } from "../components/host/script";
import { connectedPlatform } from "../components/platform";
import { simulatedPlatform } from "../sim-host/host";
import { hostRoofline } from "../physics/outputs";
import { DEFAULT_MEM_FRACTION_STATIC } from "../physics/roofline";

/** What the program knows of the stack besides its config: where the project is, its secrets. */
export interface StackContext {
  config: GpuhostConfig;
  root: string;
  apiKey?: pulumi.Output<string>;
  secret: (key: string) => pulumi.Output<string>;
}

export interface ComposedHost {
  name: string;
  fleetHost: FleetHost;
  outputs: { [K in keyof HostOutputs]: pulumi.Input<HostOutputs[K]> };
}

/**
 * A machine's connection, with the host keys to check per its hostKeyPolicy (components/host-key):
 * a host entry's (`at` its index), or the drift check's operations machine (`at` its config path).
 */
export function connectionOf(
  ctx: StackContext,
  host: Pick<HostConfig, "name" | "connection">,
  at: number | string,
): HostConnectionInput {
  const i = typeof at === "number" ? at : 0;
  const c = hostConnection(host, ctx.root, ctx.secret, i);
  if (c.kind !== "ssh" || host.connection.kind !== "ssh") return c;
  // From the stack config the address is a plain string (the library takes an Input).
  return {
    ...trustConnection(
      host.name,
      { ...c, host: host.connection.host },
      host.connection,
      typeof at === "number" ? `gpuhost:hosts[${i}].connection` : at,
    ),
    kind: "ssh",
  };
}

/** One GpuServingHost per host entry, in the config's order. */
export function servingHosts(ctx: StackContext): ComposedHost[] {
  const { config } = ctx;
  return config.hosts.map((host, index) => {
    const platform =
      host.connection.kind === "simulated"
        ? simulatedPlatform(simulatedRoot(host, ctx.root, index), {
            ...config.simulator,
            faults: [...config.simulator.faults, ...(host.simulatorFaults ?? [])],
          })
        : connectedPlatform(connectionOf(ctx, host, index));
    const h = new GpuServingHost(host.name, {
      host,
      platform,
      // hosts[].port: hosts sharing one machine (simulated ones) each serve on their own port; in a
      // mixed fleet each host runs its group's service under its group's name.
      config: hostConfig(config, host),
      apiKey: ctx.apiKey,
      fleetMember: config.router !== undefined,
    });
    return {
      name: host.name,
      fleetHost: {
        host,
        connection: platform.connection,
        verification: h.verification,
        model: h.model,
        activeService: h.activeService,
        timeScale: platform.timeScale ?? 1,
      },
      outputs: hostOutputs(config, host, h),
    };
  });
}

/** A host's outputs, typed by the one output schema: every key it names, nothing else. */
function hostOutputs(config: GpuhostConfig, host: HostConfig, h: GpuServingHost): ComposedHost["outputs"] {
  const v = h.verification;
  return {
    gpus: host.gpus,
    toolkitFingerprint: h.toolkitFingerprint,
    nvccVersion: h.nvccVersion,
    toolkitProof: h.toolkitProof,
    topology: h.toolkit.topology,
    environmentLock: h.environmentLock,
    jitWorkspace: h.jitWorkspace,
    activeService: h.activeService,
    activeUnit: h.activeUnit,
    endpoint: h.endpoint,
    model: h.model,
    generating: v.generating,
    readiness: v.readiness,
    singleRequest: v.singleRequest,
    sweep: v.sweep,
    saturationConcurrency: v.saturationConcurrency,
    saturated: v.saturated,
    saturationVerdict: v.saturationVerdict,
    sustainedOutputTokensPerSecond: v.sustainedOutputTokensPerSecond,
    acceptanceLength: v.acceptanceLength,
    benchComplete: v.benchComplete,
    capacity: v.capacity,
    answerCertificate: v.answerCertificate,
    roofline: rooflineOf(config, host, h),
    drift: h.toolkitState.drift,
    comparison: comparisonOf(h),
  };
}

/** The host's roofline from the model's own config, beside the knee and throughput it measured. */
function rooflineOf(
  config: GpuhostConfig,
  host: HostConfig,
  h: GpuServingHost,
): pulumi.Output<ReturnType<typeof hostRoofline>> {
  const v = h.verification;
  return pulumi
    .all([h.modelConfig, v.saturationConcurrency, v.sustainedOutputTokensPerSecond, h.activeService])
    .apply(([read, concurrency, tokensPerSecond, service]) =>
      hostRoofline(
        host,
        read,
        {
          memFractionStatic: config.services.memFractionStatic ?? DEFAULT_MEM_FRACTION_STATIC,
          contextTokens: config.workload.outputTokensPerCompletion,
        },
        {
          concurrency: concurrency ?? null,
          tokensPerSecond: tokensPerSecond ?? null,
          speculative: service !== "autoregressive",
        },
      ),
    );
}

/** services.compare: per service the sweep, knee, acceptance and crossover, the recommendation. */
function comparisonOf(h: GpuServingHost): ComposedHost["outputs"]["comparison"] {
  const c = h.comparison;
  if (!c) return null;
  return pulumi.output({
    services: c.services,
    recommended: c.recommended,
    runnerUp: c.runnerUp,
    margin: c.margin,
    recommendation: c.recommendation,
    activeService: c.activeService,
    timeNote: c.timeNote,
    comparedAt: c.comparedAt,
  });
}
