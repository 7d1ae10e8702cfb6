/**
 * Issue 26.2: every level carries a validity certificate. Proved on the pure checks, then against
 * small servers written here that lie the ways servers do (usage that over-claims what the server's
 * own /metrics counts, no /metrics at all, other clients on the server) and a client that is its own
 * limit, through `gpuhost bench` as a user runs it; the simulator's and the real llama.cpp server's
 * counters reconcile in test/gate/bench-simulator.test.ts and test/real-server/bench.test.ts.
 */
import { mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import * as path from "node:path";
import { describe, expect, it } from "vitest";
import { benchMain } from "../../cli/bench";
import { EXIT } from "../../cli/common";
import { bench, verify } from "../../gate/index";
import type { BenchResult } from "../../gate/run/bench";
import { clientCheck, closedLoopLoad, exponentialFit, reconcile, steadyCheck } from "../../gate/judge/certificate";
import { CertificationSchema } from "../../gate/base/schema";
import { parseCounters } from "../../gate/run/server-counters";
import { type CounterRead } from "../../gate/base/samples";
import type { RequestSample } from "../../gate/base/samples";
import { poissonArrivals } from "../../gate/base/workload";
import { startSimulator } from "../../simulator/index";
import { loadProfile, withSpeculative } from "../../simulator/profile";
import { io } from "./cli-fixture";
import { loadServersClosedAfterEach } from "./load-servers";

const start = loadServersClosedAfterEach();
const POLICY = CertificationSchema.parse({});

const sglang = (generated: number, requests: number, other = 0) =>
  parseCounters(
    [
      "# TYPE sglang:generation_tokens_total counter",
      `sglang:generation_tokens_total{model_name="m"} ${generated}`,
      `sglang:generation_tokens_total{model_name="other"} ${other}`,
      "# TYPE sglang:num_requests_total counter",
      `sglang:num_requests_total{model_name="m"} ${requests}`,
      `sglang:num_requests_total{model_name="other"} 5`,
      "",
    ].join("\n"),
    "m",
  );

describe("the server's counters, parsed by parse-prometheus-text-format", () => {
  it("SGLang's by model_name, llama.cpp's unlabelled; HTML or an unknown server is not reconcilable", () => {
    const s = sglang(1000, 10, 7);
    expect(s).toMatchObject({ ok: true, snapshot: { dialect: "sglang", generatedTokens: 1000, requests: 10 } });
    expect((s as { snapshot: { generatedByModel: object } }).snapshot.generatedByModel).toEqual({ m: 1000, other: 7 });
    const llama = parseCounters(
      "# TYPE llamacpp:tokens_predicted_total counter\nllamacpp:tokens_predicted_total 512\n",
      "m",
    );
    expect(llama).toMatchObject({
      ok: true,
      snapshot: { dialect: "llamacpp", generatedTokens: 512, requests: null, heldRequests: null },
    });
    // the requests each holds now: SGLang's running and queued, llama.cpp's processing and deferred
    const gauges = (lines: string[]) => parseCounters([...lines, ""].join("\n"), "m");
    expect(
      gauges([
        'sglang:generation_tokens_total{model_name="m"} 1',
        'sglang:num_running_reqs{model_name="m"} 3',
        'sglang:num_queue_reqs{model_name="m"} 2',
        'sglang:num_running_reqs{model_name="other"} 7',
      ]),
    ).toMatchObject({ ok: true, snapshot: { heldRequests: 5 } });
    expect(
      gauges(["llamacpp:tokens_predicted_total 1", "llamacpp:requests_processing 4", "llamacpp:requests_deferred 1"]),
    ).toMatchObject({ ok: true, snapshot: { heldRequests: 5 } });
    expect(s).toMatchObject({ ok: true, snapshot: { heldRequests: null } });
    expect(parseCounters("<html><body>Not here</body></html>", "m").ok).toBe(false);
    const unknown = parseCounters("# TYPE foo counter\nfoo 1\n", "m");
    expect(unknown.ok).toBe(false);
    expect((unknown as { reason: string }).reason).toMatch(
      /has none of sglang:generation_tokens_total, llamacpp:tokens_predicted_total/,
    );
  });
});

describe("reconcile: the counters' growth against what the client counted", () => {
  const client = { requests: 10, errors: 0, generatedTokens: 1440, maxTokens: 144 };
  const with_ = (before: CounterRead, after: CounterRead) => reconcile({ before, after, model: "m" }, client, 0.01);

  it("agrees: the counts and the dialect named", () => {
    expect(with_(sglang(100, 1), sglang(1540, 11))).toEqual({
      name: "reconciled",
      ok: true,
      detail: "the server's sglang counters: 1,440 tokens generated, 10 requests, as the client counted",
    });
  });
  it("usage that over-claims twice what the server generated is named with both counts", () => {
    expect(with_(sglang(0, 0), sglang(720, 10))).toMatchObject({
      ok: false,
      detail: "not reconciled: the server generated 720 tokens, the responses claimed 1,440",
    });
  });
  it("another model served meanwhile, or requests the client did not send: other clients, never a silent pass", () => {
    expect(with_(sglang(0, 0, 0), sglang(1440, 10, 300)).detail).toMatch(/other models .*"other"/);
    const more = with_(sglang(0, 0), sglang(1440, 12));
    expect(more.ok).toBe(false);
    expect(more.detail).toMatch(/^not reconciled: the server finished 12 requests, the client sent 10: other clients/);
  });
  it("no /metrics, or counters that went back (a restart), are 'not reconciled'", () => {
    const none: CounterRead = { ok: false, reason: "GET /metrics answered HTTP 404" };
    expect(with_(none, none)).toEqual({
      name: "reconciled",
      ok: false,
      detail: "not reconciled: GET /metrics answered HTTP 404",
    });
    expect(with_(sglang(5000, 50), sglang(1440, 10)).detail).toMatch(/^not reconciled: .*went back/);
  });
});

/** A closed loop's samples: request i of worker w starts at w's previous end plus GAP. */
function closedLoop(concurrency: number, perWorker: number, e2e: number, gap: number): RequestSample[] {
  const out: RequestSample[] = [];
  for (let w = 0; w < concurrency; w++)
    for (let i = 0; i < perWorker; i++)
      out.push({ startedAtSeconds: i * (e2e + gap), e2eSeconds: e2e } as RequestSample);
  return out;
}

describe("the load asked for was the load applied", () => {
  it("closed loop: workers that send their next request at once keep C in flight; a client that dawdles does not", () => {
    expect(closedLoopLoad(closedLoop(4, 5, 1, 0.001), 4, 0.1)).toMatchObject({ ok: true });
    const slow = closedLoopLoad(closedLoop(4, 5, 1, 0.5), 4, 0.1);
    expect(slow.ok).toBe(false);
    expect(slow.detail).toMatch(
      /^2\.\d+ requests in flight on average of 4 asked for: the client did not keep the load applied$/,
    );
    // one request per worker: every worker in flight at once, or not
    expect(closedLoopLoad(closedLoop(4, 1, 1, 0), 4, 0.1)).toMatchObject({
      ok: true,
      detail: "4 of 4 requests in flight at once",
    });
    // within the shortfall (31 of 32, a thread's start a tick late), and past it
    const one = (starts: number[]) =>
      starts.map((t, i) => ({ ...closedLoop(1, 1, 1, 0)[0], startedAtSeconds: t, e2eSeconds: i === 0 ? 0.5 : 1 }));
    expect(closedLoopLoad(one([0, ...Array.from({ length: 31 }, () => 0.6)]), 32, 0.1)).toMatchObject({
      ok: true,
      detail: "31 of 32 requests in flight at once",
    });
    expect(closedLoopLoad(one([0, 0, 0, 0.6]), 4, 0.1)).toMatchObject({
      ok: false,
      detail: "3 of 4 requests in flight at once: the client did not keep the load applied",
    });
  });

  it("closed loop: the server's own gauges held against the client's in flight at the same instants", () => {
    const samples = closedLoop(4, 5, 1, 0.001);
    const reads = (held: (t: number) => number) =>
      [...Array.from({ length: 12 }, (_, i) => 1.2 + i * 0.3), 9].map((atSeconds) => ({
        atSeconds,
        held: held(atSeconds),
      }));
    // an engine that holds the four: certified, both sides named; the read after the run is not judged
    const honest = closedLoopLoad(
      samples,
      4,
      0.1,
      reads(() => 4),
    );
    expect(honest).toMatchObject({ ok: true });
    expect(honest.detail).toMatch(
      /^[34]\.\d+ requests in flight on average of 4 asked for; the server held 4\.00 running or waiting of the client's 4\.00 in flight \(12 reads of its gauges\)$/,
    );
    // one running, the other three waiting in front of it (a proxy, a gateway's limit)
    const front = closedLoopLoad(
      samples,
      4,
      0.1,
      reads(() => 1),
    );
    expect(front.ok).toBe(false);
    expect(front.detail).toMatch(
      /the server held 1\.00 running or waiting of the client's 4\.00 in flight \(12 reads of its gauges\): the requests waited in front of the server/,
    );
    // too few reads in the loaded stretch (a short level): the client's side alone
    expect(closedLoopLoad(samples, 4, 0.1, reads(() => 0).slice(0, 9)).detail).not.toMatch(/server/);
  });

  it("open loop: Poisson gaps fit the exponential; a regular schedule at the same rate does not", () => {
    const a = poissonArrivals(30, 400, 7);
    const gaps = a.slice(1).map((t, i) => t - a[i]);
    expect(exponentialFit(gaps, 30).ok).toBe(true);
    // sent on a 5 ms tick (each gap known to within it), the same process still fits
    const ticked = a.map((t) => Math.ceil(t / 0.005) * 0.005);
    expect(
      exponentialFit(
        ticked.slice(1).map((t, i) => t - ticked[i]),
        30,
        0.005,
      ).ok,
    ).toBe(true);
    expect(
      exponentialFit(
        Array.from({ length: 399 }, () => 1 / 30),
        30,
        0.005,
      ).ok,
    ).toBe(false);
  });

  it("the client: a loop that stood still for a share of the level, or a used-up core, says 'client'", () => {
    const ok = { wallSeconds: 2, loopDelayP99Ms: 3, loopDelayMaxMs: 20, stallShare: 0.02, cpuShare: 0.2 };
    expect(clientCheck(ok, POLICY)).toEqual({
      name: "client",
      ok: true,
      detail: "event loop stood still 2 % of the level (delay p99 3 ms, max 20 ms), CPU 20 % of a core",
    });
    // one stall of 900 ms in a 2 s level: its end, and so its throughput, may be that late
    expect(clientCheck({ ...ok, loopDelayMaxMs: 900, stallShare: 0.45 }, POLICY).detail).toMatch(
      /^client: event loop stood still 45 % of the level .*, over 25 %: the benchmark process was the limit$/,
    );
    const busy = clientCheck({ ...ok, cpuShare: 0.97 }, POLICY);
    expect(busy.ok).toBe(false);
    expect(busy.detail).toMatch(/CPU 97 % of a core, over 90 % of a core/);
    // a level of 50 ms that a 20 ms pause (a collection, a scheduler's slice) stalled: noise, not a limit
    expect(clientCheck({ ...ok, wallSeconds: 0.05, stallShare: 0.4, cpuShare: 0.95 }, POLICY).ok).toBe(true);
  });
});

const argv = (url: string, file: string, ...more: string[]) => [
  ...["--endpoint", url, "--model", "m", "--concurrency", "4", "--max-tokens", "64", "--prompts", "1"],
  ...["--requests-per-concurrency", "2", "--json", file, ...more],
];
const jsonFile = () => path.join(mkdtempSync(path.join(tmpdir(), "gpuhost-cert-")), "b.json");

describe("gpuhost bench: a level that cannot show its proof is never a figure", () => {
  it("an honest server: the level is certified, its line says so, exit 0 with a sustained figure", async () => {
    const server = await start({ tokens: 64, chunkMs: 1 });
    const file = jsonFile();
    const o = io();
    expect(await benchMain(argv(server.url, file), o), o.err()).toBe(EXIT.ok);
    const json = JSON.parse(readFileSync(file, "utf8")) as BenchResult;
    expect(json.sweep[0].certificate).toMatchObject({ certified: true });
    expect(json.sweep[0].certificate!.checks.map((c) => c.name)).toEqual([
      "reconciled",
      "received",
      "load",
      "client",
      "steady",
    ]);
    expect(o.out()).toMatch(/^4\s.* {2}certified$/m);
    expect(json.sustainedOutputTokensPerSecond).toBeGreaterThan(0);
    expect(readFileSync(file.replace(/\.json$/, ".csv"), "utf8").split("\n")[1]).toMatch(/,true,$/);
  }, 60_000);

  it("usage that claims twice the tokens its /metrics counts: not certified, both counts named, no sustained figure, exit 5", async () => {
    const server = await start({ tokens: 64, chunkMs: 1, usageClaims: 2 });
    const file = jsonFile();
    const o = io();
    expect(await benchMain(argv(server.url, file), o)).toBe(EXIT.uncertified);
    const json = JSON.parse(readFileSync(file, "utf8")) as BenchResult;
    // 8 requests x 64 tokens streamed; the usage blocks said 128 each
    expect(o.out()).toMatch(
      /^4\s.* {2}not certified: not reconciled: the server generated 512 tokens, the responses claimed 1,024; received: the usage claimed tokens the client never received: 8 of 8 requests claimed more tokens than max_tokens asked for \(128 for 64\) \(1,024 tokens claimed, 512 output chunks \(1,536 characters\) received over 8 requests\)$/m,
    );
    expect(json.sustainedOutputTokensPerSecond).toBe(0);
    expect(json.uncertifiedLevels).toEqual([4]);
    expect(json.saturationVerdict).toMatch(
      /^no level was certified \(C=4 not certified: not reconciled: the server generated 512 tokens/,
    );
    expect(o.out()).toContain("no sustained figure");
    const csv = readFileSync(file.replace(/\.json$/, ".csv"), "utf8").split("\n")[1];
    expect(csv).toMatch(
      /,false,"reconciled: not reconciled: the server generated 512 tokens, the responses claimed 1,024 \| received: the usage claimed tokens the client never received: 8 of 8 requests claimed more tokens than max_tokens asked for \(128 for 64\) .*"$/,
    );
  }, 60_000);

  it("no /metrics: 'not reconciled', exit 5; with --certify report the figure counts and still says so", async () => {
    const server = await start({ tokens: 16, chunkMs: 1, metrics: false });
    const o = io();
    expect(await benchMain(argv(server.url, jsonFile()), o)).toBe(EXIT.uncertified);
    expect(o.out()).toMatch(/^4\s.* {2}not certified: not reconciled: GET \/metrics answered HTTP 404$/m);
    const report = io();
    const file = jsonFile();
    expect(await benchMain(argv(server.url, file, "--certify", "report"), report), report.err()).toBe(EXIT.ok);
    expect(report.out()).toMatch(/^4\s.* {2}not certified: not reconciled/m);
    expect((JSON.parse(readFileSync(file, "utf8")) as BenchResult).sustainedOutputTokensPerSecond).toBeGreaterThan(0);
  }, 60_000);

  it("requests that wait in front of the engine (a gateway holding three of four): 'load', the engine's own count named", async () => {
    const server = await start({ tokens: 40, chunkMs: 5, serial: true, queueInFront: true });
    const r = await bench(
      { url: server.url, model: "m" },
      { concurrency: [4], requestsPerConcurrency: 3, singleRequestMaxTokens: [], sweepMaxTokens: 40 },
    );
    const load = r.sweep[0].certificate?.checks.find((c) => c.name === "load");
    expect(load?.ok, load?.detail).toBe(false);
    expect(load?.detail).toMatch(/the server held 1\.\d\d running or waiting of the client's [34]\.\d\d in flight/);
    expect(r.sustainedOutputTokensPerSecond).toBe(0);
    // the same server counting its own queue: the load reached it, certified
    const own = await start({ tokens: 40, chunkMs: 5, serial: true });
    const ok = await bench(
      { url: own.url, model: "m" },
      { concurrency: [4], requestsPerConcurrency: 3, singleRequestMaxTokens: [], sweepMaxTokens: 40 },
    );
    const check = ok.sweep[0].certificate?.checks.find((c) => c.name === "load");
    expect(check?.ok, check?.detail).toBe(true);
    expect(check?.detail).toMatch(/the server held [34]\.\d\d running or waiting/);
  }, 60_000);

  it("another client on the server during the level: the server finished more than the benchmark sent", async () => {
    const server = await start({ tokens: 32, chunkMs: 2 });
    const other: Promise<string[]>[] = [];
    const r = await bench(
      { url: server.url, model: "m" },
      { concurrency: [2], requestsPerConcurrency: 2, singleRequestMaxTokens: [], sweepMaxTokens: 32 },
      {
        onProgress: (e) => {
          // Once the level runs, someone else sends three requests of their own.
          if (e.kind !== "stage" || e.stage !== "sweep" || other.length > 0) return;
          other.push(
            Promise.all(
              [1, 2, 3].map(() =>
                fetch(`${server.url}/v1/chat/completions`, {
                  method: "POST",
                  body: JSON.stringify({ model: "m", stream: true, ignore_eos: true, max_tokens: 32, messages: [] }),
                }).then((res) => res.text()),
              ),
            ),
          );
        },
      },
    );
    await Promise.all(other);
    const level = r.sweep[0];
    expect(level.certificate?.certified).toBe(false);
    expect(level.certificate?.checks[0].detail).toMatch(
      /^not reconciled: the server generated \d+ tokens, the responses claimed 128$/,
    );
    expect(r.sustainedOutputTokensPerSecond).toBe(0);
  }, 60_000);

  it("a client that is its own limit (its core used up by its own work): 'client', never a figure", async () => {
    const server = await start({ tokens: 8, chunkMs: 1 });
    // The benchmark process at its limit during the level: between its own turns it burns 250 ms
    // of CPU every millisecond, as a client parsing far more than it can, or a busy process it
    // shares. Its event loop is then late by that much however many other processes share the
    // machine (on a loaded machine later still).
    let hog: NodeJS.Timeout | undefined;
    let r: BenchResult;
    try {
      r = await bench(
        { url: server.url, model: "m" },
        { concurrency: [2], requestsPerConcurrency: 1, singleRequestMaxTokens: [], sweepMaxTokens: 8 },
        {
          onProgress: (e) => {
            if (e.kind === "stage" && e.stage === "sweep")
              hog = setInterval(() => {
                const until = performance.now() + 250;
                while (performance.now() < until);
              }, 1);
            if (e.kind === "level") clearInterval(hog);
          },
        },
      );
    } finally {
      clearInterval(hog);
    }
    const client = r.sweep[0].certificate!.checks.find((c) => c.name === "client")!;
    expect(client.ok, client.detail).toBe(false);
    expect(client.detail).toMatch(
      /^client: event loop stood still \d+ % of the level .*: the benchmark process was the limit$/,
    );
    expect(r.sustainedOutputTokensPerSecond).toBe(0);
    expect(r.saturationVerdict).toMatch(/client: .*the benchmark process was the limit/);
  }, 60_000);

  it("a speculative service whose acceptance collapsed under load (the simulator's fault): 'steady' fails beside the floor", async () => {
    const profile = withSpeculative(loadProfile("tiny"), { algorithm: "EAGLE3", draftModelPath: "sim/tiny-eagle3" });
    const sim = await startSimulator({
      profile,
      port: 0,
      timeScale: 10,
      log: () => undefined,
      faults: ["acceptance-collapse"],
    });
    try {
      // the simulator loads its weights first (503 meanwhile), as SGLang does
      expect((await verify({ url: sim.url }, { deadlineSeconds: 20 })).ready).toBe(true);
      const r = await bench(
        { url: sim.url },
        { concurrency: [2], requestsPerConcurrency: 2, singleRequestMaxTokens: [], sweepMaxTokens: 64 },
        { timeScale: 10, acceptanceFloor: 1.5 },
      );
      expect(r.sweep, r.stopReason ?? "").toHaveLength(1);
      const steady = r.sweep[0].certificate!.checks.find((c) => c.name === "steady")!;
      expect(steady).toMatchObject({ ok: false });
      expect(steady.detail).toMatch(
        /^speculative acceptance 1\.00 tokens per step at this level, below the floor 1\.5/,
      );
      // the counters still reconcile: only the speculation is off
      expect(r.sweep[0].certificate!.checks[0].ok).toBe(true);
      expect(r.sustainedOutputTokensPerSecond).toBe(0);
    } finally {
      await sim.close();
    }
  }, 60_000);
});

describe("steady: warm, the same server, and speculation at or above its floor", () => {
  const counters = sglang(10, 1);
  it("passes with the acceptance named beside its floor; fails cold or below the floor", () => {
    const e = { before: counters, after: sglang(20, 2), warm: true, acceptanceFloor: 1.5 };
    expect(steadyCheck(e, 3.1)).toEqual({
      name: "steady",
      ok: true,
      detail: "warm; the server ran through the level; acceptance 3.10 (floor 1.5)",
    });
    expect(steadyCheck({ ...e, warm: false }, 3.1).ok).toBe(false);
    expect(steadyCheck(e, 1.2).ok).toBe(false);
    // not speculative: no floor, nothing to hold the acceptance against
    expect(steadyCheck({ ...e, acceptanceFloor: null }, null).ok).toBe(true);
  });
});
