/**
 * Issue 29 points 1, 3 and 4, through the real SMG (PyPI smg, hash-locked venv): groups behind one
 * router by served model name. Interactive users ask for `tiny-interactive`, served by EAGLE-3
 * simulators; the batch job asks for `tiny`, served by autoregressive ones; both classes run at once
 * (gate/measurement/mixed-run.ts). SMG's model registry alone sends each class to its group: every
 * token of each name was generated on its group's hosts, none on the other's, and each class
 * reconciles with the workers' counters by model. A host of the interactive group that stopped
 * leaves its class on the group's other host, the batch group untouched.
 */
import { afterEach, describe, expect, it } from "vitest";
import { runMixedTraffic, type MixedTrafficOptions } from "../../gate/index";
import { loadProfile, startSimulator, type RunningSimulator } from "../../simulator/index";
import { withSpeculative } from "../../simulator/profile";
import { type RunningRouter, QUICK_ROUTER, smgVenv, startRouter, waitForHealthyWorkers } from "../support/smg";

const sims: RunningSimulator[] = [];
let router: RunningRouter | null = null;
afterEach(async () => {
  await router?.stop();
  router = null;
  await Promise.all(sims.splice(0).map((s) => s.close()));
});

// Slow enough that a tiny EAGLE-3 answer arrives in several reads (at 20x it came in one: no inter-token gaps).
const TIME_SCALE = 2;
const eagle3 = () => withSpeculative(loadProfile("tiny"), { algorithm: "EAGLE3", draftModelPath: "sim/tiny-eagle3" });

async function sim(group: "interactive" | "batch"): Promise<RunningSimulator> {
  const s = await startSimulator({
    profile: group === "interactive" ? eagle3() : "tiny",
    servedModelName: group === "interactive" ? "tiny-interactive" : "tiny",
    port: 0,
    timeScale: TIME_SCALE,
    log: () => undefined,
  });
  sims.push(s);
  return s;
}

const traffic = (workers: string[]): MixedTrafficOptions => ({
  url: router!.url,
  interactive: { model: "tiny-interactive", concurrency: 2, maxTokens: 256, requestsPerUser: 4 },
  batch: { model: "tiny", concurrency: 6, maxTokens: 128 },
  workers,
  timeScale: TIME_SCALE,
  requestTimeoutSeconds: 600,
  tokenTolerance: 0.01,
  loadShortfall: 0.1,
});

describe("two groups behind one SMG, routed by served model name", () => {
  it("each class reaches only its group's hosts, both at once, each reconciled with the workers' counters", async () => {
    const i = await sim("interactive");
    const b = await sim("batch");
    router = await startRouter({ venv: smgVenv(), workerUrls: [i.url, b.url], extraConfig: QUICK_ROUTER });
    await waitForHealthyWorkers(router.url, 2);
    const r = await runMixedTraffic(traffic([i.url, b.url]));
    expect(r.interactive.errors).toBe(0);
    expect(r.batch.errors).toBe(0);
    expect(r.interactive.requests).toBe(8);
    expect(r.batch.requests).toBeGreaterThan(0);
    expect(r.interactive.reconciled.ok, r.interactive.reconciled.detail).toBe(true);
    expect(r.batch.reconciled.ok, r.batch.reconciled.detail).toBe(true);
    expect(r.interactive.load?.ok, r.interactive.load?.detail).toBe(true);
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
    router = await startRouter({
      venv: smgVenv(),
      workerUrls: [i1.url, i2.url, b.url],
      extraConfig: QUICK_ROUTER,
    });
    await waitForHealthyWorkers(router.url, 3);
    await i2.close();
    sims.splice(sims.indexOf(i2), 1);
    await waitForHealthyWorkers(router.url, 2, 30_000);
    const r = await runMixedTraffic(traffic([i1.url, b.url]));
    expect(r.interactive.errors).toBe(0);
    expect(r.interactive.servedBy[i1.url]).toBe(8 * 256);
    expect(r.interactive.servedBy[b.url]).toBe(0);
    expect(r.batch.servedBy[i1.url]).toBe(0);
    expect(r.interactive.reconciled.ok, r.interactive.reconciled.detail).toBe(true);
    expect(r.batch.reconciled.ok, r.batch.reconciled.detail).toBe(true);
  }, 300_000);
});
