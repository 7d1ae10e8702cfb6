/**
 * The settings and the host-side reads of the tests' simulated stacks (`sim`, `sim-fleet`, `sim-mixed`
 * under the real engine): each host in a folder of its own under the project's .gpuhost/sim-hosts.
 */
import * as fs from "node:fs";
import * as path from "node:path";
import { PROJECT_ROOT } from "../../engine/pulumi";
import { freeLocalPort } from "../../ports";
import { onSimulatedHost, SHORT_COMPARISON_BENCHMARK, type StackSetting } from "./stack";

/** A fresh folder for a simulated host, named PREFIX-...: a simulated host's root must lie under the project's .gpuhost/ (#12.6). */
export function simHostRoot(prefix: string): string {
  const simHosts = path.join(PROJECT_ROOT, ".gpuhost", "sim-hosts");
  fs.mkdirSync(simHosts, { recursive: true });
  return fs.mkdtempSync(path.join(simHosts, `${prefix}-`));
}

/**
 * A fleet stack's hosts and router on this machine: host i in ROOTS[i] on PORTS[i], the router on the
 * port after the hosts' and its Prometheus port on the next, at least MIN_HEALTHY hosts behind it.
 */
export function simFleetSettings(roots: string[], ports: number[], minHealthy: number): StackSetting[] {
  if (ports.length !== roots.length + 2)
    throw new Error(`${roots.length} hosts and a router need ${roots.length + 2} ports`);
  return [
    ...roots.flatMap((root, i) => [
      { path: `gpuhost:hosts[${i}].connection.root`, value: root },
      { path: `gpuhost:hosts[${i}].port`, value: String(ports[i]) },
    ]),
    { path: "gpuhost:router.port", value: String(ports[roots.length]) },
    { path: "gpuhost:router.prometheusPort", value: String(ports[roots.length + 1]) },
    { path: "gpuhost:router.minHealthyHosts", value: String(minHealthy) },
  ];
}

/**
 * A `sim` stack that compares the three services on the simulated host in HOST_ROOT: its own free
 * port, time scale 40, the short benchmark; EXTRA after those.
 */
export async function simComparisonSettings(hostRoot: string, extra: StackSetting[]): Promise<StackSetting[]> {
  return [
    { path: "gpuhost:hosts[0].connection.root", value: hostRoot },
    { path: "gpuhost:services.port", value: String(await freeLocalPort()) },
    { path: "gpuhost:services.compare", value: "true" },
    { path: "gpuhost:simulator.timeScale", value: "40" },
    ...extra,
    ...SHORT_COMPARISON_BENCHMARK,
  ];
}

/** The three SGLang services' units. */
export const SGLANG_UNITS = ["sglang-autoregressive.service", "sglang-eagle3.service", "sglang-dflash.service"];

/** The three SGLang services' units on the simulated host in HOST_ROOT, each with `systemctl is-active`'s word. */
export async function sglangUnitStates(hostRoot: string): Promise<Record<string, string>> {
  const out = await onSimulatedHost(
    hostRoot,
    `for u in ${SGLANG_UNITS.join(" ")}; do echo "$u=$(systemctl is-active "$u" || true)"; done`,
  );
  return Object.fromEntries(
    out
      .trim()
      .split("\n")
      .map((l): [string, string] => {
        const [unit, state] = l.split("=");
        return [unit, state];
      }),
  );
}
