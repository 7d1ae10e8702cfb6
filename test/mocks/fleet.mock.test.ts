// Mock test (pulumi.runtime.setMocks): the fleet's resource graph as stack/fleet.ts composes it
// (config `router`): the Router and FleetVerification at the stack's top, their names, types,
// children and what each waits for. A URN is made of these: a change here replaces on a live stack.
import { describe, expect, it } from "vitest";
import { parseConfig } from "../../stack/config";
import { gpuFleet } from "../../stack/fleet";
import { GpuServingHost } from "../../components/gpu-serving-host";
import { simulatedPlatform } from "../../sim-host/host";
import { dependencyNames, named, parentName, recordResources } from "./harness";

const rec = recordResources((name) =>
  name.endsWith("-toolkit-verify") ? "fingerprint=f00d\nnvcc_version=V13.0.88\n" : "",
);

const config = parseConfig({
  hosts: [
    { name: "sim-1", connection: { kind: "simulated" }, port: 30001 },
    { name: "sim-2", connection: { kind: "simulated" }, port: 30002 },
  ],
  simulator: { profile: "tiny", timeScale: 4 },
  router: { host: "sim-1" },
});

describe("the fleet on two simulated hosts (mocks)", async () => {
  const hosts = config.hosts.map((host) => {
    const platform = simulatedPlatform(`/srv/project/.gpuhost/sim-hosts/${host.name}`, config.simulator);
    const h = new GpuServingHost(host.name, { host, platform, config, fleetMember: true });
    return {
      host,
      connection: platform.connection,
      verification: h.verification,
      model: h.model,
      activeService: h.activeService,
      timeScale: platform.timeScale ?? 1,
    };
  });
  gpuFleet(config, hosts);
  const all = await rec.settle();
  const fleet = all.filter((r) => !r.name.startsWith("sim-"));

  it("registers the router, its two steps under it, then the fleet's verification: each named, typed and parented as before", () => {
    expect(fleet.map((r) => [r.type, r.name, parentName(all, r) ?? null])).toEqual([
      ["gpuhost:index:Router", "router", null],
      ["command:local:Command", "router-install", "router"],
      ["command:local:Command", "router-configure", "router"],
      ["pulumi-nodejs:dynamic/gpuhost:FleetVerification", "fleet-verified", null],
    ]);
  });

  it("the router waits for every host's gate; the fleet's verification for the router's configuration", () => {
    expect(dependencyNames(all, named(all, "router"))).toEqual(["sim-1-verified", "sim-2-verified"]);
    expect(dependencyNames(all, named(all, "fleet-verified"))).toEqual([
      "router-configure",
      "router-install",
      "sim-1-verified",
      "sim-2-verified",
    ]);
  });

  it("the fleet's verification is given both hosts' figures, in the hosts' own clock, and no groups", () => {
    const inputs = named(all, "fleet-verified").inputs;
    expect(Object.keys(inputs.hostFigures as object).sort()).toEqual(["sim-1", "sim-2"]);
    expect(inputs.timeScale).toBe(4);
    expect(inputs.groups).toBeUndefined();
  });
});
