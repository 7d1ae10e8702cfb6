/**
 * The job through a fleet: the real SMG (PyPI smg, hash-locked, .ci/smg.sh) in front of two
 * simulators, the job aimed by a fleet stack's outputs (the router's endpoint, the fleet's knee and
 * sustained figure, its hosts), the key from GPUHOST_API_KEY: every custom_id recorded once, and both
 * hosts generated for it (their own counters).
 */
import * as path from "node:path";
import * as fs from "node:fs";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { jobMain } from "../../cli/job";
import { parseCounters } from "../../gate/run/server-counters";
import { startSimulator, type RunningSimulator } from "../../simulator/index";
import { type RunningRouter, smgVenv, startRouter, waitForHealthyWorkers } from "../support/smg";
import { readLines, recordedCounts, tempDir, writeInput } from "./helpers";

const KEY = "job-fleet-key-0123456789abcdef";
const N = 120;
const sims: RunningSimulator[] = [];
let router: RunningRouter | undefined;

beforeAll(async () => {
  const venv = smgVenv();
  for (let i = 0; i < 2; i++)
    sims.push(await startSimulator({ profile: "tiny", port: 0, timeScale: 20, apiKey: KEY, log: () => undefined }));
  // Round robin: cache-aware routing sends these short, alike prompts all to one worker.
  router = await startRouter({ venv, workerUrls: sims.map((s) => s.url), apiKey: KEY, policy: "round_robin" });
  await waitForHealthyWorkers(router.url, 2);
}, 600_000);

afterAll(async () => {
  await router?.stop();
  await Promise.all(sims.map((s) => s.close()));
  delete process.env.GPUHOST_API_KEY;
});

async function generated(url: string): Promise<number> {
  const text = await (await fetch(`${url}/metrics`, { headers: { authorization: `Bearer ${KEY}` } })).text();
  const read = parseCounters(text, "tiny");
  return read.ok ? read.snapshot.generatedTokens : NaN;
}

describe("gpuhost job through SMG", () => {
  it("aims at the fleet's router from its outputs and records every custom_id once, both hosts generating", async () => {
    const dir = tempDir();
    writeInput(path.join(dir, "in.jsonl"), N, "tiny", true);
    const host = {
      activeService: "autoregressive",
      endpoint: sims[0].url,
      model: "tiny",
      sustainedOutputTokensPerSecond: 400,
      saturationConcurrency: 4,
    };
    const fleet = {
      routerEndpoint: router!.url,
      registered: sims.map((s, i) => ({ name: `h${i}`, url: s.url, requests: 1 })),
      saturationConcurrency: 8,
      sustainedOutputTokensPerSecond: 800,
      sweep: [],
    };
    fs.writeFileSync(
      path.join(dir, "outputs.json"),
      JSON.stringify({ gpuHosts: { a: host, b: { ...host, endpoint: sims[1].url } }, fleet }),
    );
    process.env.GPUHOST_API_KEY = KEY;
    const before = await Promise.all(sims.map((s) => generated(s.url)));
    let out = "";
    let err = "";
    const io = {
      stdout: { write: (s: string) => (out += s) },
      stderr: { write: (s: string) => (err += s) },
      signal: new AbortController().signal,
    };
    const args = [
      "--input",
      path.join(dir, "in.jsonl"),
      "--output",
      path.join(dir, "out.jsonl"),
      "--outputs",
      path.join(dir, "outputs.json"),
    ];
    expect(await jobMain(args, io), err).toBe(0);
    expect(err).toMatch(/120 requests, 0 already recorded, 8 at a time against http:\/\/127\.0\.0\.1:\d+/);
    expect(out).toMatch(/against the fleet's router \(2 hosts of autoregressive\)/);
    expect(readLines(path.join(dir, "out.errors.jsonl"))).toEqual([]);
    const counts = recordedCounts(dir);
    expect(counts.size).toBe(N);
    expect([...counts.values()].every((c) => c === 1)).toBe(true);
    const after = await Promise.all(sims.map((s) => generated(s.url)));
    expect(after[0]).toBeGreaterThan(before[0]);
    expect(after[1]).toBeGreaterThan(before[1]);
  }, 300_000);
});
