/** `gpuhost verify | bench | plan` as functions: exit codes, JSON shapes, files written. */
import { mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import * as path from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import type { BenchResult } from "../../gate/run/bench";
import type { CapacityPlan } from "../../gate/plan/capacity";
import { benchMain } from "../../cli/bench";
import { planMain } from "../../cli/plan";
import { verifyMain } from "../../cli/verify";
import { compareMain } from "../../cli/compare";
import type { VerifyResult } from "../../gate/readiness/verify";
import { benchArgv, io } from "./cli-fixture";
import { startSim, type SimHandle } from "./sim-fixture";

let sim: SimHandle | null = null;
afterEach(async () => {
  await sim?.close();
  sim = null;
});

describe("gpuhost verify", () => {
  it("exit 0 and ready JSON against a generating server", async () => {
    sim = await startSim();
    const o = io();
    expect(await verifyMain(["--endpoint", sim.url, "--model", "tiny", "--json"], o)).toBe(0);
    const json = JSON.parse(o.out()) as Omit<VerifyResult, "serviceState">;
    expect(json).toMatchObject({ ready: true, phase: "ready", diagnosis: null, model: "tiny" });
    expect(typeof json.elapsedSeconds).toBe("number");
    expect(o.err()).toContain("[verify] generate");
  });

  it("exit 1 with a diagnosis when nothing serves, within the deadline", async () => {
    const o = io();
    expect(await verifyMain(["--endpoint", "http://127.0.0.1:9", "--deadline", "1", "--json"], o)).toBe(1);
    const json = JSON.parse(o.out()) as Omit<VerifyResult, "serviceState">;
    expect(json.ready).toBe(false);
    expect(json.phase).toBe("connect");
    expect(json.diagnosis).toContain("ECONNREFUSED");
  });

  it("the API key never on the command line: --api-key is refused before any request; the file and GPUHOST_API_KEY work", async () => {
    const key = "sk-cli-test-0123456789";
    sim = await startSim({ apiKey: key });
    // A flag's value is in argv, readable by any local user while the command runs: refused, nothing sent.
    const flag = io();
    expect(await verifyMain(["--endpoint", sim.url, "--api-key", key, "--deadline", "5"], flag)).toBe(2);
    expect(flag.err()).toMatch(
      /--api-key would put the key in this command's argv.*GPUHOST_API_KEY or pass --api-key-file/,
    );
    expect(flag.err()).not.toContain(key);
    for (const main of [benchMain, compareMain])
      expect(await main(["--endpoint", sim.url, "--activate-command", "true {unit}", "--api-key", key], io())).toBe(2);
    // From a file (its first line), the server accepts it; a wrong key gets the server's 401 named.
    const dir = mkdtempSync(path.join(tmpdir(), "gpuhost-key-"));
    writeFileSync(path.join(dir, "key"), `${key}\n`, { mode: 0o600 });
    writeFileSync(path.join(dir, "wrong"), "sk-wrong\n", { mode: 0o600 });
    expect(
      await verifyMain(["--endpoint", sim.url, "--api-key-file", path.join(dir, "key"), "--deadline", "20"], io()),
    ).toBe(0);
    const wrong = io();
    expect(
      await verifyMain(["--endpoint", sim.url, "--api-key-file", path.join(dir, "wrong"), "--deadline", "3"], wrong),
    ).toBe(1);
    expect(wrong.out()).toMatch(/\/v1\/models answered HTTP 401/);
    const missing = io();
    expect(await verifyMain(["--endpoint", sim.url, "--api-key-file", path.join(dir, "none")], missing)).toBe(2);
    expect(missing.err()).toContain("cannot be read (ENOENT)");
    // From the environment.
    process.env.GPUHOST_API_KEY = key;
    try {
      expect(await verifyMain(["--endpoint", sim.url, "--deadline", "20"], io())).toBe(0);
    } finally {
      delete process.env.GPUHOST_API_KEY;
    }
  });

  it("exit 2 on usage errors", async () => {
    const o = io();
    expect(await verifyMain(["--deadline", "1"], o)).toBe(2);
    expect(o.err()).toContain("--endpoint is required");
    expect(await verifyMain(["--endpoint", "x", "--deadline", "-3"], io())).toBe(2);
    expect(await verifyMain(["--endpoint", "x", "--bogus"], io())).toBe(2);
  });
});

describe("gpuhost bench", () => {
  it("writes the summary with raw samples beside it, and an SVG chart", async () => {
    sim = await startSim();
    expect(await verifyMain(["--endpoint", sim.url], io())).toBe(0); // bench measures a ready server
    const dir = mkdtempSync(path.join(tmpdir(), "gpuhost-bench-"));
    const o = io();
    const code = await benchMain(
      benchArgv(sim.url, {
        concurrency: "2,4",
        maxTokens: "64",
        prompts: "2",
        json: path.join(dir, "b.json"),
        chart: path.join(dir, "b.svg"),
      }),
      o,
    );
    expect(code).toBe(0);
    const json = JSON.parse(readFileSync(path.join(dir, "b.json"), "utf8")) as BenchResult;
    expect(json.singleRequest[0]).toMatchObject({ maxTokens: 64, requests: 2, errors: 0 });
    expect(json.singleRequest[0].outputTokensPerSecond).toBeGreaterThan(0);
    expect(json.sweep.map((l) => l.concurrency)).toEqual([2, 4]);
    expect(json.sweep[0]).toHaveProperty("ttftP50Seconds");
    expect(json.sweep[0].errors).toBe(0);
    // Two small levels: either a knee at 2 or "not saturated up to C=4", never a guess.
    expect(json.saturated ? [2] : [null]).toContain(json.saturationConcurrency);
    expect(json.saturationVerdict).toMatch(/^(saturation at C=2|not saturated up to C=4)/);
    expect(json.sustainedOutputTokensPerSecond).toBeGreaterThan(0);
    expect(json.samples.sweep[1].requests).toHaveLength(8);
    expect(readFileSync(path.join(dir, "b.svg"), "utf8")).toMatch(/^<svg[\s\S]*<\/svg>\n$/);
    // CSV beside the JSON: a header and one row per level, the same figures.
    const csv = readFileSync(path.join(dir, "b.csv"), "utf8").trim().split("\n");
    expect(csv[0].split(",").slice(0, 5)).toEqual([
      "concurrency",
      "requests",
      "errors",
      "durationSeconds",
      "outputTokensPerSecond",
    ]);
    expect(csv).toHaveLength(3);
    expect(Number(csv[2].split(",")[4])).toBe(json.sweep[1].outputTokensPerSecond);
    expect(o.out()).toMatch(/saturation at C=2|not saturated up to C=4/);
    expect(o.err()).toContain("[bench] concurrency 4");
  });

  it("rejects a malformed concurrency list", async () => {
    const o = io();
    expect(await benchMain(["--endpoint", "http://127.0.0.1:9", "--concurrency", "8,x"], o)).toBe(2);
    expect(o.err()).toContain("--concurrency");
  });
});

describe("gpuhost plan", () => {
  it("the story's plan as JSON", async () => {
    const o = io();
    expect(await planMain(["--throughput", "800", "--hosts", "2", "--deadline-days", "10", "--json"], o)).toBe(0);
    const p = JSON.parse(o.out()) as CapacityPlan;
    expect(p.totalOutputTokens).toBe(1.8e9);
    expect(p.daysOnOneHost).toBeCloseTo(26.04, 2);
    expect(p.daysOnHosts).toBeCloseTo(13.02, 2);
    expect(p.hostsForDeadline).toBe(3);
  });

  it("text output, and usage errors", async () => {
    const o = io();
    expect(await planMain(["--throughput", "5000", "--completions", "100", "--tokens", "10"], o)).toBe(0);
    expect(o.out()).toContain("1,000 tokens");
    expect(await planMain([], io())).toBe(2);
    expect(await planMain(["--throughput", "fast"], io())).toBe(2);
    expect(await planMain(["--throughput", "1", "--completions", "1.5"], io())).toBe(2);
  });
});
