import { describe, expect, it } from "vitest";
import { listProfiles, loadProfile, parseProfile, type Profile, ProfileError } from "../../simulator/profile";
import { curveAt, decodeRates, expectedRun, theoreticalLevel } from "../../simulator/perf-model";
import { drawLength, seededRandom } from "../../seeded-draws";
import { derivedProfile } from "./helpers";

const SHIPPED = [
  "kimi-k2.6-8x-rtx-pro-6000",
  "kimi-k2.6-8x-rtx-pro-6000-eagle3",
  "kimi-k2.6-8x-rtx-pro-6000-dflash",
  "kimi-k2.6-8x-rtx-pro-6000-published",
  "kimi-k2.6-8x-rtx-pro-6000-published-eagle3",
  "kimi-k2.6-8x-h200",
  "tiny",
];

describe("profiles", () => {
  it("ships the story host's three services, an H200 profile and tiny, all valid", () => {
    const names = listProfiles().map((p) => p.name);
    for (const name of SHIPPED) expect(names).toContain(name);
    for (const name of names) {
      const p = loadProfile(name);
      expect(p.name).toBe(name);
      expect(p.description.length).toBeGreaterThan(10);
    }
  });

  it("the story host loads in 330-630 s with 548 GB of weights; eagle3 and dflash are speculative", () => {
    const ar = loadProfile("kimi-k2.6-8x-rtx-pro-6000");
    expect([ar.load.minSeconds, ar.load.maxSeconds, ar.model.weightsGB, ar.speculative]).toEqual([330, 630, 548, null]);
    expect(loadProfile("kimi-k2.6-8x-rtx-pro-6000-eagle3").speculative?.algorithm).toBe("EAGLE3");
    expect(loadProfile("kimi-k2.6-8x-rtx-pro-6000-dflash").speculative?.algorithm).toBe("DFLASH");
    expect(loadProfile("kimi-k2.6-8x-h200").hardware.gpu).toContain("H200");
  });

  it("a malformed profile is rejected with the path of the bad field", () => {
    const file = derivedProfile("tiny", (p) => {
      // Deliberately malformed: a string where the schema wants a number, a required field removed.
      (p.decode.perRequestTokensPerSecond[1] as { value: unknown }).value = "fast";
      delete (p.prefill as { tokensPerSecond?: number }).tokensPerSecond;
    });
    expect(() => loadProfile(file)).toThrow(ProfileError);
    let message = "";
    try {
      loadProfile(file);
    } catch (err) {
      message = (err as Error).message;
    }
    expect(message).toContain("decode.perRequestTokensPerSecond[1].value");
    expect(message).toContain("prefill.tokensPerSecond");
  });

  it("rejects unknown faults, unsorted curves and min > max load, naming the field", () => {
    const base = loadProfile("tiny");
    const clone = () => JSON.parse(JSON.stringify(base)) as Profile;
    const a = { ...clone(), faults: ["no-such-fault"] };
    expect(() => parseProfile(a, "x")).toThrow(/faults\[0\]/);
    const b = clone();
    b.decode.perRequestTokensPerSecond = [
      { batch: 8, value: 1 },
      { batch: 2, value: 1 },
    ];
    expect(() => parseProfile(b, "x")).toThrow(/decode\.perRequestTokensPerSecond: points must be sorted/);
    const c = clone();
    c.load.maxSeconds = 0.1;
    c.load.minSeconds = 1;
    expect(() => parseProfile(c, "x")).toThrow(/load\.maxSeconds/);
  });

  it("an unknown profile name lists the shipped ones", () => {
    expect(() => loadProfile("nope")).toThrow(/shipped: .*tiny/);
  });
});

describe("performance model arithmetic", () => {
  const ar = loadProfile("kimi-k2.6-8x-rtx-pro-6000");
  const eagle = loadProfile("kimi-k2.6-8x-rtx-pro-6000-eagle3");

  it("interpolates per-request decode rates linearly between batch points, flat outside", () => {
    const curve = ar.decode.perRequestTokensPerSecond;
    expect(curveAt(curve, 1)).toBe(42);
    expect(curveAt(curve, 56)).toBe(14); // halfway between 48 (15) and 64 (13)
    expect(curveAt(curve, 500)).toBe(13);
  });

  it("theoretical aggregate = running batch x per-request rate, capped by max running requests", () => {
    expect(theoreticalLevel(ar, 64).aggregateTokensPerSecond).toBe(64 * 13);
    const over = theoreticalLevel(ar, 100);
    expect(over.runningBatch).toBe(64);
    expect(over.aggregateTokensPerSecond).toBe(64 * 13);
  });

  it("speculation: rate = steps/s x accept length, helping at batch 1 and not at 64", () => {
    const one = decodeRates(eagle, 1);
    expect(one.tokensPerStep).toBeCloseTo(3.2, 9);
    expect(one.tokensPerSecond).toBeCloseTo((42 / 1.35) * 3.2, 9);
    expect(theoreticalLevel(eagle, 1).aggregateTokensPerSecond).toBeGreaterThan(
      2 * theoreticalLevel(ar, 1).aggregateTokensPerSecond,
    );
    expect(theoreticalLevel(eagle, 64).aggregateTokensPerSecond).toBeLessThan(
      theoreticalLevel(ar, 64).aggregateTokensPerSecond,
    );
    expect(theoreticalLevel(eagle, 64).acceptLength).toBeCloseTo(1.7, 9);
  });

  it("expected closed-loop run: latency = prefill + (N-1)/rate", () => {
    const e = expectedRun(ar, 64, 900, 4096);
    const ttft = 0.03 + 900 / 9000;
    expect(e.timeToFirstTokenSeconds).toBeCloseTo(ttft, 12);
    expect(e.requestLatencySeconds).toBeCloseTo(ttft + 4095 / 13, 9);
    expect(e.aggregateOutputTokensPerSecond).toBeCloseTo((64 * 4096) / (ttft + 4095 / 13), 9);
  });

  it("length draws are deterministic for a seed and stay inside their bounds", () => {
    const dist = { distribution: "lognormal" as const, median: 900, sigma: 0.7, min: 40, max: 16000 };
    const a = Array.from(
      { length: 200 },
      (
        (r) => () =>
          drawLength(dist, r)
      )(seededRandom(5)),
    );
    const b = Array.from(
      { length: 200 },
      (
        (r) => () =>
          drawLength(dist, r)
      )(seededRandom(5)),
    );
    expect(a).toEqual(b);
    expect(Math.min(...a)).toBeGreaterThanOrEqual(40);
    expect(Math.max(...a)).toBeLessThanOrEqual(16000);
    const sorted = [...a].sort((x, y) => x - y);
    expect(sorted[100]).toBeGreaterThan(600);
    expect(sorted[100]).toBeLessThan(1300);
  });
});
