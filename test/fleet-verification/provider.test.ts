// FleetVerification's provider functions (the engine's serialization cannot run in vitest), against
// the real SMG (hash-locked venv, .ci/smg.sh) in front of two simulators, and against small routers
// written here that misbehave the way a router does: a worker that never turns healthy, a worker
// list that keeps a stranger.
import * as http from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { create, diff, read, update } from "../../components/fleet-verification/provider";
import { fleetPlan, sustainedInterval } from "../../components/fleet-verification";
import type { Drift } from "../../components/drift/schema";
import {
  listWorkers,
  reconcileWorkers,
  workerDrift,
  workerRequestCounts,
} from "../../components/fleet-verification/router-api";
import { loadProfile, type RunningSimulator } from "../../simulator/index";
import { type RunningRouter, startSimulatorsBehindRouter, stopSimulatorsBehindRouter } from "../support/smg";

const KEY = "fleet-provider-key-0123456789abcdef";
const sims: RunningSimulator[] = [];
let router: RunningRouter;

const plan = {
  warmupMaxTokens: 8,
  singleRequestMaxTokens: [32],
  singleRequestPrompts: 1,
  concurrency: [1, 2],
  sweepMaxTokens: 64,
  requestsPerConcurrency: 2,
  deadlineSeconds: 120,
};

function inputs(over: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    providerVersion: "1",
    router: { url: router.url, metricsUrl: router.metricsUrl, model: "tiny" },
    apiKey: KEY,
    routerIdentity: "id-1",
    workers: {
      registered: sims.map((s, i) => ({ name: `h${i + 1}`, url: s.url })),
      leftOut: [],
    },
    hostFigures: {
      h1: { sustainedOutputTokensPerSecond: 100, verifiedAt: "t1" },
      h2: { sustainedOutputTokensPerSecond: 100, verifiedAt: "t1" },
    },
    verifyPolicy: { deadlineSeconds: 60 },
    benchPlan: plan,
    workload: { completions: 1000, outputTokensPerCompletion: 100, deadlineDays: 1 },
    readyDeadlineSeconds: 60,
    // The simulators' clock: the fleet is measured in host time, like the hosts' own figures.
    timeScale: 20,
    ...over,
  };
}

beforeAll(async () => {
  const tiny = { profile: "tiny", port: 0, timeScale: 20, apiKey: KEY, log: () => undefined };
  ({ router } = await startSimulatorsBehindRouter(sims, tiny, { apiKey: KEY }));
}, 600_000);

afterAll(() => stopSimulatorsBehindRouter(router, sims));

describe("FleetVerification against the real SMG", () => {
  let outs: Record<string, unknown> = {};

  it("create: verified and measured through the router, every worker's share from SMG's counters", async () => {
    const r = await create(inputs());
    outs = r.outs;
    const registered = outs.registered as Array<{ name: string; requests: number; share: number }>;
    expect(registered.map((w) => w.name)).toEqual(["h1", "h2"]);
    expect(registered.every((w) => w.requests > 0)).toBe(true);
    expect(registered.reduce((s, w) => s + w.share, 0)).toBeCloseTo(1, 9);
    expect((outs.sweep as Array<{ concurrency: number }>).map((l) => l.concurrency)).toEqual([2, 4]);
    const fleet = outs.sustainedOutputTokensPerSecond as number;
    expect(fleet).toBeGreaterThan(0);
    expect(outs.scalingEfficiency).toBeCloseTo(fleet / 200, 9);
    // Two runs per level at least (benchRepeats absent: 2): the sustained figure carries its interval.
    const interval = outs.sustainedInterval as { low: number; high: number; runs: number };
    expect(interval.runs).toBe(2);
    expect(interval.low).toBeLessThanOrEqual(fleet);
    expect(interval.high).toBeGreaterThanOrEqual(fleet);
    expect(outs.drift).toEqual([]);
  }, 300_000);

  it("the fleet's benchmark spread over client threads through the router: every level certified, each thread judged", async () => {
    const r = await create(inputs({ benchPlan: { ...plan, clientThreads: 2 } }));
    const sweep = r.outs.sweep as Array<{
      concurrency: number;
      certificate: { certified: boolean; checks: { name: string; detail: string }[] };
    }>;
    expect(sweep.map((l) => l.concurrency)).toEqual([2, 4]);
    for (const level of sweep) {
      expect(level.certificate.certified, JSON.stringify(level.certificate)).toBe(true);
      expect(level.certificate.checks.find((c) => c.name === "client")!.detail).toMatch(
        /^spread over 2 client threads; /,
      );
    }
    expect((r.outs.registered as Array<{ requests: number }>).every((w) => w.requests > 0)).toBe(true);
  }, 300_000);

  it("update keeps the measurement and re-plans; diff replaces only on what defines the fleet", async () => {
    const news = inputs({ workload: { completions: 2000, outputTokensPerCompletion: 100, deadlineDays: 1 } });
    const u = (await update("id", outs, news)) as { outs: Record<string, unknown> };
    expect(u.outs.sustainedOutputTokensPerSecond).toBe(outs.sustainedOutputTokensPerSecond);
    expect((u.outs.plan as { totalOutputTokens: number }).totalOutputTokens).toBe(200_000);
    expect((await diff("id", outs, news)).replaces).toEqual([]);
    expect((await diff("id", outs, inputs({ routerIdentity: "id-2" }))).replaces).toEqual(["routerIdentity"]);
    // Another clock or more runs per level: the figure would be another measurement.
    expect((await diff("id", outs, inputs({ timeScale: 4 }))).replaces).toEqual(["timeScale"]);
    expect((await diff("id", outs, inputs({ benchRepeats: 5 }))).replaces).toEqual(["benchRepeats"]);
    const remeasured = inputs({
      hostFigures: {
        ...(inputs().hostFigures as object),
        h2: { sustainedOutputTokensPerSecond: 90, verifiedAt: "t2" },
      },
    });
    expect((await diff("id", outs, remeasured)).replaces).toEqual(["hostFigures"]);
  });

  it("read names a worker the router lost; the next create registers it again", async () => {
    const gone = (await listWorkers(router.url, KEY)).find((w) => w.url === sims[1].url)!;
    await fetch(`${router.url}/workers/${gone.id}`, { method: "DELETE", headers: { authorization: `Bearer ${KEY}` } });
    let drift: Drift[] = [];
    for (let i = 0; i < 50 && drift.length === 0; i++) {
      drift = (await read("id", outs)).props.drift;
      if (drift.length === 0) await new Promise((r) => setTimeout(r, 200));
    }
    // SMG drains a removed worker first, then forgets it: either is drift.
    expect(drift).toEqual([
      {
        field: "workers.h2",
        expected: `registered and healthy at ${sims[1].url}`,
        found: expect.stringMatching(/^(draining in|missing from) the router$/) as string,
        repair: expect.stringMatching(/^pulumi up: FleetVerification re-registers the worker/) as string,
      },
    ]);
    expect((await diff("id", { ...outs, drift }, inputs())).replaces).toEqual(["drift"]);
    const again = await create(inputs());
    expect(again.outs.reconciled).toEqual([`${sims[1].url}: registered`]);
    expect((await read("id", again.outs)).props.drift).toEqual([]);
  }, 300_000);

  it("fails below router.minHealthyHosts, naming the host left out and why", async () => {
    const workers = {
      registered: [{ name: "h1", url: sims[0].url }],
      leftOut: [{ name: "h2", url: sims[1].url, reason: "the gate timed out in phase models" }],
    };
    await expect(create(inputs({ workers }))).rejects.toThrow(
      "only 1 of 2 hosts passed their gate, fewer than router.minHealthyHosts 2; left out: h2 (the gate timed out in phase models)",
    );
  });
});

/**
 * Hosts that serve one request at a time, 64 tokens at 160 tok/s: about 0.4 s each, so one host
 * answers some 2.5 requests per host second and two some 5. A host plan with rates 1 and 3.5 saturates
 * one host at 3.5; two hosts keep up with 3.5 and fall behind at 7, the plan for 2 workers.
 */
describe("FleetVerification with benchmark.rate, and a worker that dies during the fleet benchmark (real SMG)", () => {
  const slow: RunningSimulator[] = [];
  let slowRouter: RunningRouter;
  const base = loadProfile("tiny");
  const profile = {
    ...base,
    decode: { ...base.decode, perRequestTokensPerSecond: [{ batch: 1, value: 160 }], maxRunningRequests: 1 },
  };
  const slowInputs = (benchPlan: Record<string, unknown>) =>
    inputs({
      router: { url: slowRouter.url, metricsUrl: slowRouter.metricsUrl, model: "tiny" },
      workers: { registered: slow.map((s, i) => ({ name: `s${i + 1}`, url: s.url })), leftOut: [] },
      hostFigures: {},
      benchPlan: { ...plan, singleRequestMaxTokens: [8], ...benchPlan },
      timeScale: 10,
    });

  beforeAll(async () => {
    const sim = { profile, port: 0, timeScale: 10, apiKey: KEY, log: () => undefined, onExit: () => {} };
    // Round robin: the fleet's rate is shared evenly, so two hosts' capacity is twice one's.
    ({ router: slowRouter } = await startSimulatorsBehindRouter(slow, sim, { apiKey: KEY, policy: "round_robin" }));
  }, 600_000);

  afterAll(() => stopSimulatorsBehindRouter(slowRouter, slow));

  it("rates are the host's times the workers, and the fleet that falls behind at the top one measures its throughput", async () => {
    const r = await create(slowInputs({ rate: [1, 3.5], requestsPerConcurrency: 1 }));
    const sweep = r.outs.sweep as Array<{ offeredRequestsPerSecond: number; errors: number }>;
    expect(sweep.map((l) => l.offeredRequestsPerSecond)).toEqual([2, 7]);
    expect(sweep.every((l) => l.errors === 0)).toBe(true);
    expect(r.outs.sustainedOutputTokensPerSecond).toBeGreaterThan(0);
    expect((r.outs.plan as { daysForJob: number | null }).daysForJob).toBeGreaterThan(0);
  }, 300_000);

  it("a worker killed during the fleet benchmark is named and the create fails (the router hid its errors)", async () => {
    // The provider says each level as it ends: the second worker dies after the first level.
    const write = process.stderr.write.bind(process.stderr);
    let killed: Promise<void> | null = null;
    process.stderr.write = (chunk: string | Uint8Array, ...rest: never[]) => {
      if (killed === null && /\] (C=|concurrency )\d+: .* tok\/s/.test(String(chunk))) killed = slow[1].close();
      return write(chunk, ...rest);
    };
    let outcome: string;
    try {
      outcome = await create(slowInputs({ concurrency: [1, 2, 3], requestsPerConcurrency: 4 })).then(
        () => "the create passed",
        (e: Error) => e.message,
      );
    } finally {
      process.stderr.write = write;
    }
    expect(killed).not.toBeNull();
    expect(outcome).toMatch(new RegExp(`router lost s2 \\(${slow[1].url.replace(/[.]/g, "\\.")}: [^)]+\\)`));
  }, 300_000);
});

/** A router stand-in: GET /workers answers `workers()`; POST and DELETE are recorded. */
async function fakeRouter(workers: () => unknown[], version = "smg-1.13.0") {
  const calls: string[] = [];
  const server = http.createServer((req, res) => {
    calls.push(`${req.method} ${req.url}`);
    res.setHeader("content-type", "application/json");
    if (req.method === "GET" && req.url === "/workers") res.end(JSON.stringify({ workers: workers() }));
    else if (req.method === "GET" && req.url === "/get_loads") res.end(JSON.stringify({ version, loads: [] }));
    else res.writeHead(202).end("{}");
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return { url, calls, close: () => new Promise<void>((r) => server.close(() => r())) };
}

describe("reconcileWorkers against routers that misbehave", () => {
  it("a worker that stays Pending: fails by its deadline, naming the worker and its state", async () => {
    const r = await fakeRouter(() => [{ id: "w1", url: "http://h1:1", status: "pending", is_healthy: false }]);
    try {
      await expect(reconcileWorkers(r.url, ["http://h1:1"], { deadlineMs: 1000 })).rejects.toThrow(
        /within 1 s: http:\/\/h1:1: pending in the router/,
      );
    } finally {
      await r.close();
    }
  });

  it("a Failed worker is removed and registered again; a stranger is removed", async () => {
    let round = 0;
    const r = await fakeRouter(() =>
      round++ === 0
        ? [
            { id: "w1", url: "http://h1:1", status: "failed", is_healthy: false },
            { id: "x", url: "http://old:1", status: "ready", is_healthy: true },
          ]
        : [{ id: "w2", url: "http://h1:1", status: "ready", is_healthy: true }],
    );
    try {
      const actions = await reconcileWorkers(r.url, ["http://h1:1"], { deadlineMs: 10_000 });
      expect(actions).toEqual([
        "http://h1:1: removed (failed in the router)",
        "http://old:1: removed (unknown to the stack)",
      ]);
      expect(r.calls).toEqual(expect.arrayContaining(["DELETE /workers/w1", "DELETE /workers/x"]));
    } finally {
      await r.close();
    }
  });
});

describe("read against a router that drifted", () => {
  it("names a router running another smg than the pinned one, and a worker it lost", async () => {
    const r = await fakeRouter(
      () => [{ id: "w1", url: "http://h1:1", status: "ready", is_healthy: true }],
      "smg-1.12.0",
    );
    try {
      const props = {
        router: { url: r.url, metricsUrl: `${r.url}/metrics`, model: "tiny" },
        workers: {
          registered: [
            { name: "h1", url: "http://h1:1" },
            { name: "h2", url: "http://h2:1" },
          ],
          leftOut: [],
        },
      };
      expect((await read("id", props)).props.drift).toEqual([
        {
          field: "workers.h2",
          expected: "registered and healthy at http://h2:1",
          found: "missing from the router",
          repair: expect.stringContaining("re-registers the worker") as string,
        },
        {
          field: "router.version",
          expected: "smg 1.13.0",
          found: "smg-1.12.0",
          repair: expect.stringContaining("runs the Router's install step again") as string,
        },
      ]);
    } finally {
      await r.close();
    }
  });

  it("a router that does not answer is drift, named, not an exception", async () => {
    const r = await fakeRouter(() => []);
    await r.close();
    const props = { router: { url: r.url, metricsUrl: "", model: "tiny" }, workers: { registered: [], leftOut: [] } };
    expect((await read("id", props)).props.drift).toEqual([
      {
        field: "router",
        expected: `answering at ${r.url}`,
        found: expect.stringMatching(/^unreachable: /) as string,
        repair: expect.stringContaining("systemctl restart gpuhost-router.service") as string,
      },
    ]);
  });
});

describe("pure parts", () => {
  it("workerDrift: missing, unhealthy and unknown workers", () => {
    expect(
      workerDrift(
        ["http://a", "http://b"],
        [
          { id: "1", url: "http://b", status: "failed", isHealthy: false },
          { id: "2", url: "http://c", status: "ready", isHealthy: true },
        ],
      ),
    ).toEqual([
      "http://a: missing from the router",
      "http://b: failed in the router",
      "http://c: in the router (ready), unknown to the stack",
    ]);
  });
  it("workerRequestCounts sums smg_worker_requests_total per worker over models", () => {
    const text = [
      "# HELP smg_worker_requests_total x",
      'smg_worker_requests_total{worker="http://a:1",model="m1"} 3',
      'smg_worker_requests_total{model="m2",worker="http://a:1"} 2',
      'smg_worker_requests_total{worker="http://b:1",model="m1"} 7',
      'smg_worker_requests_active{worker="http://a:1"} 9',
    ].join("\n");
    expect(workerRequestCounts(text)).toEqual({ "http://a:1": 5, "http://b:1": 7 });
  });
  it("fleetPlan: days for the job on the fleet, hosts the deadline needs and how many are missing", () => {
    // 1e6 tokens at 10 tok/s = 1.157 days on 2 hosts; a 0.5-day deadline needs ceil(2 x 1.157 / 0.5) = 5.
    const p = fleetPlan(10, 2, { completions: 1000, outputTokensPerCompletion: 1000, deadlineDays: 0.5 } as never);
    expect(p.daysForJob).toBeCloseTo(1e6 / (10 * 86400), 9);
    expect(p.hostsForDeadline).toBe(5);
    expect(p.hostsMissing).toBe(3);
    expect(fleetPlan(0, 2, undefined).hostsMissing).toBeNull();
  });
  it("sustainedInterval: the sustained level's interval, null with one run or no sustained level", () => {
    const level = (l: number, low: number | null, high: number | null, n: number) => ({
      level: l,
      throughput: { low, high, halfWidth: low === null || high === null ? null : (high - low) / 2, n },
    });
    const sweep = [level(4, 90, 110, 3), level(8, 150, 170, 3)];
    expect(sustainedInterval({ sustainedLevel: 8, sweep })).toEqual({ low: 150, high: 170, halfWidth: 10, runs: 3 });
    expect(sustainedInterval({ sustainedLevel: null, sweep })).toBeNull();
    expect(sustainedInterval({ sustainedLevel: 4, sweep: [level(4, null, null, 1)] })).toBeNull();
  });
});
