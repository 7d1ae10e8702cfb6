/** Where `gpuhost job --stack` aims: the host's active service or the fleet's router, at the measured knee. */
import { describe, expect, it } from "vitest";
import { aimFromOutputs } from "../../job/aim";
import type { FleetOutputs } from "../../stack/outputs";

const host = (over: Record<string, unknown> = {}) => ({
  activeService: "autoregressive",
  endpoint: "http://127.0.0.1:30000",
  model: "kimi-k2",
  saturationConcurrency: 48,
  sustainedOutputTokensPerSecond: 829,
  sweep: [{ concurrency: 8 }, { concurrency: 48 }, { concurrency: 64 }],
  timeNote:
    "Figures are in the simulated host's own time: measured on the wall clock at time scale 4, durations multiplied and rates divided by 4.",
  ...over,
});

describe("the job's aim from a stack's outputs", () => {
  it("one host: its active service, its knee, its certified tok/s, its time scale", () => {
    expect(aimFromOutputs({ gpuHosts: { a: host() }, fleet: null }, "sim")).toEqual({
      endpoint: "http://127.0.0.1:30000",
      model: "kimi-k2",
      concurrency: 48,
      certifiedTokensPerSecond: 829,
      hosts: 1,
      timeScale: 4,
      against: "host a's autoregressive service",
    });
  });

  it("no knee found: the last level measured, where the sustained figure was taken", () => {
    expect(aimFromOutputs({ gpuHosts: { a: host({ saturationConcurrency: null }) } }, "sim").concurrency).toBe(64);
  });

  it("a fleet: the router, the fleet's knee and sustained tok/s, its hosts", () => {
    // The fields as the stack exports them (typed by its schema, so a renamed field fails to compile).
    const worker = { name: "a", url: "http://10.0.0.2:30000", requests: 10 };
    const fleet: Pick<
      FleetOutputs,
      "routerEndpoint" | "saturationConcurrency" | "sustainedOutputTokensPerSecond" | "sweep"
    > & { registered: Pick<FleetOutputs["registered"][number], "name" | "url" | "requests">[] } = {
      routerEndpoint: "http://10.0.0.1:30080",
      registered: [worker, { ...worker, name: "b", url: "http://10.0.0.3:30000" }],
      saturationConcurrency: 96,
      sustainedOutputTokensPerSecond: 1600,
      sweep: [],
    };
    const aim = aimFromOutputs({ gpuHosts: { a: host(), b: host() }, fleet }, "sim-fleet");
    expect(aim).toMatchObject({
      endpoint: "http://10.0.0.1:30080",
      concurrency: 96,
      certifiedTokensPerSecond: 1600,
      hosts: 2,
    });
  });

  it("a stack with no measured host is refused by name", () => {
    expect(() => aimFromOutputs({ gpuHosts: { a: { activeService: "autoregressive" } } }, "sim")).toThrow(
      /stack sim has no measured host/,
    );
    expect(() => aimFromOutputs({}, "sim")).toThrow(/not a gpuhost stack's \(gpuHosts: /);
  });
});
