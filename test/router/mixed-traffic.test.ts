/**
 * Issue 29 points 1, 3 and 4, through the real SMG (PyPI smg, hash-locked venv): groups behind one
 * router by served model name. Interactive users ask for `tiny-interactive`, served by EAGLE-3
 * simulators; the batch job asks for `tiny`, served by autoregressive ones; both classes run at once
 * (gate/run/mixed-run.ts). SMG's model registry alone sends each class to its group: every
 * token of each name was generated on its group's hosts, none on the other's, and each class
 * reconciles with the workers' counters by model. A host of the interactive group that stopped
 * leaves its class on the group's other host, the batch group untouched.
 */
import { describe, expect, it } from "vitest";
import { runMixedTraffic, type Certificate, type MixedTrafficOptions } from "../../gate/index";
import { DEFAULT_JUDGEMENT } from "../../gate/judge/levels";
import { type RunningRouter, waitForHealthyWorkers } from "../support/smg";
import { groupFleet } from "../support/group-fleet";

// Slow enough that a tiny EAGLE-3 answer arrives in several reads (at 20x it came in one: no inter-token gaps).
const TIME_SCALE = 2;
const fleet = groupFleet(TIME_SCALE);
const sim = (group: "interactive" | "batch") =>
  group === "interactive" ? fleet.sim("eagle3", "tiny-interactive") : fleet.sim("autoregressive", "tiny");
let router: RunningRouter | null = null;

const traffic = (workers: MixedTrafficOptions["workers"]): MixedTrafficOptions => ({
  url: router!.url,
  interactive: { model: "tiny-interactive", concurrency: 2, maxTokens: 256, requestsPerUser: 4 },
  batch: { model: "tiny", concurrency: 6, maxTokens: 128 },
  workers,
  timeScale: TIME_SCALE,
  requestTimeoutSeconds: 600,
  judgement: DEFAULT_JUDGEMENT,
});
/** A class's check by name, from its certificate (the one certify()). */
const check = (c: { level: { certificate: Certificate | null } }, name: string) =>
  c.level.certificate?.checks.find((x) => x.name === name);

describe("two groups behind one SMG, routed by served model name", () => {
  it("each class reaches only its group's hosts, both at once, each reconciled with the workers' counters", async () => {
    const i = await sim("interactive");
    const b = await sim("batch");
    router = await fleet.router([i.url, b.url]);
    const r = await runMixedTraffic(traffic({ interactive: [i.url], batch: [b.url] }));
    expect(r.interactive.errors).toBe(0);
    expect(r.batch.errors).toBe(0);
    expect(r.interactive.requests).toBe(8);
    expect(r.batch.requests).toBeGreaterThan(0);
    // Each class certified by the one certify(): reconciled with its group's counters, what the client
    // received supports the usage, its slots applied, the client not the limit, the counters steady.
    expect(r.interactive.level.certificate?.certified, JSON.stringify(r.interactive.level.certificate)).toBe(true);
    expect(r.batch.level.certificate?.certified, JSON.stringify(r.batch.level.certificate)).toBe(true);
    expect(r.interactive.level.certificate?.checks.map((c) => c.name)).toEqual([
      "reconciled",
      "received",
      "load",
      "client",
      "steady",
    ]);
    // SMG's registry, not ours: the interactive name was generated on the EAGLE-3 host alone, the batch name on the other
    expect(r.interactive.servedBy[i.url]).toBe(8 * 256);
    expect(r.interactive.servedBy[b.url]).toBe(0);
    expect(r.batch.servedBy[b.url]).toBeGreaterThan(0);
    expect(r.batch.servedBy[i.url]).toBe(0);
    expect(r.interactive.ttftP95Seconds).not.toBeNull();
    expect(r.interactive.itlPerTokenP95Seconds).not.toBeNull();
    expect(r.batch.outputTokensPerSecond).toBeGreaterThan(0);
  }, 300_000);

  it("a stopped host of the interactive group: its class stays on the group's other host, the batch group untouched", async () => {
    const i1 = await sim("interactive");
    const i2 = await sim("interactive");
    const b = await sim("batch");
    router = await fleet.router([i1.url, i2.url, b.url]);
    await fleet.stop(i2);
    await waitForHealthyWorkers(router.url, 2, 30_000);
    const r = await runMixedTraffic(traffic({ interactive: [i1.url], batch: [b.url] }));
    expect(r.interactive.errors).toBe(0);
    expect(r.interactive.servedBy[i1.url]).toBe(8 * 256);
    expect(r.interactive.servedBy[b.url]).toBe(0);
    expect(r.batch.servedBy[i1.url]).toBe(0);
    expect(check(r.interactive, "reconciled")?.ok, check(r.interactive, "reconciled")?.detail).toBe(true);
    expect(check(r.batch, "reconciled")?.ok, check(r.batch, "reconciled")?.detail).toBe(true);
  }, 300_000);
});
