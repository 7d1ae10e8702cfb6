// simulator.loadSeconds: every model load of a simulated host takes that many simulated seconds
// instead of its profile's range (the story host's 330-630 s), its serving behaviour unchanged. The
// mixed fleet's engine test (test/engine/sim-mixed.test.ts) sets it so that its two `pulumi up`s
// wait for no 33-63 s load at its time scale; this is the knob's path from the config to the profile.
import { describe, expect, it } from "vitest";
import { parseConfig } from "../../stack/config";
import { simulatorProgram } from "../../sim-host/platform";
import { profileFor } from "../../simulator/sglang";
import { ProfileError } from "../../simulator/profile";
import { parseSglangArgs } from "../../simulator/sglang-args";
import { configIssues } from "../support/config-issues";

const sim = { hosts: [{ name: "sim-1", connection: { kind: "simulated" } }] };
const STORY = "kimi-k2.6-8x-rtx-pro-6000";
const args = parseSglangArgs(["--model-path", "moonshotai/Kimi-K2.6", "--tp", "8"]);

describe("simulator.loadSeconds", () => {
  it("is unset by default, and a negative one is refused naming its path", () => {
    expect(parseConfig(sim).simulator.loadSeconds).toBeUndefined();
    expect(parseConfig({ ...sim, simulator: { loadSeconds: 20 } }).simulator.loadSeconds).toBe(20);
    expect(configIssues({ ...sim, simulator: { loadSeconds: -1 } })).toEqual([
      "gpuhost:simulator.loadSeconds: Too small: expected number to be >=0",
    ]);
  });

  it("reaches each unit's environment only when set, so the units of a stack without it stay as they were", () => {
    const env = (simulator: Record<string, unknown>) =>
      simulatorProgram(parseConfig({ ...sim, simulator }).simulator, { nodePath: "node", gpuhostDir: "/g" })
        .environment;
    for (const kind of ["autoregressive", "eagle3", "dflash"] as const) {
      expect(env({ loadSeconds: 20 })[kind]).toContainEqual(["GPUHOST_SIM_LOAD_SECONDS", "20"]);
      expect((env({})[kind] ?? []).map(([name]) => name)).not.toContain("GPUHOST_SIM_LOAD_SECONDS");
    }
  });

  it("replaces the profile's load range and nothing else; a value that is no number of seconds is refused", () => {
    const story = profileFor(args, { GPUHOST_SIM_PROFILE: STORY }).profile;
    expect([story.load.minSeconds, story.load.maxSeconds]).toEqual([330, 630]);
    const quick = profileFor(args, { GPUHOST_SIM_PROFILE: STORY, GPUHOST_SIM_LOAD_SECONDS: "20" }).profile;
    expect(quick.load).toEqual({ ...story.load, minSeconds: 20, maxSeconds: 20 });
    expect({ ...quick, load: story.load }).toEqual(story);
    expect(() => profileFor(args, { GPUHOST_SIM_PROFILE: STORY, GPUHOST_SIM_LOAD_SECONDS: "soon" })).toThrow(
      ProfileError,
    );
  });
});
