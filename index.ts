/**
 * The gpuhost program: stack config -> one GpuServingHost per host -> stack outputs. Each host's
 * platform (SSH or this machine, or the simulated one) is chosen here, once.
 * Outputs are plain values (no secrets): what a capacity plan, `gpuhost drift` or another stack
 * (StackReference) needs, keyed by host name.
 */
import * as pulumi from "@pulumi/pulumi";
import { type HostConfig, hostConfig, hostConnection, loadConfig, simulatedRoot } from "./stack/config";
import { DriftCheck, resolveDriftCheck } from "./components/drift-check";
import { GpuServingHost } from "./components/gpu-serving-host";
import { trustConnection } from "./components/host-key";
import type { HostConnectionInput } from "./components/host/script";
import { connectedPlatform } from "./components/platform";
import type { HostOutputs } from "./stack/outputs";
import { gpuFleet } from "./stack/fleet";
import { warnPendingOperations } from "./stack/pending-operations";
import { projectRoot } from "./project-files";
import { simulatedPlatform } from "./sim-host/host";
import { hostRoofline } from "./physics/outputs";
import { DEFAULT_MEM_FRACTION_STATIC } from "./physics/roofline";

const { config, apiKey, secret } = loadConfig();
// Before any resource: what an earlier, killed update left (read now, it is not this update's).
warnPendingOperations();
const root = projectRoot();

/**
 * A machine's connection, with the host keys to check per its hostKeyPolicy (components/host-key):
 * a host entry's (`at` its index), or the drift check's operations machine (`at` its config path).
 */
function connectionOf(host: Pick<HostConfig, "name" | "connection">, at: number | string): HostConnectionInput {
  const i = typeof at === "number" ? at : 0;
  const c = hostConnection(host, root, secret, i);
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

const hosts = config.hosts.map((host, index) => {
  const platform =
    host.connection.kind === "simulated"
      ? simulatedPlatform(simulatedRoot(host, root, index), {
          ...config.simulator,
          faults: [...config.simulator.faults, ...(host.simulatorFaults ?? [])],
        })
      : connectedPlatform(connectionOf(host, index));
  const h = new GpuServingHost(host.name, {
    host,
    platform,
    // hosts[].port: hosts sharing one machine (simulated ones) each serve on their own port; in a
    // mixed fleet each host runs its group's service under its group's name.
    config: hostConfig(config, host),
    apiKey,
    fleetMember: config.router !== undefined,
  });
  const v = h.verification;
  return {
    name: host.name,
    fleetHost: {
      host,
      connection: platform.connection,
      verification: v,
      model: h.model,
      activeService: h.activeService,
      timeScale: platform.timeScale ?? 1,
    },
    // Typed by the one output schema: every key it names, nothing else.
    outputs: {
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
      roofline: pulumi
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
        ),
      drift: h.toolkitState.drift,
      // services.compare: per service the sweep, knee, acceptance and crossover, the recommendation.
      comparison: h.comparison
        ? pulumi.output({
            services: h.comparison.services,
            recommended: h.comparison.recommended,
            runnerUp: h.comparison.runnerUp,
            margin: h.comparison.margin,
            recommendation: h.comparison.recommendation,
            activeService: h.comparison.activeService,
            timeNote: h.comparison.timeNote,
            comparedAt: h.comparison.comparedAt,
          })
        : null,
    } satisfies { [K in keyof HostOutputs]: pulumi.Input<HostOutputs[K]> },
  };
});

/** Per host, by name. */
export const gpuHosts = pulumi.output(Object.fromEntries(hosts.map((h) => [h.name, h.outputs])));
/** Sum of the hosts' sustained output throughput (tokens/s): the fleet's capacity. */
export const fleetSustainedOutputTokensPerSecond = pulumi
  .all(hosts.map((h) => h.outputs.sustainedOutputTokensPerSecond))
  .apply((values) => values.reduce<number>((sum, v) => sum + (typeof v === "number" ? v : 0), 0));
/** The configured `services.active` (each host's running service is under gpuHosts.<host>.activeService). */
export const activeService = config.services.active;
/** The fleet behind SMG (config `router`): workers, throughput through the router, scaling, plan. */
export const fleet = gpuFleet(
  config,
  hosts.map((h) => h.fleetHost),
  apiKey,
);

// operations.driftCheck: the drift check on a schedule, on the machine it names (a host's machine,
// the simulated one included: then rendered into its folder, where no timer fires).
const driftCheck = config.operations.driftCheck;
if (driftCheck) {
  const { machine, ...settings } = driftCheck;
  const onHost = (name: string) => {
    const h = hosts.find((x) => x.name === name);
    if (!h) throw new Error(`operations.driftCheck: no host ${name}`);
    return h.fleetHost.connection;
  };
  const connection: HostConnectionInput =
    machine.kind === "local"
      ? { kind: "local" }
      : machine.kind === "router"
        ? onHost(config.router!.host)
        : machine.kind === "host"
          ? onHost(machine.name)
          : connectionOf({ name: "drift-check", connection: machine }, "gpuhost:operations.driftCheck.machine");
  new DriftCheck(
    "drift-check",
    {
      connection,
      check: resolveDriftCheck(settings, { stack: pulumi.getStack(), projectDir: root }),
    },
    // A check scheduled before the hosts are provisioned and verified would only report them missing.
    { dependsOn: hosts.map((h) => h.fleetHost.verification) },
  );
}
// StackOutputsSchema (stack/outputs.ts) describes these four exports.
