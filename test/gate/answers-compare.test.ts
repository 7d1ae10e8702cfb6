/**
 * Issue 43.2 with services.compare: a speculative service's greedy answers against the
 * autoregressive service's on the same prompts, on the story's simulated host (the units' real
 * command lines through the stand-in sglang). With the simulator's speculative-divergence fault, the
 * EAGLE-3 service answers half the set differently: under a threshold low enough to let it through
 * the gate it is measured, and still never recommended, whatever its tok/s, and the table says why.
 */
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { sglangArgv, serverArgsFor } from "../../components/services/launch-args";
import { ServicesSchema, type ServiceKind } from "../../components/services/schema";
import { runComparison, type CompareOptions } from "../../gate/plan/compare-run";
import { compareText } from "../../gate/reports/compare-report";
import { comparisonOutputs } from "../../gate/reports/outputs";
import { BenchPlanSchema } from "../../gate/base/schema";
import { freeLocalPort } from "../../ports";
import { SwitchableSimHost } from "../../simulator/switchable";
import { stackConfig } from "../config/stacks";
import { derivedProfile } from "../simulator/helpers";

const story = ServicesSchema.parse(stackConfig("story").services);
// Each run loads a service three times (autoregressive, EAGLE-3, the restore): 4 host seconds each,
// under a wall second at time scale 5. The load's length is no part of what is compared.
const FAST_LOAD = derivedProfile("kimi-k2.6-8x-rtx-pro-6000", (p) => {
  p.load = { minSeconds: 4, maxSeconds: 4, warmupSeconds: 1 };
});
const hosts: SwitchableSimHost[] = [];
afterAll(async () => {
  await Promise.all(hosts.map((h) => h.stop()));
});

async function run(faults: string[]) {
  const port = await freeLocalPort();
  const host = new SwitchableSimHost({ profile: FAST_LOAD, timeScale: 5, faults });
  hosts.push(host);
  const argv = (kind: ServiceKind) =>
    sglangArgv(serverArgsFor(kind, { ...story, port }, { apiKey: false })).map(String);
  const opts: CompareOptions = {
    endpoint: { url: `http://127.0.0.1:${port}` },
    services: ["autoregressive", "eagle3"],
    drafts: { eagle3: { algorithm: "EAGLE3", draftModelPath: story.eagle3!.draftModelPath } },
    acceptanceFloor: 1.5,
    plan: BenchPlanSchema.parse({
      mix: { chat: 1 },
      sweepMaxTokens: 256,
      thinking: false,
      slo: { ttftSeconds: 10, itlSeconds: 0.05 },
      concurrency: [4],
      requestsPerConcurrency: 1,
      repeats: 1,
      requestTimeoutSeconds: 3600,
    }),
    timeScale: 5,
    // Low enough that the diverging service passes its own gate: the comparison is what must catch it.
    verifyPolicy: {
      deadlineSeconds: 60,
      thinkingToggle: true,
      probeTimeoutSeconds: 30,
      answers: { passThreshold: 0.4 },
    },
    job: { purpose: "interactive" },
    auto: true,
    restore: "autoregressive",
    cacheFile: path.join(fs.mkdtempSync(path.join(os.tmpdir(), "gpuhost-answers-compare-")), "cache.json"),
  };
  return runComparison(opts, { activate: (s) => host.activate(argv(s)), identity: async (s) => argv(s).join(" ") });
}

describe("the comparison compares answers", () => {
  it("same answers: EAGLE-3 agrees on every prompt and, faster at 4 streams, is recommended", async () => {
    const r = await run([]);
    const eagle = r.outcomes[1];
    expect(eagle.agreement).toMatchObject({
      exactMatchRate: 1,
      speculativeScore: 1,
      autoregressiveScore: 1,
      worse: false,
    });
    expect(r.comparison!.recommended).toBe("eagle3");
  }, 180_000);

  it("speculative-divergence: exact match 50 %, score 0.50 vs 1.00; never recommended, and the table and outputs say why", async () => {
    const r = await run(["speculative-divergence"]);
    const [ar, eagle] = r.outcomes;
    expect(ar.answers?.score).toBe(1);
    expect(eagle.failure).toBeNull();
    expect(eagle.agreement).toMatchObject({
      exactMatchRate: 0.5,
      speculativeScore: 0.5,
      autoregressiveScore: 1,
      worse: true,
    });
    const c = r.comparison!;
    expect(c.recommended).toBe("autoregressive");
    expect(r.activeAfter).toBe("autoregressive");
    expect(c.sentence).toMatch(
      /EAGLE-3 is not recommended whatever its tok\/s: its answers score 0\.50, below autoregressive's 1\.00\./,
    );
    expect(compareText(r)).toMatch(
      /EAGLE-3 answers: greedy answers equal to the autoregressive service's on 12 of 24 prompts; score 0\.50 vs 1\.00: answers worse; NOT RECOMMENDED/,
    );
    const outs = comparisonOutputs(r).services;
    expect(outs[1]).toMatchObject({ exactMatchRate: 0.5, answerScore: 0.5 });
    expect(outs[1].notRecommended).toMatch(/below autoregressive's/);
  }, 180_000);
});
