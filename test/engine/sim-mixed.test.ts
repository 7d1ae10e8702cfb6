/**
 * The mixed fleet under the real engine with the real SMG (PyPI smg, hash-locked): a throwaway copy of
 * stacks/Pulumi.sim-mixed.yaml (four simulated hosts of the story's profile, each on its own free
 * port; the interactive group two EAGLE-3 hosts serving kimi-k2.6-interactive, the batch group two
 * autoregressive hosts serving kimi-k2.6). The second interactive host starts with the `jit-crash`
 * fault: its first generation kills it, so its gate fails. In sequence: `pulumi up` brings the fleet
 * up with that host left out of its group, both classes measured at once through the router (each
 * name generated on its own group's hosts only, each certified) and the plan saying what the group
 * can still promise with one host; with the fault removed, the next `up` gates the host and the
 * interactive class is served by both; a further `up` changes nothing; an interactive host's service
 * stopped is named by `gpuhost drift` under its group, and its class is then served by the group's
 * other host alone. Nothing is mocked.
 */
import * as path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { freeLocalPort as freePort } from "../../ports";
import type { FleetOutputs } from "../../stack/outputs";
import { fleetTable } from "../../cli/fleet-table";
import { listWorkers } from "../../components/fleet-verification/router-api";
import { runMixedTraffic } from "../../gate/index";
import { DEFAULT_JUDGEMENT } from "../../gate/judge/levels";
import { createTestStack, onSimulatedHost, type TestStack, upChanges, disposeStack } from "../support/stack";
import { simHostRoot, simFleetSettings } from "../support/sim-stack";
import { smgVenv } from "../support/smg";
import { driftJson } from "../support/engine";

const base = simHostRoot("mixed");
const roots = [1, 2, 3, 4].map((i) => path.join(base, `h${i}`));
let stack: TestStack | undefined;
/**
 * Half the stack's 1,024-token answers: each host's sweep and the mixed run (which asks the sweeps'
 * request shape) take half the wall time and tokens, and every class, level and share is still measured.
 */
const MAX_TOKENS = 512;

/** `pulumi up`; the resources it changed (op and name). */
const up = async () => (await upChanges(stack!)).changed;

async function fleet(): Promise<FleetOutputs & { mixed: NonNullable<FleetOutputs["mixed"]> }> {
  const f = (await stack!.outputs()).fleet;
  if (!f?.mixed) throw new Error("the stack exported no mixed fleet");
  return { ...f, mixed: f.mixed };
}

beforeAll(async () => {
  smgVenv();
  const ports = await Promise.all([1, 2, 3, 4, 5, 6].map(() => freePort()));
  stack = await createTestStack(
    "sim-mixed",
    [
      ...simFleetSettings(roots, ports, 3),
      { path: "gpuhost:hosts[1].simulatorFaults[0]", value: "jit-crash" },
      { path: "gpuhost:benchmark.sweepMaxTokens", value: String(MAX_TOKENS) },
      // The story host's model load (330-630 s: 33-63 s at the stack's time scale, in each of the two
      // ups that start a host) is no part of what this file proves; its serving behaviour, which the
      // assertions read, is unchanged (test/sim-host/load-seconds.test.ts).
      { path: "gpuhost:simulator.loadSeconds", value: "20" },
    ],
    600_000,
  );
}, 600_000);

afterAll(() => disposeStack(stack, base), 600_000);

describe("sim-mixed under the real engine and the real SMG", () => {
  it("comes up with the crashed host left out of its group; both classes at once, each on its own hosts, certified; the plan says what one interactive host can promise", async () => {
    await up();
    const outs = await stack!.outputs();
    expect(outs.gpuHosts["sim-mixed-1"]).toMatchObject({ activeService: "eagle3", model: "kimi-k2.6-interactive" });
    expect(outs.gpuHosts["sim-mixed-3"]).toMatchObject({ activeService: "autoregressive", model: "kimi-k2.6" });
    const f = await fleet();
    const m = f.mixed;
    expect(f.leftOut.map((l) => l.name)).toEqual(["sim-mixed-2"]);
    expect(m.interactive).toMatchObject({ service: "eagle3", workers: ["sim-mixed-1"], leftOut: ["sim-mixed-2"] });
    expect(m.batch).toMatchObject({ service: "autoregressive", workers: ["sim-mixed-3", "sim-mixed-4"] });
    // SMG's model registry alone: each name generated on its own group's hosts.
    expect(m.interactive.measured.servedBy["sim-mixed-1"]).toBe(16 * 4 * MAX_TOKENS);
    expect(m.interactive.measured.servedBy["sim-mixed-3"] + m.interactive.measured.servedBy["sim-mixed-4"]).toBe(0);
    expect(m.batch.measured.servedBy["sim-mixed-1"]).toBe(0);
    expect(m.batch.measured.servedBy["sim-mixed-3"]).toBeGreaterThan(0);
    expect(m.batch.measured.servedBy["sim-mixed-4"]).toBeGreaterThan(0);
    expect(m.batch.measured.concurrency).toBe(128);
    // Each class certified by the one certify() and judged by the host's verdict (a failure fails the up).
    expect(m.interactive.measured.certificate?.certified).toBe(true);
    expect(m.batch.measured.certificate?.certified).toBe(true);
    expect([m.interactive.activeService, m.batch.activeService]).toEqual(["eagle3", "autoregressive"]);
    // With one of its two hosts: 16 users on it, judged at the curve's 16.
    expect(m.predicted.verdict).toMatch(/^interactive, 1 of 2 eagle3 hosts: 16 users per host, measured at 16: /);
    expect(m.curves.map((c) => c.service)).toEqual(["eagle3", "autoregressive"]);
    console.log(`[sim-mixed, one host out] ${fleetTable(f)}`);
  }, 900_000);

  it("with the fault removed, the next up gates the host and the interactive class is served by both", async () => {
    await stack!.ok("config", "rm", "--path", "gpuhost:hosts[1].simulatorFaults");
    await up();
    const f = await fleet();
    const m = f.mixed;
    expect(f.leftOut).toEqual([]);
    expect(m.interactive.workers).toEqual(["sim-mixed-1", "sim-mixed-2"]);
    expect(m.interactive.measured.servedBy["sim-mixed-1"]).toBeGreaterThan(0);
    expect(m.interactive.measured.servedBy["sim-mixed-2"]).toBeGreaterThan(0);
    expect(m.predicted.verdict).toMatch(/^interactive, 2 of 2 eagle3 hosts: 8 users per host, measured at 8: /);
    // The prediction for the configured split beside the measurement: the batch near its curve (the README's table
    // has the margins of a quiet machine; this one may share its cores).
    const predicted = m.predicted.batch!.tokensPerSecond;
    expect(Math.abs(m.batch.measured.outputTokensPerSecond - predicted) / predicted).toBeLessThan(0.25);
    console.log(`[sim-mixed] ${fleetTable(f)}`);
  }, 900_000);

  it("a second up with nothing changed changes nothing", async () => {
    expect(await up()).toEqual([]);
  }, 600_000);

  it("an interactive host's service stopped: gpuhost drift names it under its group, and its class stays within its group", async () => {
    // The stack's outputs, read once: drift's refresh is a preview and changes none of them.
    const f = await fleet();
    const at = (name: string) => f.registered.find((w) => w.name === name)!.url;
    const url = at("sim-mixed-2");
    await onSimulatedHost(roots[1], "systemctl stop sglang-eagle3.service");
    // SMG's health checks (1 s apart, 2 failures) mark it unhealthy first.
    for (let i = 0; i < 120; i++) {
      const w = (await listWorkers(f.routerEndpoint)).find((x) => x.url === url);
      if (!w?.isHealthy) break;
      await new Promise((r) => setTimeout(r, 250));
    }
    const { report } = await driftJson(stack!.stack, stack!.opts);
    expect(report.exitCode).toBe(1);
    expect(report.fleet![0].drift.map((d) => d.field)).toEqual(["groups.interactive.workers.sim-mixed-2"]);

    // Its class stays within its group: both classes at once again, the interactive one served by the
    // group's other host alone, the batch group untouched.
    const alive = ["sim-mixed-1", "sim-mixed-3", "sim-mixed-4"].map(at);
    const r = await runMixedTraffic({
      url: f.routerEndpoint,
      interactive: { model: "kimi-k2.6-interactive", concurrency: 2, maxTokens: 64, requestsPerUser: 2 },
      batch: { model: "kimi-k2.6", concurrency: 4, maxTokens: 64 },
      workers: { interactive: alive.slice(0, 1), batch: alive.slice(1) },
      timeScale: 10,
      requestTimeoutSeconds: 600,
      judgement: {
        ...DEFAULT_JUDGEMENT,
        certification: { ...DEFAULT_JUDGEMENT.certification, loadShortfall: 0.5 },
      },
    });
    expect(r.interactive.errors + r.batch.errors).toBe(0);
    expect(r.interactive.servedBy[at("sim-mixed-1")]).toBe(2 * 2 * 64);
    expect(r.interactive.servedBy[at("sim-mixed-3")] + r.interactive.servedBy[at("sim-mixed-4")]).toBe(0);
    expect(r.batch.servedBy[at("sim-mixed-1")]).toBe(0);
  }, 600_000);
});
