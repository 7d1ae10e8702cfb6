// ToolkitState's repairs: which steps run for which drift (pure), and update with onDrift "repair"
// on a simulated host provisioned through the host layer's shims, running the provisioning
// scripts for real through execOnHost (the engine cannot run inside Vitest, pulumi#10480; the
// engine-level proof is test/engine/sim-drift.test.ts).
import { useSimulatedHosts } from "./sim-hosts-fixture";
import { spawnSync } from "node:child_process";
import * as fs from "node:fs";
import * as path from "node:path";
import { describe, expect, it } from "vitest";
import { shellcheckFindings } from "../support/run";
import { SIM_REPO_URL } from "../../sim-host/platform";
import { cudaToolkitPlan } from "../../components/cuda-toolkit/cuda-toolkit";
import type { SimulatedConnection } from "../../sim-host/platform";
import { unitContentArg, unitInstallStep } from "../../components/services/serving-service";
import * as impl from "../../components/drift/provider-impl";
import type { ToolkitStateInputs } from "../../components/drift/provider-impl";
import {
  planRepairs,
  REINSTALL_SCRIPT,
  repairedActivation,
  repairScriptPath,
  restartUnitStep,
  TOOLKIT_FIELDS,
  unitContentField,
} from "../../components/drift/repair";
import { type Drift, type RepairStep, repairsSchema } from "../../components/drift/schema";
import { TOOLKIT_STATE_PROVIDER_VERSION } from "../../components/drift/version";
import { expectedForSim, JIT_BASE, JIT_KEY, onHost, UNIT_FILE, UNIT_NAME } from "./sim-host";

const PROJECT_ROOT = path.resolve(__dirname, "../..");
const CURAND_H = "/usr/local/cuda-13.0/include/curand.h";

const d = (field: string, found: string | null = null): Drift => ({ field, expected: "x", found, repair: "r" });
const step = (name: string, fields: string[]): RepairStep => ({
  fields,
  script: `components/x/${name}.sh`,
  args: [name],
});

describe("planRepairs", () => {
  const expected = expectedForSim();
  const steps = [
    step("install", [...TOOLKIT_FIELDS]),
    step("unit", [unitContentField(UNIT_FILE)]),
    step("activate", ["units."]),
  ];

  it("a clean host runs nothing", () => {
    expect(planRepairs([], expected, steps)).toEqual({ steps: [], unrepairable: [] });
  });

  it("runs each step whose prefix matches a drifted field once, in the given order, naming why", () => {
    const plan = planRepairs(
      [d(`units.${UNIT_FILE}.sha256`, "abc"), d("packages.libcurand-dev-13-0"), d("cudaLink", "/usr/local/cuda-12.8")],
      expected,
      steps,
    );
    expect(plan.steps.map((s) => [s.args[0], s.because])).toEqual([
      ["install", ["packages.libcurand-dev-13-0", "cudaLink"]],
      ["unit", [`units.${UNIT_FILE}.sha256`]],
      ["activate", [`units.${UNIT_FILE}.sha256`]],
    ]);
    expect(plan.unrepairable).toEqual([]);
  });

  it("a file whose content changed: its owning package is reinstalled first; a missing file is left to the install step", () => {
    const plan = planRepairs(
      [d(`files.${CURAND_H}`, "0".repeat(64)), d("files./usr/local/cuda-13.0/include/cusparse.h", null)],
      expected,
      steps,
    );
    expect(plan.steps[0]).toEqual({
      fields: ["files."],
      script: REINSTALL_SCRIPT,
      args: ["libcurand-dev-13-0"],
      because: [`files.${CURAND_H}`],
    });
    expect(plan.steps.slice(1).map((s) => s.args[0])).toEqual(["install"]);
  });

  it("fields no step repairs (driver, GPUs, a stale JIT cache) are named as unrepairable", () => {
    const plan = planRepairs([d("jit.key", "old"), d("gpu.driverVersion", "570"), d("cudaLink")], expected, steps);
    expect(plan.unrepairable).toEqual(["jit.key", "gpu.driverVersion"]);
    expect(planRepairs([d("cudaLink")], expected, []).unrepairable).toEqual(["cudaLink"]);
  });

  it("restartUnitStep restarts exactly the unit whose file was restored, or that runs with another key", () => {
    expect(restartUnitStep("/etc/systemd/system/sglang-eagle3.service")).toEqual({
      fields: [
        "units./etc/systemd/system/sglang-eagle3.service.sha256",
        "units./etc/systemd/system/sglang-eagle3.service.apiKey",
      ],
      script: "components/drift/scripts/restart-unit.sh",
      args: ["sglang-eagle3.service"],
    });
  });

  it("repairedActivation: the id of the start the repair steps made; none when nothing started", () => {
    const step = { fields: ["units."], script: "x.sh", args: [], because: ["units.x"] };
    expect(repairedActivation([{ step, stdout: "restarted=false\nactivation=A\n" }])).toBeUndefined();
    expect(
      repairedActivation([
        { step, stdout: "restarted=sglang-autoregressive.service\nactivation=B\n" },
        { step, stdout: "restarted=false\nactivation=B\n" },
      ]),
    ).toBe("B");
    expect(repairedActivation([{ step, stdout: "restarted=true (was not running)\nactivation=C\n" }])).toBe("C");
    // A start that printed no id is still a new start: some fresh token.
    expect(repairedActivation([{ step, stdout: "restarted=true\n" }])).toMatch(/^restart-/);
  });

  it("repair scripts must be repo-relative .sh files inside the project root", () => {
    expect(repairScriptPath("/p", "components/a/b.sh")).toBe("/p/components/a/b.sh");
    expect(() => repairScriptPath("/p", "../etc/x.sh")).toThrow(/outside the project root/);
    for (const script of ["/etc/x.sh", "components/../../x.sh", "components/x.py", "-x.sh"]) {
      expect(repairsSchema.safeParse([{ fields: ["cudaLink"], script }]).success, script).toBe(false);
    }
    expect(repairsSchema.safeParse([{ fields: [], script: "a.sh" }]).success).toBe(false);
    expect(repairsSchema.parse([{ fields: ["cudaLink"], script: "a.sh" }])).toEqual([
      { fields: ["cudaLink"], script: "a.sh", args: [] },
    ]);
  });
});

describe("ToolkitState's repair scripts", () => {
  const scripts = [REINSTALL_SCRIPT, "components/drift/scripts/restart-unit.sh"].map((s) => path.join(PROJECT_ROOT, s));

  it("are shellcheck-clean, strict and executable", async () => {
    expect(await shellcheckFindings(scripts, { bash: true })).toBe("");
    for (const s of scripts) {
      expect(fs.readFileSync(s, "utf8")).toMatch(/^#!\/usr\/bin\/env bash\n[\s\S]*^set -euo pipefail$/m);
      expect(fs.statSync(s).mode & 0o111, s).not.toBe(0);
    }
  });

  it("refuse names that are not packages or units (exit 2) before touching anything", () => {
    const run = (script: string, ...args: string[]) =>
      spawnSync("bash", [script, ...args], { encoding: "utf8", env: { ...process.env, GPUHOST_ROOT: "/nonexistent" } });
    expect(run(scripts[0]).status).toBe(2);
    expect(run(scripts[0], "libcurand-dev-13-0", "x;rm -rf /").stderr).toMatch(/refusing package name/);
    expect(run(scripts[1], "--now.service").status).toBe(2);
    expect(run(scripts[1], "sshd").stderr).toMatch(/refusing unit name/);
  });
});

describe("ToolkitState update with onDrift repair, on a simulated host", () => {
  const host = useSimulatedHosts();

  // The toolkit's steps exactly as CudaToolkit runs them on a simulated host.
  const plan = cudaToolkitPlan({ repository: { url: SIM_REPO_URL, trust: "trusted" } });
  const toolkitSteps: RepairStep[] = [plan.install, plan.verify].map((s) => ({ fields: [...TOOLKIT_FIELDS], ...s }));
  const unitSource = fs.readFileSync(path.join(__dirname, "fixtures", "sglang-test.service"), "utf8");
  const unitStep: RepairStep = {
    fields: [unitContentField(UNIT_FILE)],
    ...unitInstallStep(UNIT_NAME, unitContentArg(unitSource)),
  };

  function inputs(conn: SimulatedConnection, extra: Partial<ToolkitStateInputs> = {}): ToolkitStateInputs {
    return {
      providerVersion: TOOLKIT_STATE_PROVIDER_VERSION,
      connection: conn,
      expected: expectedForSim(),
      onDrift: "repair",
      repairs: [...toolkitSteps, unitStep],
      ...extra,
    };
  }

  /** create on the clean host, drift it, then refresh the way the engine does (read): the olds update gets. */
  async function drifted(conn: SimulatedConnection, script: string, extra: Partial<ToolkitStateInputs> = {}) {
    const { id, outs } = await impl.create(inputs(conn, extra));
    await onHost(conn, script);
    const read = await impl.read(id, outs);
    expect(read.props.drift.length).toBeGreaterThan(0);
    return { id, created: outs, read };
  }

  const sha = (conn: SimulatedConnection, file: string): Promise<string> =>
    onHost(conn, `sha256sum <"$GPUHOST_ROOT${file}" | cut -d' ' -f1`).then((s) => s.trim());

  it("libcurand-dev-13-0 removed: update runs the toolkit's install step, the package and its files are back, drift is empty", async () => {
    const conn = host();
    const { id, created, read } = await drifted(conn, "apt-get remove -y libcurand-dev-13-0 >/dev/null");
    const { outs } = await impl.update(id, read.props, read.inputs);
    expect(outs.drift).toEqual([]);
    expect(outs.observed.packages["libcurand-dev-13-0"]).toBe("10.4.0.35-1");
    expect(outs.observed.files[CURAND_H]).toBe(created.observed.files[CURAND_H]);
    expect(outs.baseline).toEqual(created.baseline);
  });

  it("a header replaced: update reinstalls its package (ToolkitState's own step) and the recorded content is back", async () => {
    const conn = host();
    const { id, created, read } = await drifted(
      conn,
      `rm -f "$GPUHOST_ROOT${CURAND_H}"; echo '/* 12.8 */' >"$GPUHOST_ROOT${CURAND_H}"`,
    );
    expect((await impl.update(id, read.props, read.inputs)).outs.drift).toEqual([]);
    expect(await sha(conn, CURAND_H)).toBe(created.baseline.files[CURAND_H]);
  });

  it("/usr/local/cuda pointed at 12.8 and a unit file edited: both repaired by their own steps", async () => {
    const conn = host();
    const { id, read } = await drifted(
      conn,
      [
        "apt-get install -y cuda-toolkit-12-8 >/dev/null",
        "update-alternatives --install /usr/local/cuda cuda /usr/local/cuda-12.8 128 >/dev/null",
        "update-alternatives --set cuda /usr/local/cuda-12.8 >/dev/null",
        `echo 'Environment=CUDA_HOME=/usr/local/cuda-12.8' >>"$GPUHOST_ROOT${UNIT_FILE}"`,
      ].join("\n"),
    );
    expect(read.props.drift.map((x) => x.field)).toEqual(["cudaLink", `units.${UNIT_FILE}.sha256`]);
    const { outs } = await impl.update(id, read.props, read.inputs);
    expect(outs.drift).toEqual([]);
    expect(outs.observed.cudaLink).toBe("/usr/local/cuda-13.0");
    expect(await sha(conn, UNIT_FILE)).toBe(expectedForSim().units[UNIT_FILE].sha256);
  });

  it("drift no step repairs: update fails naming it and the steps that ran", async () => {
    const conn = host();
    const { id, read } = await drifted(
      conn,
      `mv "$GPUHOST_ROOT${JIT_BASE}/${JIT_KEY}" "$GPUHOST_ROOT${JIT_BASE}/stale"\napt-get remove -y libcusparse-dev-13-0 >/dev/null`,
    );
    await expect(impl.update(id, read.props, read.inputs)).rejects.toThrow(
      /still does not match what was provisioned after the repair steps \(install\.sh, verify\.sh\):\n {2}jit\.key: expected cuda13\.0-torch2\.9-sm120, found stale/,
    );
    // The steps that apply did run: the package is back even though the update failed.
    expect((await impl.read(id, read.props)).props.drift.map((x) => x.field)).toEqual(["jit.key"]);
  });

  it("a failing repair step fails update naming the step, the fields and the script's error", async () => {
    const conn = host();
    const broken: RepairStep = {
      fields: ["cudaLink"],
      script: "components/cuda-toolkit/scripts/install.sh",
      args: ["no-such-package-13-0", "/usr/local/cuda-13.0", "130"],
    };
    const { id, read } = await drifted(conn, `rm -f "$GPUHOST_ROOT/usr/local/cuda"`, { repairs: [broken] });
    await expect(impl.update(id, read.props, read.inputs)).rejects.toThrow(
      /repair step components\/cuda-toolkit\/scripts\/install\.sh \(for cudaLink\) exited \d+: [\s\S]*no-such-package-13-0/,
    );
  });

  it("onDrift fail never runs the repairs: the host stays as it is", async () => {
    const conn = host();
    const { id, read } = await drifted(conn, "apt-get remove -y libcurand-dev-13-0 >/dev/null", { onDrift: "fail" });
    await expect(impl.update(id, read.props, read.inputs)).rejects.toThrow(
      /does not match what was provisioned:\n[\s\S]*packages\.libcurand-dev-13-0/,
    );
    expect((await impl.read(id, read.props)).props.observed.packages["libcurand-dev-13-0"]).toBeUndefined();
  });

  it("create never repairs: a host that already differs fails create", async () => {
    const conn = host();
    await onHost(conn, "apt-get remove -y libcusparse-dev-13-0 >/dev/null");
    await expect(impl.create(inputs(conn))).rejects.toThrow(/packages\.libcusparse-dev-13-0/);
  });

  it("check names a repair step whose script does not exist or leaves the project", async () => {
    const conn = host();
    const { failures } = await impl.check(
      {},
      inputs(conn, {
        repairs: [
          ...toolkitSteps,
          { fields: ["cudaLink"], script: "components/nowhere/fix.sh" },
          { fields: ["cudaLink"], script: "../x.sh" },
        ],
      }),
    );
    expect(failures.map((f) => f.reason)).toEqual([
      expect.stringMatching(/^repairs\.2\.script: .*components\/nowhere\/fix\.sh does not exist$/),
      "repairs.3.script: must be a .sh path relative to the project root",
      "repairs.3.script: must not leave the project root",
    ]);
    expect(new Set(failures.map((f) => f.property))).toEqual(new Set(["repairs"]));
  });
});
