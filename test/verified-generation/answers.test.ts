/**
 * Issue 43.2/43.3 through `up`'s own code (VerifiedGeneration's create and read): a server written in
 * the test that answers fluently wrong with correct usage fails the create saying the answers failed,
 * and nothing is published; a verified service's outputs carry the answer certificate and every
 * capacity figure says whether answers were checked; a refresh after the simulator's wrong-answers
 * fault is switched on finds the answer score fallen (drift).
 */
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import * as path from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { create, PROVIDER_VERSION, read } from "../../components/verified-generation/provider";
import { VerifiedGenerationOutputsSchema } from "../../gate/reports/outputs";
import { startSimulator } from "../../simulator/index";
import { loadProfile } from "../../simulator/profile";
import { fluentlyWrong } from "../gate/answer-servers";

let closers: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const c of closers) await c();
  closers = [];
});

function inputs(url: string, model: string, verifyPolicy: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    providerVersion: PROVIDER_VERSION,
    endpoint: { url, model },
    serviceIdentity: "sglang-m.service@abc",
    toolkitFingerprint: "cuda-toolkit-13-0=13.0.2-1",
    environmentLock: "sglang==0.5.6",
    verifyPolicy: { deadlineSeconds: 30, health: { timeoutSeconds: 10 }, ...verifyPolicy },
    benchPlan: {
      singleRequestMaxTokens: [16],
      singleRequestPrompts: 1,
      // Long enough a level that two slots are seen held on a loaded machine (16 tokens read 1.77 of 2):
      // the subject here is the answers, not the sweep.
      concurrency: [2],
      sweepMaxTokens: 256,
      requestsPerConcurrency: 4,
    },
    timeScale: 10,
  };
}

async function sim() {
  const faultsFile = path.join(mkdtempSync(path.join(tmpdir(), "gpuhost-answers-")), "faults");
  const s = await startSimulator({
    profile: loadProfile("tiny"),
    port: 0,
    timeScale: 10,
    log: () => undefined,
    faultsFile,
  });
  closers.push(() => s.close());
  return {
    url: s.url,
    switchOn: async (fault: string) => {
      writeFileSync(faultsFile, `${fault}\n`);
      await new Promise((r) => setTimeout(r, 1200)); // the simulator reads the file again at most every 200 ms
    },
  };
}

describe("VerifiedGeneration and the answer check", () => {
  it("a server that answers fluently wrong with correct usage: the create fails saying the answers failed, nothing published", async () => {
    const s = await fluentlyWrong();
    closers.push(s.close);
    await expect(create(inputs(s.url, "m"))).rejects.toThrow(
      /readiness gate failed in phase "answers" .*: the answers failed: 0 of 24 right .*verification\.answers\.passThreshold/,
    );
  }, 60_000);

  it("the simulator: the answer certificate beside the throughput one, the capacity figure says the answers were checked", async () => {
    const host = await sim();
    const outs = VerifiedGenerationOutputsSchema.parse((await create(inputs(host.url, "tiny"))).outs);
    expect(outs.answerCertificate).toMatchObject({ checked: true, passed: true, right: 24, prompts: 24, score: 1 });
    expect(outs.capacity.answers).toMatch(/^answers checked: 24 of 24 right/);
    expect(outs.readiness.phases.map((p) => p.phase)).toContain("answers");
  }, 120_000);

  it('"none": published, and the capacity figure says "answers not checked"', async () => {
    const host = await sim();
    await host.switchOn("wrong-answers");
    const outs = VerifiedGenerationOutputsSchema.parse(
      (await create(inputs(host.url, "tiny", { answers: { file: "none" } }))).outs,
    );
    expect(outs.answerCertificate?.checked).toBe(false);
    expect(outs.capacity.answers).toMatch(/^answers not checked \(verification\.answers\.file is "none"\)/);
  }, 120_000);

  it("a refresh after wrong-answers is switched on: health.answerScore drift, the score fallen from 1 to 0", async () => {
    const host = await sim();
    const created = await create(inputs(host.url, "tiny"));
    const outs = created.outs as Record<string, unknown>;
    expect((outs.healthBaseline as { answerScore: number }).answerScore).toBe(1);
    const clean = await read(created.id, outs);
    expect(clean.props.drift).toEqual([]);
    await host.switchOn("wrong-answers");
    const after = await read(created.id, clean.props);
    const drift = after.props.drift as { field: string; found: string }[];
    expect(drift.map((d) => d.field)).toEqual(["health.answerScore"]);
    expect(drift[0].found).toMatch(
      /^0 of 24 right \(score 0\.00\): the service answers worse than when it was verified/,
    );
    expect((after.props.healthCheck as { answerScore: number }).answerScore).toBe(0);
  }, 120_000);
});
