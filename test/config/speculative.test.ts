import { describe, expect, it } from "vitest";
import { parseConfig } from "../../stack/config";
import { speculativeOf } from "../../components/services/schema";
import { stackConfig } from "./stacks";

describe("the active service's acceptance floor reaches verification", () => {
  const story = stackConfig("story") as { services: Record<string, unknown> };

  it("autoregressive: no speculative check", () => {
    expect(speculativeOf(parseConfig(story).services)).toBeUndefined();
  });

  it("EAGLE-3 and DFlash: their draft and floor (default 1.5, configurable)", () => {
    const eagle = parseConfig({ ...story, services: { ...story.services, active: "eagle3" } });
    expect(speculativeOf(eagle.services)).toEqual({
      algorithm: "EAGLE3",
      draftModelPath: "/models/Kimi-K2.6-EAGLE3",
      acceptanceFloor: 1.5,
    });
    const dflash = story.services.dflash as Record<string, unknown>;
    const d = parseConfig({
      ...story,
      services: { ...story.services, active: "dflash", dflash: { ...dflash, acceptanceFloor: 2.5 } },
    });
    expect(speculativeOf(d.services)).toEqual({
      algorithm: "DFLASH",
      draftModelPath: "/models/Kimi-K2.6-DFlash",
      acceptanceFloor: 2.5,
    });
  });

  it("a floor below one token per step is refused with its config path", () => {
    const dflash = story.services.dflash as Record<string, unknown>;
    expect(() =>
      parseConfig({ ...story, services: { ...story.services, dflash: { ...dflash, acceptanceFloor: 0.5 } } }),
    ).toThrow(/services\.dflash\.acceptanceFloor/);
  });
});
