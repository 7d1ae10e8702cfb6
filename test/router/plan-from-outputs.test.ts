// hostsForJob: what examples/capacity-plan computes from a host stack's outputs (StackReference).
import { describe, expect, it } from "vitest";
import { hostsForJob } from "../../stack/plan-from-outputs";

const job = { completions: 900_000, outputTokensPerCompletion: 2000, deadlineDays: 7 };

describe("hostsForJob", () => {
  it("plans the active service of a host without a comparison: hosts = ceil(days on one host / deadline)", () => {
    // 1.8e9 tokens at 800 tok/s: 26.04 days on one host, 4 hosts for 7 days (the story's figure).
    const [p] = hostsForJob({ a: { activeService: "eagle3", sustainedOutputTokensPerSecond: 800 } }, job);
    expect(p).toMatchObject({ host: "a", service: "eagle3", hostsForDeadline: 4 });
    expect(p.daysOnOneHost).toBeCloseTo(1.8e9 / (800 * 86400), 9);
  });

  it("plans every compared service, skipping one that could not be measured", () => {
    const comparison = {
      services: [
        { service: "autoregressive", sustainedOutputTokensPerSecond: 500 },
        { service: "eagle3", sustainedOutputTokensPerSecond: 1000 },
        { service: "dflash", sustainedOutputTokensPerSecond: null },
      ],
    };
    const plans = hostsForJob(
      { a: { activeService: "eagle3", sustainedOutputTokensPerSecond: 1000, comparison: { ...comparison } } },
      job,
    );
    expect(plans.map((p) => [p.service, p.hostsForDeadline])).toEqual([
      ["autoregressive", 6],
      ["eagle3", 3],
    ]);
  });

  it("a host left out of a fleet (no measurement) plans nothing; outputs of another shape are refused by name", () => {
    expect(hostsForJob({ a: { activeService: "autoregressive" } }, job)).toEqual([]);
    expect(() => hostsForJob({ b: { activeService: "turbo", sustainedOutputTokensPerSecond: 1 } }, job)).toThrow(
      /^gpuHosts\.b is not a gpuhost host's outputs/,
    );
  });
});
