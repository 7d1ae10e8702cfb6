// A mixed fleet (router.groups) through FleetVerification's provider functions, against the real
// SMG (hash-locked venv) in front of simulators: two EAGLE-3 hosts serving `tiny-interactive`, one
// autoregressive host serving `tiny`, and a host of the interactive group whose gate failed (left
// out). Both classes run at once through the router, each certified; what the left-out host costs
// is said beside the measurement. A host that serves another group's name (a misconfigured unit) has
// that class sent to it by SMG: the create fails naming it. A stopped host's drift names its group.
// The hosts' curves are written here (what their own sweeps would hand over), so the prediction is a
// fixture's; the measurement is real.
import * as http from "node:http";
import type { AddressInfo, Socket } from "node:net";
import { afterEach, describe, expect, it } from "vitest";
import { create, read, update } from "../../components/fleet-verification/provider";
import { measureGroups, planGroups, type MixedFleetOutput } from "../../components/fleet-verification/groups";
import type { ClassResult } from "../../gate/run/mixed-run";
import type { Certificate } from "../../gate/judge/certificate";
import { DEFAULT_JUDGEMENT, runSummary, summarizeSweepLevel } from "../../gate/judge/levels";
import type { RequestSample } from "../../gate/base/samples";
import { failedSample, requestSample } from "../gate/samples";
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

/**
 * A batch worker that misbehaves as real ones do, in front of a simulator: the CUT-th benchmark
 * request (ignore_eos, as the mixed run sends) gets its stream's first bytes and then a cut
 * connection (a proxy dropping it, a worker crashing mid-answer: the router cannot retry a stream it
 * began forwarding); at the DIE-th the worker goes away for good (its connections cut, its port shut).
 */
async function misbehaving(target: string, o: { cut?: number; die?: number }) {
  const up = new URL(target);
  const sockets = new Set<Socket>();
  let bench = 0;
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      const body = Buffer.concat(chunks);
      let n = 0;
      if (req.url?.startsWith("/v1/chat/completions")) {
        const parsed = JSON.parse(body.toString("utf8")) as { ignore_eos?: boolean };
        if (parsed.ignore_eos === true) n = ++bench;
      }
      if (n > 0 && n === o.die) return die();
      const fwd = http.request(
        { host: up.hostname, port: up.port, path: req.url, method: req.method, headers: req.headers },
        (r) => {
          res.writeHead(r.statusCode ?? 502, r.headers);
          if (n === 0 || n !== o.cut) return void r.pipe(res);
          r.once("data", (c: Buffer) => {
            res.write(c.subarray(0, 64));
            setTimeout(() => {
              res.socket?.destroy();
              r.destroy();
            }, 20);
          });
        },
      );
      fwd.on("error", () => res.socket?.destroy());
      fwd.end(body);
    });
  });
  server.on("connection", (s: Socket) => {
    sockets.add(s);
    s.on("close", () => sockets.delete(s));
  });
  const die = () => {
    server.close();
    for (const s of sockets) s.destroy();
  };
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  proxies.push(die);
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}` };
}
const proxies: Array<() => void> = [];
afterEach(() => {
  for (const close of proxies.splice(0)) close();
});

function inputs(hosts: Record<string, { url: string }>, leftOut: string[], over: Record<string, unknown> = {}) {
  const all = Object.entries(hosts);
  return {
    providerVersion: "4",
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
          activeService: name.startsWith("i") ? "eagle3" : "autoregressive",
        },
      ]),
    ),
    groups: {
      interactive: {
        service: "eagle3",
        servedModelName: "tiny-interactive",
        hosts: ["i1", "i2", "i3"],
        users: 2,
        ttftP95Seconds: 5,
        itlP95Seconds: 0.5,
        requestsPerUser: 3,
      },
      batch: { service: "autoregressive", servedModelName: "tiny", hosts: ["b1"], perHostConcurrency: 4 },
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
    // Each class certified by the one certify(): its tokens against its own group's counters.
    const check = (g: { measured: typeof m.batch.measured }, name: string) =>
      g.measured.certificate?.checks.find((c) => c.name === name);
    expect(m.interactive.measured.certificate?.certified, JSON.stringify(m.interactive.measured.certificate)).toBe(
      true,
    );
    expect(m.batch.measured.certificate?.certified, JSON.stringify(m.batch.measured.certificate)).toBe(true);
    expect(check(m.interactive, "reconciled")?.detail).toMatch(/^the server's sglang counters: 768 tokens /);
    // What it could not gather is said, not passed in silence.
    expect(check(m.batch, "load")?.detail).toMatch(/; not gathered: the server's side of the load/);
    expect(check(m.interactive, "steady")?.detail).toMatch(
      /; not gathered: the speculative acceptance during this run/,
    );
    expect(check(m.batch, "steady")?.detail).not.toMatch(/not gathered/);
    // What ran, not only what was configured.
    expect([m.interactive.activeService, m.batch.activeService]).toEqual(["eagle3", "autoregressive"]);
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
      /the router sent the interactive group's tiny-interactive to hosts outside its group: b1 \([0-9]+ tokens\)/,
    );
  }, 600_000);

  it("a batch worker that cuts a stream: within benchmark.errorBudget the up passes, over it fails naming the group and the budget", async () => {
    const i1 = await fleet.sim("eagle3", "tiny-interactive");
    const b1 = await misbehaving((await fleet.sim("autoregressive", "tiny")).url, { cut: 2 });
    const hosts = { i1, b1 };
    router = await fleet.router([i1.url, b1.url], "round_robin");
    const i = inputs(hosts, []);
    const over = (errorBudget: number) => ({
      groups: { ...i.groups, interactive: { ...i.groups.interactive, hosts: ["i1"] } },
      benchPlan: { ...i.benchPlan, errorBudget },
    });
    // One cut of the batch's requests (at least its 4 slots' first turns, and more): within 50 %.
    const r = await create(inputs(hosts, [], over(0.5)));
    const m = r.outs.mixed as MixedFleetOutput;
    expect(m.batch.measured).toMatchObject({ errors: 1, withinErrorBudget: true });
    expect(m.batch.measured.errorExamples).toHaveLength(1);
    expect(m.interactive.measured.errors).toBe(0);

    // The same cut under a 1 % budget: the one verdict fails the up, naming the batch group.
    await router.stop();
    const b2 = await misbehaving((await fleet.sim("autoregressive", "tiny")).url, { cut: 2 });
    router = await fleet.router([i1.url, b2.url], "round_robin");
    const again = { i1, b1: b2 };
    const failed = create(inputs(again, [], over(0.01)));
    await expect(failed).rejects.toThrow(
      /^the fleet benchmark of the batch group \(tiny\) broke its error budget of 1\.00 % at C=4: 1\/[0-9]+ failed \(/,
    );
    await expect(failed).rejects.not.toThrow(/interactive group/);
  }, 600_000);

  it("a batch worker killed mid-run fails the up, named with its group and host; the interactive class is not blamed", async () => {
    const i1 = await fleet.sim("eagle3", "tiny-interactive");
    const b1 = await misbehaving((await fleet.sim("autoregressive", "tiny")).url, { die: 6 });
    const hosts = { i1, b1 };
    router = await fleet.router([i1.url, b1.url], "round_robin");
    const i = inputs(hosts, []);
    const failed = create(
      inputs(hosts, [], { groups: { ...i.groups, interactive: { ...i.groups.interactive, hosts: ["i1"] } } }),
    );
    await expect(failed).rejects.toThrow(/^the fleet benchmark of the batch group \(tiny\) /);
    await expect(failed).rejects.toThrow(/the router lost b1 \(the batch group's host, http:\/\/127\.0\.0\.1:[0-9]+: /);
    await expect(failed).rejects.not.toThrow(/interactive group/);
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
      servedModelName: "i",
      hosts: ["i1"],
      users: 2,
      ttftP95Seconds: 1,
      itlP95Seconds: 0.01,
      requestsPerUser: 2,
    },
    batch: { service: "autoregressive" as const, servedModelName: "b", hosts: ["b1"] },
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
  // A class's level as the one summary makes it (levels.ts), from samples written here; its
  // certificate is written here too: this block judges, the router tests above measure.
  const sample = (error: string | null): RequestSample => (error ? failedSample(128, error) : requestSample(128));
  const certified: Certificate = { certified: true, checks: [{ name: "reconciled", ok: true, detail: "fine" }] };
  const levelOf = (requests: number, failed: number, certificate: Certificate) => {
    const samples = Array.from({ length: requests }, (_, k) => sample(k < failed ? "HTTP 500: overloaded" : null));
    const slo = DEFAULT_JUDGEMENT.slo;
    const l = summarizeSweepLevel("closed", 2, [runSummary(samples, 10, slo)], slo, null, DEFAULT_JUDGEMENT);
    return { ...l, certificate, runs: [] };
  };
  const cls = (
    model: string,
    over: { failed?: number; requests?: number; certificate?: Certificate } & Partial<ClassResult> = {},
  ): ClassResult => {
    const { failed = 0, requests = 200, certificate = certified, ...rest } = over;
    return {
      model,
      concurrency: 2,
      requests,
      errors: failed,
      outputTokensPerSecond: 300,
      ttftP95Seconds: 0.2,
      itlPerTokenP95Seconds: 0.005,
      level: levelOf(requests, failed, certificate),
      servedBy: model === "i" ? { "http://i1": 512, "http://b1": 0 } : { "http://i1": 0, "http://b1": 900 },
      ...rest,
    };
  };
  const plan = { errorBudget: 0.01, certification: { require: true } };
  const judged = (
    i: Parameters<typeof cls>[1],
    b: Parameters<typeof cls>[1] = {},
    p: { errorBudget: number; certification: { require: boolean } } = plan,
    said: string[] = [],
  ) =>
    measureGroups(planned, {
      say: (l) => said.push(l),
      plan: p,
      run: async () => ({ windowSeconds: 10, interactive: cls("i", i), batch: cls("b", b) }),
    });

  it("the batch class sized from the curve: its best level, per host", async () => {
    let asked = 0;
    await measureGroups(planned, {
      say: () => undefined,
      plan,
      run: async (c) => {
        asked = c.batch.concurrency;
        expect(c.workers).toEqual({ interactive: ["http://i1"], batch: ["http://b1"] });
        return { windowSeconds: 10, interactive: cls("i"), batch: cls("b") };
      },
    });
    expect(asked).toBe(4);
  });
  it("the batch class's errors: within benchmark.errorBudget it passes, over it fails naming the group and the budget", async () => {
    // 2 of 200 failed is 1 %, the budget: as one host's level, it counts.
    const within = await judged({}, { failed: 2 });
    expect(within.failure).toBeNull();
    expect(within.mixed.batch.measured).toMatchObject({ errors: 2, withinErrorBudget: true });
    const over = await judged({}, { failed: 3 });
    expect(over.failure).toBe(
      "of the batch group (b) broke its error budget of 1.00 % at C=2: 3/200 failed (HTTP 500: overloaded) (raise benchmark.errorBudget only if these errors are expected)",
    );
    // A larger budget in the stack's plan reaches the fleet as it reaches the host.
    expect((await judged({}, { failed: 3 }, { ...plan, errorBudget: 0.02 })).failure).toBeNull();
  });
  it("a class whose certificate failed fails named; with certification.require false it is a warning, as on one host", async () => {
    const failed: Certificate = {
      certified: false,
      checks: [
        {
          name: "reconciled",
          ok: false,
          detail: "not reconciled: the server generated 450 tokens, the responses claimed 900",
        },
      ],
    };
    expect((await judged({ certificate: failed })).failure).toBe(
      "of the interactive group (i) measured no certified level: C=2 not certified: not reconciled: the server generated 450 tokens, the responses claimed 900",
    );
    const said: string[] = [];
    const warned = await judged({ certificate: failed }, {}, { ...plan, certification: { require: false } }, said);
    expect(warned.failure).toBeNull();
    const warning =
      "the interactive group (i) is not certified: not reconciled: the server generated 450 tokens, the responses claimed 900; counted anyway (certification.require: false)";
    expect(warned.mixed.warnings).toEqual([warning]);
    expect(said).toContain(`warning: ${warning}`);
  });
  it("an objective missed is said, not failed: the fleet serves", async () => {
    const { mixed: m, failure } = await judged({ itlPerTokenP95Seconds: 0.02 }, { outputTokensPerSecond: 1 });
    expect(failure).toBeNull();
    expect([m.interactive.meets, m.batch.meets]).toEqual([false, false]);
    expect(m.verdict).toMatch(
      /ITL p95 20\.0 ms\/token of 10\.0 ms: the objective is MISSED; .*: the deadline is MISSED$/,
    );
  });
});
