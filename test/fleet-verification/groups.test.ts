// A mixed fleet (router.groups) through FleetVerification's provider functions, against the real
// SMG (hash-locked venv) in front of simulators: two EAGLE-3 hosts serving `tiny-interactive`, one
// autoregressive host serving `tiny`, and a host of the interactive group whose gate failed (left
// out). Both classes run at once through the router, each certified; what the left-out host costs
// is said beside the measurement. A host that serves another group's name (a misconfigured unit) has
// that class sent to it by SMG: the create fails naming it. A stopped host's drift names its group.
// The hosts' curves are written here (what their own sweeps would hand over), so the prediction is a
// fixture's; the measurement is real.
import { describe, expect, it } from "vitest";
import { create, read, update } from "../../components/fleet-verification/provider";
import { measureGroups, planGroups, type MixedFleetOutput } from "../../components/fleet-verification/groups";
import type { ClassResult } from "../../gate/measurement/mixed-run";
import type { RunningSimulator } from "../../simulator/index";
import type { RunningRouter } from "../support/smg";
import { groupFleet } from "../support/group-fleet";
import type { Drift } from "../../components/drift/schema";

const TIME_SCALE = 2;
const fleet = groupFleet(TIME_SCALE);
let router: RunningRouter | null = null;

/** A host's own sweep as it would hand it over (written here: the prediction is this fixture's). */
const curve = (points: Array<[number, number, number, number]>) =>
  points.map(([level, tps, ttft, itl]) => ({
    level,
    mode: "closed" as const,
    outputTokensPerSecond: tps,
    ttftP95Seconds: ttft,
    itlPerTokenP95Seconds: itl,
    errors: 0,
    withinErrorBudget: true,
  }));
const EAGLE3_CURVE = curve([
  [1, 200, 0.1, 0.004],
  [2, 380, 0.1, 0.005],
  [4, 600, 0.2, 0.007],
]);
const AR_CURVE = curve([
  [1, 120, 0.1, 0.008],
  [2, 230, 0.1, 0.009],
  [4, 420, 0.2, 0.01],
]);

function inputs(hosts: Record<string, RunningSimulator>, leftOut: string[], over: Record<string, unknown> = {}) {
  const all = Object.entries(hosts);
  return {
    providerVersion: "3",
    router: { url: router!.url, metricsUrl: router!.metricsUrl, model: "tiny" },
    routerIdentity: "id-1",
    workers: {
      registered: all.filter(([n]) => !leftOut.includes(n)).map(([name, s]) => ({ name, url: s.url })),
      leftOut: all
        .filter(([n]) => leftOut.includes(n))
        .map(([name, s]) => ({ name, url: s.url, reason: "the gate timed out in phase generate" })),
    },
    hostFigures: Object.fromEntries(
      all.map(([name]) => [
        name,
        {
          sustainedOutputTokensPerSecond: 100,
          verifiedAt: "t1",
          curve: name.startsWith("i") ? EAGLE3_CURVE : AR_CURVE,
        },
      ]),
    ),
    groups: {
      interactive: {
        service: "eagle3",
        model: "tiny-interactive",
        hosts: ["i1", "i2", "i3"],
        users: 2,
        ttftP95Seconds: 5,
        itlP95Seconds: 0.5,
        requestsPerUser: 3,
      },
      batch: { service: "autoregressive", model: "tiny", hosts: ["b1"], perHostConcurrency: 4 },
    },
    minHealthyHosts: 1,
    verifyPolicy: { deadlineSeconds: 60 },
    benchPlan: { sweepMaxTokens: 128, requestTimeoutSeconds: 300 },
    workload: { completions: 1000, outputTokensPerCompletion: 128, deadlineDays: 1 },
    readyDeadlineSeconds: 60,
    timeScale: TIME_SCALE,
    ...over,
  };
}

describe("a mixed fleet through FleetVerification and the real SMG", () => {
  it("both classes at once, each on its own group and certified; the left-out host's cost is said; drift names the group", async () => {
    const hosts = {
      i1: await fleet.sim("eagle3", "tiny-interactive"),
      i2: await fleet.sim("eagle3", "tiny-interactive"),
      i3: await fleet.sim("eagle3", "tiny-interactive"),
      b1: await fleet.sim("autoregressive", "tiny"),
    };
    // i3's gate failed: it is not one of the router's workers.
    router = await fleet.router([hosts.i1.url, hosts.i2.url, hosts.b1.url], "round_robin");
    const r = await create(inputs(hosts, ["i3"]));
    const m = r.outs.mixed as MixedFleetOutput;
    expect(m.interactive.workers).toEqual(["i1", "i2"]);
    expect(m.interactive.leftOut).toEqual(["i3"]);
    expect(m.batch.workers).toEqual(["b1"]);
    // Each name generated on its own group's hosts only, by SMG's registry.
    expect(m.interactive.measured.servedBy.b1).toBe(0);
    expect(m.interactive.measured.servedBy.i1 + m.interactive.measured.servedBy.i2).toBe(2 * 3 * 128);
    expect(m.batch.measured.servedBy.i1 + m.batch.measured.servedBy.i2).toBe(0);
    expect(m.batch.measured.servedBy.b1).toBeGreaterThan(0);
    expect(m.interactive.measured.errors + m.batch.measured.errors).toBe(0);
    expect(m.interactive.measured.reconciled).toMatch(/^the server's sglang counters: 768 tokens /);
    expect(m.batch.measured.concurrency).toBe(4);
    // What the left-out host costs, from the curves: 2 users on 2 of 3 hosts, judged at level 1.
    expect(m.predicted.verdict).toMatch(/^interactive, 2 of 3 eagle3 hosts: 1 users per host, measured at 1: /);
    expect(m.predicted.interactive).toMatchObject({ hosts: 2, perHost: 1, meetsObjective: true });
    expect(m.interactive.meets).toBe(true);
    expect(m.verdict).toMatch(
      /interactive \(eagle3, 2 users\): .* the objective is met; batch \(autoregressive, 4 in flight\): /,
    );
    // The plan from the same curves: one EAGLE-3 host holds both users; one AR host does the batch job.
    expect(m.plan.interactive).toMatchObject({ service: "eagle3", hosts: 1 });
    expect(m.curves.map((c) => c.service)).toEqual(["eagle3", "autoregressive"]);
    // The fleet's figure: both classes in the window; its plan is the batch job on the batch group.
    expect(r.outs.sustainedOutputTokensPerSecond).toBeCloseTo(
      m.interactive.measured.outputTokensPerSecond + m.batch.measured.outputTokensPerSecond,
      6,
    );
    expect(r.outs.scalingEfficiency).toBeNull();
    expect((r.outs.plan as { hosts: number }).hosts).toBe(1);

    // A workload change re-judges the deadline from the measurement, nothing re-measured.
    const needed = (completions: number) => (completions * 128) / 86_400;
    const u = await update(
      "id",
      r.outs,
      inputs(hosts, ["i3"], { workload: { completions: 1e9, outputTokensPerCompletion: 128, deadlineDays: 1 } }),
    );
    const um = (u.outs as Record<string, unknown>).mixed as MixedFleetOutput;
    expect(um.batch.neededTokensPerSecond).toBeCloseTo(needed(1e9), 6);
    expect(um.batch.meets).toBe(false);
    expect(um.batch.measured).toEqual(m.batch.measured);
    expect(um.verdict).toMatch(/the deadline is MISSED$/);

    // An interactive host stops: refresh names it under its group.
    await hosts.i2.close();
    let drift: Drift[] = [];
    for (let i = 0; i < 50 && drift.length === 0; i++) {
      drift = (await read("id", r.outs)).props.drift;
      if (drift.length === 0) await new Promise((res) => setTimeout(res, 200));
    }
    expect(drift.map((d) => d.field)).toEqual(["groups.interactive.workers.i2"]);
  }, 600_000);

  it("a host serving the other group's name gets that class from SMG: the create fails naming it", async () => {
    const hosts = {
      i1: await fleet.sim("eagle3", "tiny-interactive"),
      // The batch group's host, its unit rendered with the interactive name.
      b1: await fleet.sim("autoregressive", "tiny-interactive"),
      b2: await fleet.sim("autoregressive", "tiny"),
    };
    router = await fleet.router(
      Object.values(hosts).map((h) => h.url),
      "round_robin",
    );
    const i = inputs(hosts, []);
    const over = {
      groups: {
        ...i.groups,
        interactive: { ...i.groups.interactive, hosts: ["i1"] },
        batch: { ...i.groups.batch, hosts: ["b1", "b2"] },
      },
    };
    await expect(create(inputs(hosts, [], over))).rejects.toThrow(
      /the mixed fleet's interactive class \(tiny-interactive\) is not certified: the router sent tiny-interactive to hosts outside its group: b1 \([0-9]+ tokens\)/,
    );
  }, 600_000);

  it("a group with no host that passed its gate: the create fails with what the fleet can no longer promise", async () => {
    const hosts = { i1: await fleet.sim("eagle3", "tiny-interactive"), b1: await fleet.sim("autoregressive", "tiny") };
    router = await fleet.router([hosts.b1.url]);
    const i = inputs(hosts, ["i1"]);
    const over = { groups: { ...i.groups, interactive: { ...i.groups.interactive, hosts: ["i1"] } } };
    await expect(create(inputs(hosts, ["i1"], over))).rejects.toThrow(
      "the interactive group has no host that passed its gate (left out: i1): interactive, 0 of 1 eagle3 hosts: no host left, the 2 users are not served.",
    );
  }, 600_000);
});

describe("a mixed fleet's judging, fed measurements written here (no router)", () => {
  const groups = {
    interactive: {
      service: "eagle3" as const,
      model: "i",
      hosts: ["i1"],
      users: 2,
      ttftP95Seconds: 1,
      itlP95Seconds: 0.01,
      requestsPerUser: 2,
    },
    batch: { service: "autoregressive" as const, model: "b", hosts: ["b1"] },
  };
  const workers = [
    { name: "i1", url: "http://i1" },
    { name: "b1", url: "http://b1" },
  ];
  const planned = planGroups(groups, {
    registered: workers,
    leftOut: [],
    curveOf: (h) => (h === "i1" ? EAGLE3_CURVE : AR_CURVE),
    workload: { completions: 1000, outputTokensPerCompletion: 128, deadlineDays: 1, hosts: 1, bytesPerToken: 4 },
  });
  const ok = (name: "reconciled" | "load") => ({ name, ok: true, detail: `${name} fine` });
  const cls = (model: string, over: Partial<ClassResult> = {}): ClassResult => ({
    model,
    concurrency: 2,
    requests: 4,
    errors: 0,
    outputTokensPerSecond: 300,
    ttftP95Seconds: 0.2,
    itlPerTokenP95Seconds: 0.005,
    reconciled: ok("reconciled"),
    load: model === "i" ? ok("load") : null,
    servedBy: model === "i" ? { "http://i1": 512, "http://b1": 0 } : { "http://i1": 0, "http://b1": 900 },
    ...over,
  });
  const judged = (i: Partial<ClassResult>, b: Partial<ClassResult> = {}) =>
    measureGroups(planned, {
      say: () => undefined,
      run: async () => ({ windowSeconds: 10, interactive: cls("i", i), batch: cls("b", b) }),
    });

  it("the batch class sized from the curve: its best level, per host", async () => {
    let asked = 0;
    await measureGroups(planned, {
      say: () => undefined,
      run: async (c) => {
        asked = c.batch.concurrency;
        return { windowSeconds: 10, interactive: cls("i"), batch: cls("b") };
      },
    });
    expect(asked).toBe(4);
  });
  it("a class with failed requests, tokens that do not reconcile, users not applied: not certified, named", async () => {
    await expect(judged({ errors: 1 })).rejects.toThrow(
      "the mixed fleet's interactive class (i) is not certified: 1 of its requests failed",
    );
    await expect(
      judged(
        {},
        { reconciled: { name: "reconciled", ok: false, detail: "the server counted 450 tokens, the client 900" } },
      ),
    ).rejects.toThrow(
      "the mixed fleet's batch class (b) is not certified: its tokens do not reconcile: the server counted 450 tokens, the client 900",
    );
    await expect(judged({ load: { name: "load", ok: false, detail: "1.2 in flight of 2" } })).rejects.toThrow(
      "its users were not applied: 1.2 in flight of 2",
    );
  });
  it("an objective missed is said, not failed: the fleet serves", async () => {
    const m = await judged({ itlPerTokenP95Seconds: 0.02 }, { outputTokensPerSecond: 1 });
    expect([m.interactive.meets, m.batch.meets]).toEqual([false, false]);
    expect(m.verdict).toMatch(
      /ITL p95 20\.0 ms\/token of 10\.0 ms: the objective is MISSED; .*: the deadline is MISSED$/,
    );
  });
});
