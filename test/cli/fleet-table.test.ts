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
