/**
 * The gpuhost program: stack config -> one GpuServingHost per host -> stack outputs. It only wires:
 * the hosts and their outputs are composed in stack/hosts.ts, the fleet in stack/fleet.ts, the
 * scheduled drift check in stack/drift-check.ts. Outputs are plain values (no secrets): what a
 * capacity plan, `gpuhost drift` or another stack (StackReference) needs, keyed by host name.
 */
import * as pulumi from "@pulumi/pulumi";
import { loadConfig } from "./stack/config";
import { driftCheckOf } from "./stack/drift-check";
import { gpuFleet } from "./stack/fleet";
import { servingHosts } from "./stack/hosts";
import { warnPendingOperations } from "./stack/pending-operations";
import { useNodeSourceMaps } from "./stack/stack-traces";
import { projectRoot } from "./project-files";

// Before any resource is declared: the SDK takes a stack trace for each (stack/stack-traces.ts).
useNodeSourceMaps();
const { config, apiKey, secret } = loadConfig();
// Before any resource: what an earlier, killed update left (read now, it is not this update's).
warnPendingOperations();
const ctx = { config, apiKey, secret, root: projectRoot() };
const hosts = servingHosts(ctx);

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
driftCheckOf(ctx, hosts);
// StackOutputsSchema (stack/outputs.ts) describes these four exports.
