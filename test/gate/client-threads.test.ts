/**
 * Issue 26.3: the benchmark client spread over Node's worker threads (gate/run/client-threads.ts).
 * How many threads "auto" picks (pure); then real spread runs against the small servers written in
 * the tests (load-servers.ts): the requests sent are the ones one thread sends, the Poisson schedule
 * is the one asked for, the level is certified with every thread's own client check, a server
 * that dies mid-level stops the threads with the level kept, and an interrupt ends the run with no
 * thread left sending.
 */
import { describe, expect, it } from "vitest";
import { benchMain } from "../../cli/bench";
import { EXIT } from "../../cli/common";
import { bench } from "../../gate/index";
import { clientCheck, type ClientEvidence } from "../../gate/judge/certificate";
import { CertificationSchema } from "../../gate/base/schema";
import { clientThreadsFor, projectedWallTokensPerSecond, type LevelProjection } from "../../gate/run/client-threads";
import { CLIENT_THREAD_TOKENS_PER_SECOND } from "../../gate/base/schema";
import { poissonArrivals } from "../../gate/base/workload";
import { io } from "./cli-fixture";
import { loadServersClosedAfterEach } from "./load-servers";

const start = loadServersClosedAfterEach();
const POLICY = CertificationSchema.parse({});

const closed = (over: Partial<LevelProjection> = {}): LevelProjection => ({
  mode: "closed",
  level: 64,
  timeScale: 1,
  maxTokens: 2048,
  previous: null,
  singleStreamTokensPerSecond: null,
  oneThreadWasLimit: true,
  ...over,
});

describe("how many client threads a level gets", () => {
  it("auto: one per 100,000 projected wall-clock tokens a second, at most one fewer than the cores and one per slot", () => {
    // nothing known yet: this thread
    expect(clientThreadsFor("auto", closed(), 16)).toBe(1);
    // a fleet of eight hosts behind a router measured 21,600 tok/s at C=64; C=128 may reach twice that
    const previous = { level: 64, tokensPerSecond: 21_600 };
    expect(projectedWallTokensPerSecond(closed({ level: 128, previous }))).toBe(43_200);
    expect(clientThreadsFor("auto", closed({ level: 128, previous }), 16)).toBe(1);
    // the same fleet simulated at time scale 100: the client ingests 4.3 million tokens a wall second
    expect(clientThreadsFor("auto", closed({ level: 128, previous, timeScale: 100 }), 16)).toBe(15);
    // two cores: one is left to the rest of the machine, so this thread alone
    expect(clientThreadsFor("auto", closed({ level: 128, previous, timeScale: 100 }), 2)).toBe(1);
    // before any level: one stream's speed times the concurrency bounds it
    const single = closed({ level: 64, singleStreamTokensPerSecond: 5_000 });
    expect(projectedWallTokensPerSecond(single)).toBe(320_000);
    expect(clientThreadsFor("auto", single, 16)).toBe(Math.ceil(320_000 / CLIENT_THREAD_TOKENS_PER_SECOND));
    // never more threads than slots
    expect(clientThreadsFor("auto", closed({ level: 2, singleStreamTokensPerSecond: 1e6 }), 16)).toBe(2);
  });

  it("auto spreads nothing until one thread was measured to be the limit, whatever the projection", () => {
    const previous = { level: 64, tokensPerSecond: 21_600 };
    const huge = { level: 128, previous, timeScale: 100 };
    expect(clientThreadsFor("auto", closed({ ...huge, oneThreadWasLimit: false }), 16)).toBe(1);
    expect(clientThreadsFor("auto", closed({ ...huge, oneThreadWasLimit: true }), 16)).toBe(15);
    // a number set is taken as set
    expect(clientThreadsFor(4, closed({ ...huge, oneThreadWasLimit: false }), 16)).toBe(4);
  });

  it("auto, open loop: the rate times the most tokens a request asks for; a number is taken as set", () => {
    const open: LevelProjection = { ...closed(), mode: "open", level: 200, maxTokens: 1024 };
    expect(projectedWallTokensPerSecond(open)).toBe(204_800);
    expect(clientThreadsFor("auto", open, 16)).toBe(3);
    expect(clientThreadsFor(4, closed({ level: 2 }), 16)).toBe(2);
    expect(clientThreadsFor(4, closed(), 1)).toBe(4);
    expect(clientThreadsFor(1, open, 16)).toBe(1);
  });
});

describe("the client check of a spread level judges every thread", () => {
  const ok: ClientEvidence = { wallSeconds: 4, loopDelayP99Ms: 2, loopDelayMaxMs: 10, stallShare: 0.01, cpuShare: 0.3 };
  it("passes naming the busiest thread; a thread at its core's limit fails naming it, never hidden by the others", () => {
    const fine = clientCheck({ ...ok, cpuShare: 0.05 }, POLICY, [[ok, { ...ok, cpuShare: 0.6 }]]);
    expect(fine.ok).toBe(true);
    expect(fine.detail).toMatch(
      /^spread over 2 client threads; the busiest, thread 2 of run 1: .*CPU 60 % of a core; main thread: .*CPU 5 %/,
    );
    const starved = clientCheck({ ...ok, cpuShare: 0.05 }, POLICY, [
      [ok, ok],
      [ok, { ...ok, cpuShare: 0.98 }],
    ]);
    expect(starved.ok).toBe(false);
    expect(starved.detail).toMatch(
      /^client: spread over 2 client threads; thread 2 of run 2: .*CPU 98 % of a core.*; thread 2 of run 2 over 90 % of a core: the benchmark client was the limit$/,
    );
    const main = clientCheck({ ...ok, stallShare: 0.5 }, POLICY, [[ok, ok]]);
    expect(main.detail).toMatch(/the main thread over 25 %: the benchmark process was the limit$/);
  });
});

describe("a level spread over client threads, against a server written here", () => {
  it("closed loop on 2 threads: the requests one thread sends, reconciled with the server, every thread watched", async () => {
    const server = await start({ tokens: 32, chunkMs: 2 });
    const r = await bench(
      { url: server.url, model: "m" },
      {
        concurrency: [4, 8],
        requestsPerConcurrency: 3,
        singleRequestMaxTokens: [],
        sweepMaxTokens: 32,
        clientThreads: 2,
      },
    );
    expect(r.stopReason).toBeNull();
    expect(r.sweep.map((l) => l.requests)).toEqual([12, 24]);
    expect(r.sweep.map((l) => l.errors)).toEqual([0, 0]);
    // 36 sweep requests and the bracket's 12 (C=4 once more after C=8), each counted once (the
    // warmup is no benchmark request)
    expect(server.received).toBe(48);
    expect(r.samples.bracket?.requests).toHaveLength(12);
    for (const level of r.sweep) {
      expect(level.certificate?.certified, JSON.stringify(level.certificate)).toBe(true);
      expect(level.certificate!.checks.find((c) => c.name === "client")!.detail).toMatch(
        /^spread over 2 client threads; the busiest, thread \d of run 1: event loop/,
      );
      expect(level.certificate!.checks.find((c) => c.name === "reconciled")!.detail).toMatch(/as the client counted/);
    }
    // each slot's requests went one after another: the samples' windows hold C in flight
    expect(r.samples.sweep[1].requests.every((s) => s.completionTokens === 32)).toBe(true);
  }, 60_000);

  it("open loop on 3 threads: the arrivals are the Poisson schedule asked for, from one origin", async () => {
    const server = await start({ tokens: 8, chunkMs: 1 });
    const r = await bench(
      { url: server.url, model: "m" },
      { rate: [20], requestsPerConcurrency: 2, singleRequestMaxTokens: [], sweepMaxTokens: 8, clientThreads: 3 },
      // ten host seconds of arrivals in one of wall time (the samples are in host time)
      { timeScale: 10 },
    );
    expect(r.stopReason).toBeNull();
    const level = r.samples.sweep[0];
    const run = level.runs![0];
    const due = level.requests.map((s) => s.scheduledAtSeconds! - run.startedAtSeconds).sort((a, b) => a - b);
    const asked = poissonArrivals(20, 400, 1);
    expect(due).toHaveLength(asked.length);
    for (let i = 0; i < asked.length; i++) expect(due[i]).toBeCloseTo(asked[i], 4);
    expect(r.sweep[0].certificate!.checks.find((c) => c.name === "client")!.detail).toMatch(
      /spread over 3 client threads/,
    );
    expect(r.sweep[0].certificate!.checks.find((c) => c.name === "load")!.ok).toBe(true);
  }, 60_000);

  it("a server that dies mid-level: the threads stop, the level is kept with its failures, the run says why", async () => {
    const server = await start({ tokens: 16, chunkMs: 5, dieAfter: 10 });
    const r = await bench(
      { url: server.url, model: "m" },
      {
        concurrency: [4, 8],
        requestsPerConcurrency: 20,
        singleRequestMaxTokens: [],
        sweepMaxTokens: 16,
        clientThreads: 2,
      },
    );
    expect(r.serverGone).toMatch(/the server went away during C=4/);
    // the level it died in is kept with its failures; no level runs after it
    expect(r.sweep).toHaveLength(1);
    expect(r.sweep[0].errors).toBeGreaterThan(0);
    expect(r.sweep[0].certificate!.certified).toBe(false);
  }, 60_000);

  it("an interrupt during a spread level ends the run at once, nothing left sending", async () => {
    const server = await start({ tokens: 100, chunkMs: 10 });
    const stop = new AbortController();
    let interruptedAt = 0;
    const r = await bench(
      { url: server.url, model: "m" },
      {
        concurrency: [4],
        requestsPerConcurrency: 50,
        singleRequestMaxTokens: [],
        sweepMaxTokens: 100,
        clientThreads: 2,
      },
      {
        signal: stop.signal,
        onProgress: (e) => {
          // a third of a second into the level: every slot holds a request one second long
          if (e.kind === "stage" && e.stage === "sweep")
            setTimeout(() => {
              interruptedAt = performance.now();
              stop.abort(new Error("interrupted (Ctrl-C)"));
            }, 300);
        },
      },
    );
    const stoppedIn = performance.now() - interruptedAt;
    expect(r.stopReason).toMatch(/interrupted/);
    // the cut level measured the cut, not the server: dropped
    expect(r.sweep).toHaveLength(0);
    expect(stoppedIn).toBeLessThan(5_000);
    const received = server.received;
    await new Promise((resolve) => setTimeout(resolve, 300));
    // no thread sent anything after the run ended
    expect(server.received).toBe(received);
  }, 60_000);
});

describe("gpuhost bench --client-threads", () => {
  it("takes auto or a number; anything else is a usage error naming the knob", async () => {
    const server = await start({ tokens: 16, chunkMs: 1 });
    const args = [
      "--endpoint",
      server.url,
      "--model",
      "m",
      "--concurrency",
      "4",
      "--max-tokens",
      "16",
      "--prompts",
      "1",
    ];
    const o = io();
    expect(await benchMain([...args, "--client-threads", "2"], o), o.err()).toBe(EXIT.ok);
    expect(o.out()).toMatch(/^4\s.* {2}certified$/m);
    const bad = io();
    expect(await benchMain([...args, "--client-threads", "many"], bad)).toBe(EXIT.usage);
    expect(bad.err()).toMatch(/clientThreads/);
  }, 60_000);
});
