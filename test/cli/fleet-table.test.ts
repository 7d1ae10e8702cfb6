// The fleet table the demo prints (cli/fleet-table.ts): the fleet's sustained tok/s with its 95 %
// interval over the runs, and the router's drift named field by field.
import { describe, expect, it } from "vitest";
import { fleetTable, withInterval } from "../../cli/fleet-table";
import type { FleetOutputs } from "../../stack/outputs";

const fleet: FleetOutputs = {
  routerEndpoint: "http://127.0.0.1:31410",
  smgVersion: "smg 1.13.0",
  registered: [
    { name: "h1", url: "http://127.0.0.1:1", requests: 60, share: 0.6, hostSustainedOutputTokensPerSecond: 100 },
    { name: "h2", url: "http://127.0.0.1:2", requests: 40, share: 0.4, hostSustainedOutputTokensPerSecond: 100 },
  ],
  leftOut: [],
  sweep: [{ concurrency: 8, outputTokensPerSecond: 180, requests: 100, errors: 0 }],
  saturationConcurrency: null,
  sustainedOutputTokensPerSecond: 180,
  sustainedInterval: { low: 170.5, high: 189.5, halfWidth: 9.5, runs: 3 },
  hostsSustainedOutputTokensPerSecond: 200,
  scalingEfficiency: 0.9,
  plan: { hosts: 2, totalOutputTokens: 1e6, daysForJob: 0.06, deadlineDays: 7, hostsForDeadline: 1, hostsMissing: 0 },
  drift: [],
  verifiedAt: "2026-12-02T12:00:00.000Z",
};

describe("fleet table", () => {
  it("shows the fleet's sustained tok/s with its interval and the runs it came from", () => {
    const text = fleetTable(fleet);
    expect(text).toMatch(/^fleet \(through SMG\) +100 +100 % +180\.0 ± 9\.5 \(95 %, 3 runs\)$/m);
    expect(text).toContain("scaling efficiency: 90 %");
    expect(text).not.toContain("drift:");
  });

  it("shows the mean alone where no interval was measured (state from before intervals)", () => {
    expect(withInterval(180, null)).toBe("180.0");
    expect(withInterval(180, undefined)).toBe("180.0");
  });

  it("names each drifted field of the router", () => {
    const text = fleetTable({
      ...fleet,
      drift: [
        {
          field: "workers.h2",
          expected: "registered and healthy at http://127.0.0.1:2",
          found: "failed in the router",
          repair: "pulumi up",
        },
      ],
    });
    expect(text).toContain(
      "drift: workers.h2: expected registered and healthy at http://127.0.0.1:2, found failed in the router",
    );
  });
});

describe("a mixed fleet's table", () => {
  const measured = (over: Record<string, unknown>) => ({
    concurrency: 16,
    requests: 64,
    errors: 0,
    outputTokensPerSecond: 766,
    ttftP95Seconds: 0.26,
    itlPerTokenP95Seconds: 0.021,
    errorRate: 0,
    withinErrorBudget: true,
    errorExamples: [],
    certificate: { certified: true, checks: [{ name: "reconciled" as const, ok: true, detail: "fine" }] },
    servedBy: { h1: 100, h2: 0 },
    ...over,
  });
  const mixed: NonNullable<FleetOutputs["mixed"]> = {
    interactive: {
      service: "eagle3",
      activeService: "eagle3",
      model: "k-interactive",
      workers: ["h1"],
      leftOut: ["h3"],
      measured: measured({}),
      meets: false,
      objective: { users: 16, ttftP95Seconds: 3, itlP95Seconds: 0.02 },
    },
    batch: {
      service: "autoregressive",
      activeService: null,
      model: "k",
      workers: ["h2"],
      leftOut: [],
      measured: measured({ concurrency: 64, outputTokensPerSecond: 1661, servedBy: { h1: 0, h2: 900 } }),
      meets: true,
      neededTokensPerSecond: 1541,
      daysForJob: 0.93,
      deadlineDays: 1,
    },
    windowSeconds: 86,
    predicted: {
      interactive: {
        hosts: 1,
        perHost: 16,
        measuredAt: 16,
        ttftP95Seconds: 0.14,
        itlPerTokenP95Seconds: 0.0323,
        meetsObjective: false,
      },
      batch: { hosts: 1, tokensPerSecond: 1660, daysForJob: 0.93, meetsDeadline: true, hostsForDeadline: 1 },
      verdict: "interactive, 1 of 2 eagle3 hosts: missed (restore 1 host(s)).",
    },
    plan: {
      interactive: null,
      batch: null,
      hosts: null,
      homogeneous: [],
      savedHosts: null,
      verdict: "Mix: 4 hosts.",
    },
    curves: [],
    verdict: "interactive: MISSED; batch: met",
    warnings: [
      "the batch group (k) is not certified: client: over 90 %; counted anyway (certification.require: false)",
    ],
  };

  it("puts each class's measurement beside the plan's prediction, with its objective, where it was served and who is left out", () => {
    const text = fleetTable({ ...fleet, sweep: [], scalingEfficiency: null, sustainedInterval: null, mixed });
    expect(text).toMatch(
      /^ {2}interactive k-interactive +eagle3 +1 +16 +0\.26 s \(0\.14 s\) +21\.0 ms \(32\.3 ms\) +766 +MISSED \(<= 3 s, 20\.0 ms\)$/m,
    );
    expect(text).toMatch(/^ {2}batch k +autoregressive +1 +64 .* 1,661 \(1,660\) +met \(>= 1,541 tok\/s\)$/m);
    expect(text).toContain("served: k-interactive on h1; k on h2");
    expect(text).toContain("left out of k-interactive: h3");
    expect(text).toContain("predicted: interactive, 1 of 2 eagle3 hosts: missed (restore 1 host(s)).");
    expect(text).not.toContain("scaling efficiency");
    expect(text).toContain("certificates: k-interactive certified; k certified");
    expect(text).toContain("warning: the batch group (k) is not certified: client: over 90 %;");
  });
});
