// Mock test (pulumi.runtime.setMocks): GpuServingHost's resource graph on the simulated platform,
// the platform chosen as index.ts chooses it, and what flows into the dynamic resources.
import * as path from "node:path";
import { describe, expect, it } from "vitest";
import { parseConfig } from "../../stack/config";
import { GpuServingHost } from "../../components/gpu-serving-host";
import { SIM_REPO_URL } from "../../sim-host/platform";
import { PREPARE_SCRIPT, simulatedPlatform } from "../../sim-host/host";
import { dependencyNames, named, parentName, recordResources } from "./harness";

const rec = recordResources((name) =>
  name.endsWith("-toolkit-verify") ? "fingerprint=f00d\nnvcc_version=V13.0.88\n" : "",
);

const root = "/srv/project/.gpuhost/sim-hosts/sim-1";
const config = parseConfig({
  hosts: [{ name: "sim-1", connection: { kind: "simulated" } }],
  services: { eagle3: { draftModelPath: "/models/eagle3" } },
  simulator: { profile: "tiny", timeScale: 4 },
});

describe("GpuServingHost on the simulated platform (mocks)", async () => {
  new GpuServingHost("sim-1", { host: config.hosts[0], platform: simulatedPlatform(root, config.simulator), config });
  const all = await rec.settle();
  const deps = (name: string) => dependencyNames(all, named(all, name));

  it("registers the components and their Commands under the host, in provisioning order", () => {
    expect(all.map((r) => r.name).sort()).toEqual(
      [
        "sim-1",
        "sim-1-prepare",
        "sim-1-toolkit",
        "sim-1-toolkit-repository",
        "sim-1-toolkit-install",
        "sim-1-toolkit-verify",
        "sim-1-env",
        "sim-1-env-user",
        "sim-1-env-venv",
        "sim-1-env-jit-cache",
        "sim-1-service",
        "sim-1-service-unit-autoregressive",
        "sim-1-service-unit-eagle3",
        "sim-1-service-activate",
        "sim-1-verified",
        "sim-1-toolkit-state",
        "sim-1-model-config",
      ].sort(),
    );
    for (const c of [
      "sim-1-prepare",
      "sim-1-toolkit",
      "sim-1-env",
      "sim-1-service",
      "sim-1-verified",
      "sim-1-toolkit-state",
      "sim-1-model-config",
    ])
      expect(parentName(all, named(all, c)), c).toBe("sim-1");
    expect(named(all, "sim-1-prepare").type).toBe("command:local:Command");
  });

  it("prepares the simulated host first: the toolkit and the environment wait for the preparation", () => {
    expect(deps("sim-1-prepare")).toEqual([]);
    expect(deps("sim-1-toolkit")).toContain("sim-1-prepare");
    expect(deps("sim-1-env")).toContain("sim-1-prepare");
    // Depending on a component means depending on each of its resources.
    expect(deps("sim-1-service")).toEqual(expect.arrayContaining(["sim-1-toolkit-verify", "sim-1-env-venv"]));
    expect(deps("sim-1-verified")).toContain("sim-1-service-activate");
    expect(deps("sim-1-toolkit-state")).toContain("sim-1-service-activate");
  });

  it("the preparation runs sim-host/scripts/prepare.sh with GPUHOST_ROOT and the shims, re-run when the catalogue changes", () => {
    const prepare = named(all, "sim-1-prepare").inputs;
    expect(prepare.create).toContain(`GPUHOST_ROOT=${root}`);
    expect(prepare.create).toContain(path.join("dist", "sim-host", "prepare.js"));
    expect(prepare.triggers).toHaveLength(2); // the script's hash and the catalogue's
  });

  it("installs from the simulated host's own repository, trusted", () => {
    const repo = named(all, "sim-1-toolkit-repository").inputs.create as string;
    expect(repo).toContain(` trusted ${SIM_REPO_URL}/ `);
  });

  it("the active unit's probes read the simulated systemd; no SSH access for the gate", () => {
    const v = named(all, "sim-1-verified").inputs;
    expect(v.serviceStateCommand).toEqual(
      expect.arrayContaining([`GPUHOST_ROOT=${root}`, "show", "sglang-autoregressive.service"]),
    );
    expect(v.hostAccess).toBeUndefined();
    expect(v.endpoint).toEqual({ url: `http://127.0.0.1:${config.services.port}`, model: config.services.modelPath });
  });

  it("the verification gets the parsed policy, plan and workload of the stack config", () => {
    const v = named(all, "sim-1-verified").inputs;
    expect(v.verifyPolicy).toEqual(config.verification);
    expect(v.benchPlan).toEqual(config.benchmark);
    expect(v.workload).toEqual(config.workload);
  });

  it("ToolkitState repairs with the preparation first, then the toolkit's and the units' own steps", () => {
    const ts = named(all, "sim-1-toolkit-state").inputs;
    expect(ts.onDrift).toBe("repair");
    expect(ts.connection).toEqual({ kind: "local", root, toolsDir: "sim-host/bin" });
    expect((ts.repairs as { script: string }[]).map((s) => s.script)).toEqual([
      PREPARE_SCRIPT,
      "components/cuda-toolkit/scripts/repository.sh",
      "components/cuda-toolkit/scripts/install.sh",
      "components/cuda-toolkit/scripts/verify.sh",
      "components/services/scripts/install-unit.sh",
      "components/services/scripts/install-unit.sh",
      "components/drift/scripts/restart-unit.sh",
      "components/services/scripts/activate.sh",
    ]);
  });
});
