// Mock test (pulumi.runtime.setMocks): the stack's benchmark settings reach the service comparison,
// so it judges with the same error budget and knee as VerifiedGeneration (not the schema's
// defaults), and both measure in the same (host) time.
import { describe, expect, it } from "vitest";
import { parseConfig } from "../../stack/config";
import { GpuServingHost } from "../../components/gpu-serving-host";
import { simulatedPlatform } from "../../sim-host/host";
import { levelsOf } from "../../gate/base/workload";
import { BenchPlanSchema } from "../../gate/base/schema";
import { named, recordResources } from "./harness";

const rec = recordResources((name) =>
  name.endsWith("-toolkit-verify") ? "fingerprint=f00d\nnvcc_version=V13.0.88\n" : "",
);

const config = parseConfig({
  hosts: [{ name: "sim-1", connection: { kind: "simulated" } }],
  services: { eagle3: { draftModelPath: "/models/eagle3" }, compare: true, active: "auto" },
  benchmark: { errorBudget: 0.05, kneeMinGain: 0.3, kneeMaxTtftP95Seconds: 20, rate: [1, 4], repeats: 2 },
  simulator: { profile: "tiny", timeScale: 4 },
});

describe("the stack's benchmark settings reach the service comparison (mocks)", async () => {
  const root = "/srv/project/.gpuhost/sim-hosts/sim-1";
  new GpuServingHost("sim-1", { host: config.hosts[0], platform: simulatedPlatform(root, config.simulator), config });
  const all = await rec.settle();

  it("the comparison takes the stack's one benchmark plan, the same as VerifiedGeneration's: judged and shaped by it", () => {
    const plan = named(all, "sim-1-compare").inputs.plan as { plan: Record<string, unknown>; timeScale: number };
    const verified = named(all, "sim-1-verified").inputs.benchPlan;
    // Not a translation: the very plan, every knob (the error budget, the knee, the TTFT bound, the
    // certification, the rates, repeats and SLO) as VerifiedGeneration benchmarks with it.
    expect(plan.plan).toEqual(verified);
    expect(plan.plan).toMatchObject({
      errorBudget: 0.05,
      kneeMinGain: 0.3,
      kneeMaxTtftP95Seconds: 20,
      rateShortfall: config.benchmark.rateShortfall,
      certification: config.benchmark.certification,
      rate: [1, 4],
      repeats: 2,
      slo: config.benchmark.slo,
    });
    expect(plan.timeScale).toBe(4);
    expect(levelsOf(BenchPlanSchema.parse(plan.plan)).mode).toBe("open");
  });

  it("VerifiedGeneration measures in the same host time as the comparison", () => {
    const v = named(all, "sim-1-verified").inputs;
    expect(v.timeScale).toBe(4);
    expect(v.benchPlan).toMatchObject({ errorBudget: 0.05, kneeMinGain: 0.3, rate: [1, 4] });
  });
});
