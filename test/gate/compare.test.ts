/**
 * Choosing a service by measurement, on the story's simulated host: the three units' real rendered
 * command lines run in turn through the stand-in sglang on one port (one active at a time), the same
 * workload is measured on each, and the comparison finds the crossovers where the profile puts them.
 */
import { BenchPlanSchema } from "../../gate/base/schema";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { sglangArgv, serverArgsFor } from "../../components/services/launch-args";
import { ServicesSchema, type ServiceKind } from "../../components/services/schema";
import { ACCEPTANCE_TOKENS, acceptanceFailure } from "../../gate/readiness/acceptance";
import { compareServices, crossover, planService, type ServiceName } from "../../gate/plan/compare";
import { runComparison, type CompareOptions } from "../../gate/plan/compare-run";
import type { SweepLevel } from "../../gate/judge/levels";
import { freeLocalPort } from "../../ports";
import { SwitchableSimHost } from "../../simulator/switchable";
import { stackConfig } from "../config/stacks";
import { derivedProfile } from "../simulator/helpers";
import { theoreticalLevel } from "../../simulator/perf-model";
import { loadProfile } from "../../simulator/profile";
import { acceptLength } from "../../simulator/speculative";
import { profileFor } from "../../simulator/sglang";
import { parseSglangArgs } from "../../simulator/sglang-args";
import { classifyContent, countTextTokens } from "../../simulator/text";
import { CHAT_PROMPTS } from "../../gate/base/prompts";

const level = (l: number, tokps: number, goodput = tokps): SweepLevel =>
  ({
    mode: "closed",
    level: l,
    throughput: { mean: tokps, halfWidth: null, low: null, high: null, n: 1 },
    goodput: { mean: goodput, halfWidth: null, low: null, high: null, n: 1 },
    requests: l,
    errors: 0,
    ttftP95Seconds: 1,
  }) as SweepLevel;

describe("comparison arithmetic (hand-computed)", () => {
  const ar = [level(1, 42), level(8, 240), level(16, 384), level(64, 832)];
  const spec = [level(1, 100), level(8, 280), level(16, 360), level(64, 500)];

  it("crossover: first level not better, and the linear estimate between the levels around it", () => {
    // Differences +58, +40, -24: crossing between 8 and 16 at 8 + 40 / 64 x 8 = 13.
    expect(crossover(ar, spec, "dflash")).toEqual({
      service: "dflash",
      firstLevelNotBetter: 16,
      estimatedLevel: 13,
      winsAtLowest: true,
    });
    expect(
      crossover(
        ar,
        ar.map((l) => level(l.level, l.throughput.mean * 2)),
        "eagle3",
      ).firstLevelNotBetter,
    ).toBe(null);
  });

  it("capacity plan: days, hosts for the deadline, cost per million tokens, winner and margin", () => {
    const p = planService(
      { service: "autoregressive", sweep: ar, acceptanceLength: null },
      {
        purpose: "batch",
        completions: 900_000,
        outputTokensPerCompletion: 2000,
        deadlineDays: 7,
        gpusPerHost: 8,
        gpuHourCost: 2,
      },
    );
    // 1.8e9 tokens / (832 x 86,400) = 25.04 days; 4 hosts for 7 days; 16 $/h / (832 x 3600) x 1e6 = 5.34 $/M.
    expect(p.daysOnOneHost).toBeCloseTo(1.8e9 / (832 * 86_400), 9);
    expect(p.hostsForDeadline).toBe(4);
    expect(p.costPerMillionTokens).toBeCloseTo((16 / (832 * 3600)) * 1e6, 9);
    const c = compareServices(
      [
        { service: "autoregressive", sweep: ar, acceptanceLength: null },
        { service: "dflash", sweep: spec, acceptanceLength: 5 },
      ],
      { purpose: "batch" },
    );
    expect(c.recommended).toBe("autoregressive");
    expect(c.margin).toBeCloseTo(832 / 500 - 1, 9);
    expect(c.sentence).toMatch(
      /^Run autoregressive: .* 832 tok\/s at 64 concurrent, 66 % more than DFlash .*DFlash stops beating autoregressive near 13 concurrent\.$/,
    );
    const interactive = compareServices(
      [
        { service: "autoregressive", sweep: [level(8, 240, 240)], acceptanceLength: null },
        { service: "eagle3", sweep: [level(8, 300, 300)], acceptanceLength: 3 },
      ],
      { purpose: "interactive" },
    );
    expect(interactive.recommended).toBe("eagle3");
  });

  it("acceptance floor: below it the failure names the draft model", () => {
    const draft = { algorithm: "EAGLE3", draftModelPath: "/models/Kimi-K2.6-EAGLE3" };
    const m = { perRequest: 1.04, completionTokens: 256, verifyCount: 246, serverWide: 1.05, error: null };
    expect(acceptanceFailure(m, 1.5, draft)).toMatch(
      /1\.04 tokens per verify step is below the floor 1\.5 for the EAGLE3 draft model \/models\/Kimi-K2\.6-EAGLE3/,
    );
    expect(acceptanceFailure({ ...m, perRequest: 3.1 }, 1.5, draft)).toBeNull();
  });
});

const story = ServicesSchema.parse(stackConfig("story").services);
/**
 * Low, because the machine running the tests is shared: a process not scheduled for 100 ms makes
 * every in-flight request look 100 ms x scale slower in simulated time (simulator/README.md).
 */
const TIME_SCALE = 5;
/** The story host with a 2 s load instead of 330-630 s (0.4 s here); its serving behaviour is unchanged. */
const FAST_LOAD = derivedProfile("kimi-k2.6-8x-rtx-pro-6000", (p) => {
  p.load = { minSeconds: 2, maxSeconds: 2, warmupSeconds: 1 };
});
/** The first concurrency at which the profile's own speculative throughput falls below autoregressive. */
function trueCrossover(profile: string): number {
  const ar = loadProfile("kimi-k2.6-8x-rtx-pro-6000");
  const spec = loadProfile(profile);
  for (let c = 1; c <= 64; c++)
    if (theoreticalLevel(spec, c).aggregateTokensPerSecond < theoreticalLevel(ar, c).aggregateTokensPerSecond) return c;
  return Infinity;
}
/** Tokens per verify step of gate/readiness/acceptance.ts's one request alone (its first token comes from prefill). */
function aloneAcceptance(kind: "eagle3" | "dflash"): number {
  const argv = sglangArgv(serverArgsFor(kind, { ...story, port: 1 }, { apiKey: false })).map(String);
  const spec = profileFor(parseSglangArgs(argv), { GPUHOST_SIM_PROFILE: FAST_LOAD }).profile.speculative!;
  const text = CHAT_PROMPTS[0];
  const perStep = acceptLength(spec.draft, spec.algorithm, spec, 1, {
    content: classifyContent(text),
    promptTokens: countTextTokens(text),
  });
  return ACCEPTANCE_TOKENS / ((ACCEPTANCE_TOKENS - 1) / perStep + 1);
}
const KINDS: ServiceName[] = ["autoregressive", "eagle3", "dflash"];
const hosts: SwitchableSimHost[] = [];
afterAll(async () => {
  await Promise.all(hosts.map((h) => h.stop()));
});

async function storyHost(profile: string, port: number) {
  const host = new SwitchableSimHost({ profile, timeScale: TIME_SCALE });
  hosts.push(host);
  const argv = (kind: ServiceKind) =>
    sglangArgv(serverArgsFor(kind, { ...story, port }, { apiKey: false })).map(String);
  return { host, argv };
}

function options(
  port: number,
  cacheFile: string,
  over: Partial<CompareOptions> = {},
  levels = [4, 24, 64],
): CompareOptions {
  return {
    endpoint: { url: `http://127.0.0.1:${port}` },
    services: KINDS,
    drafts: {
      eagle3: { algorithm: "EAGLE3", draftModelPath: story.eagle3!.draftModelPath },
      dflash: { algorithm: "DFLASH", draftModelPath: story.dflash!.draftModelPath },
    },
    acceptanceFloor: 1.5,
    plan: BenchPlanSchema.parse({
      mix: { chat: 1 },
      sweepMaxTokens: 512,
      thinking: false,
      slo: { ttftSeconds: 10, itlSeconds: 0.05 },
      concurrency: levels,
      requestsPerConcurrency: 1,
      repeats: 1,
      requestTimeoutSeconds: 3600,
    }),
    timeScale: TIME_SCALE,
    verifyPolicy: { deadlineSeconds: 60, thinkingToggle: true, probeTimeoutSeconds: 30 },
    job: { purpose: "interactive" },
    auto: true,
    restore: "autoregressive",
    cacheFile,
    ...over,
  };
}

describe("comparison on the story's simulated host (three services, one port, one at a time)", () => {
  const cacheFile = path.join(fs.mkdtempSync(path.join(os.tmpdir(), "gpuhost-compare-")), "cache.json");
  let port = 0;
  let sim: Awaited<ReturnType<typeof storyHost>>;

  it("measures each service with the same workload; crossovers where the profile puts them; auto leaves the winner active", async () => {
    port = await freeLocalPort();
    sim = await storyHost(FAST_LOAD, port);
    const r = await runComparison(options(port, cacheFile), {
      activate: (s) => sim.host.activate(sim.argv(s)),
      identity: async (s) => sim.argv(s).join(" "),
    });
    expect(r.measuredNow).toBe(3);
    expect(r.outcomes.map((o) => o.failure)).toEqual([null, null, null]);
    const [, eagle, dflash] = r.outcomes;
    // One request alone, at the story's draft settings: the profile's single-stream acceptance
    // (3.2 for EAGLE-3, 5.5 for DFlash at batch 1), less the prefill's one-token step.
    expect(Math.abs(eagle.acceptanceLength! / aloneAcceptance("eagle3") - 1)).toBeLessThan(0.03);
    expect(Math.abs(dflash.acceptanceLength! / aloneAcceptance("dflash") - 1)).toBeLessThan(0.03);
    const c = r.comparison!;
    // The profile: EAGLE-3 falls below autoregressive between 32 and 48, DFlash between 8 and 16;
    // measured at 4, 24 and 64, each crossing lies between the levels the comparison names.
    const e = c.crossovers.find((x) => x.service === "eagle3")!;
    const d = c.crossovers.find((x) => x.service === "dflash")!;
    expect([e.firstLevelNotBetter, d.firstLevelNotBetter]).toEqual([64, 24]);
    expect(trueCrossover("kimi-k2.6-8x-rtx-pro-6000-eagle3")).toBeGreaterThan(24);
    expect(trueCrossover("kimi-k2.6-8x-rtx-pro-6000-dflash")).toBeGreaterThan(4);
    expect(trueCrossover("kimi-k2.6-8x-rtx-pro-6000-dflash")).toBeLessThanOrEqual(24);
    expect(e.estimatedLevel!).toBeGreaterThan(d.estimatedLevel!);
    // Interactive (ITL <= 50 ms): EAGLE-3 has the best goodput; auto leaves it running.
    expect(c.recommended).toBe("eagle3");
    expect(r.activeAfter).toBe("eagle3");
    expect(sim.host.active!.join(" ")).toContain("--speculative-algorithm EAGLE3");
    // For the batch job the same measurements pick autoregressive (most tokens at 64 concurrent).
    const batch = compareServices(
      r.outcomes.map((o) => ({ service: o.service, sweep: o.sweep, acceptanceLength: o.acceptanceLength })),
      { purpose: "batch" },
    );
    expect(batch.recommended).toBe("autoregressive");
    const ar64 = r.outcomes[0].sweep.find((l) => l.level === 64)!.throughput.mean;
    expect(Math.abs(ar64 - 64 * 13) / (64 * 13)).toBeLessThan(0.15);
  }, 240_000);

  it("a re-run with nothing changed re-measures nothing and starts no service", async () => {
    const starts = sim.host.starts;
    const r = await runComparison(options(port, cacheFile), {
      activate: (s) => sim.host.activate(sim.argv(s)),
      identity: async (s) => sim.argv(s).join(" "),
    });
    expect(r.measuredNow).toBe(0);
    expect(r.outcomes.every((o) => !o.measured)).toBe(true);
    expect(r.comparison!.recommended).toBe("eagle3");
    expect(sim.host.starts).toBe(starts);
  }, 60_000);

  it("a draft whose acceptance collapsed fails the floor, naming the draft model, and is left out", async () => {
    const poor = derivedProfile("kimi-k2.6-8x-rtx-pro-6000", (p) => {
      p.load = { minSeconds: 2, maxSeconds: 2, warmupSeconds: 1 };
      p.drafts!.EAGLE3!.acceptLength = [{ batch: 1, value: 1.05 }];
    });
    const p2 = await freeLocalPort();
    const bad = await storyHost(poor, p2);
    const r = await runComparison(
      options(
        p2,
        path.join(path.dirname(cacheFile), "poor.json"),
        {
          services: ["autoregressive", "eagle3"],
        },
        [4],
      ),
      { activate: (s) => bad.host.activate(bad.argv(s)), identity: async (s) => bad.argv(s).join(" ") },
    );
    const eagle = r.outcomes[1];
    expect(eagle.failure).toMatch(/below the floor 1\.5 for the EAGLE3 draft model \/models\/Kimi-K2\.6-EAGLE3/);
    expect(eagle.sweep).toEqual([]);
    expect(r.comparison!.recommended).toBe("autoregressive");
    await bad.host.stop();
  }, 120_000);
});
