// Mock test (pulumi.runtime.setMocks): the whole program (index.ts) on the sim stack's config. It
// picks the simulated platform for a simulated host, and exports exactly what the one output schema
// (stack/outputs.ts) describes.
import * as pulumi from "@pulumi/pulumi";
import { describe, expect, it } from "vitest";
import { HostOutputsSchema, StackOutputsSchema } from "../../stack/outputs";
import { named, recordResources, valueOf } from "./harness";

const measured = Object.fromEntries(
  Object.keys(HostOutputsSchema.shape).map((k) => [k, k === "drift" ? [] : `measured ${k}`]),
);
const rec = recordResources(
  () => "",
  (type) => (type.startsWith("pulumi-nodejs:dynamic") ? measured : {}),
);
(pulumi.runtime as unknown as { setAllConfig(c: Record<string, string>): void }).setAllConfig({
  "gpuhost:hosts": JSON.stringify([{ name: "mock-1", connection: { kind: "simulated" } }]),
  "gpuhost:simulator": JSON.stringify({ profile: "tiny", timeScale: 4 }),
});

describe("the program (index.ts) under mocks", async () => {
  const program = (await import("../../index")) as Record<string, unknown>;
  const hosts = await valueOf(program.gpuHosts as pulumi.Output<Record<string, Record<string, unknown>>>);
  const all = await rec.settle();

  it("gives a simulated host the simulated platform: its preparation step runs first", () => {
    expect(named(all, "mock-1-prepare").inputs.create).toContain("prepare.sh");
  });

  it("reads the model's config.json on the host after the gate, and says the roofline is not known rather than inventing one (issue 28)", () => {
    const read = named(all, "mock-1-model-config");
    expect(read.inputs.create).toContain("model-config.sh");
    expect(hosts["mock-1"].roofline).toEqual({
      known: false,
      reason: "not known: the host has no GPUs (gpus.count 0); no config.json on the host at the model's path",
    });
  });

  it("exports exactly the keys of StackOutputsSchema, and per host those of HostOutputsSchema", () => {
    expect(Object.keys(program).sort()).toEqual(Object.keys(StackOutputsSchema.shape).sort());
    expect(Object.keys(hosts)).toEqual(["mock-1"]);
    expect(Object.keys(hosts["mock-1"]).sort()).toEqual(Object.keys(HostOutputsSchema.shape).sort());
    expect(program.activeService).toBe("autoregressive");
  });
});
