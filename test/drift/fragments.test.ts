// ToolkitState's expected state and repairs are assembled from the components' own shares, in
// provisioning order (the composition root only lists them).
import { describe, expect, it } from "vitest";
import { cudaToolkitDrift, cudaToolkitPlan } from "../../components/cuda-toolkit";
import { assembleDrift, expectedToolkitState, preparationDrift, TOOLKIT_FIELDS } from "../../components/drift";

describe("assembleDrift", () => {
  const toolkit = cudaToolkitDrift(cudaToolkitPlan({}));

  it("merges the fields and keeps the repair steps in the order of the shares", () => {
    const units = { "/etc/systemd/system/u.service": { sha256: "a".repeat(64) } };
    const service = { expected: { units, unitPath: "/usr/bin" }, repairs: [{ fields: ["units."], script: "s.sh" }] };
    const env = { expected: { jitBase: "/var/cache/jit", jitKey: "k" } };
    const prep = preparationDrift({ script: "prepare.sh", args: ["x"] });
    const { expected, repairs } = assembleDrift([prep, toolkit, env, service]);
    expect(expected).toEqual(
      expectedToolkitState({ release: "13.0", units, unitPath: "/usr/bin", jitBase: "/var/cache/jit", jitKey: "k" }),
    );
    expect(repairs.map((r) => r.script)).toEqual([
      "prepare.sh",
      "components/cuda-toolkit/scripts/repository.sh",
      "components/cuda-toolkit/scripts/install.sh",
      "components/cuda-toolkit/scripts/verify.sh",
      "s.sh",
    ]);
    expect(repairs[0]).toEqual({ fields: [...TOOLKIT_FIELDS], script: "prepare.sh", args: ["x"] });
  });

  it("a platform without preparation adds nothing; without the toolkit's share there is no release", () => {
    expect(preparationDrift(undefined)).toEqual({});
    expect(() => assembleDrift([{ expected: { jitKey: "k" } }])).toThrow(/names the toolkit release/);
  });
});
