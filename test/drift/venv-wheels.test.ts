// Drift of the serving venv's CUDA wheels (issue 43.1): a `pip install` by hand that puts a wheel of
// another CUDA release into the venv is named by ToolkitState (probe.sh lists pip's records, drift.ts
// judges them with the lock's own rule), and the update `pulumi up` runs repairs it from the hash
// lock (serving-env/scripts/venv-wheels.sh). On a simulated host provisioned through the host layer's
// shims; the venv holds pip's records as pip writes them (name-version.dist-info).
import * as fs from "node:fs";
import * as path from "node:path";
import { describe, expect, it } from "vitest";
import { shellcheckFindings } from "../support/run";
import * as impl from "../../components/drift/provider-impl";
import { expectedToolkitState } from "../../components/drift/expected";
import { TOOLKIT_STATE_PROVIDER_VERSION } from "../../components/drift/version";
import { lockedPins, venvWheelsRepair } from "../../components/serving-env/lock";
import { parseConfig } from "../../stack/config";
import type { SimulatedConnection } from "../../sim-host/platform";
import { useSimulatedHosts } from "./sim-hosts-fixture";

const ROOT = path.resolve(__dirname, "../..");
const LOCK = fs.readFileSync(path.join(ROOT, "requirements/sglang-0.5.23.lock.txt"), "utf8");
const env = parseConfig({ hosts: [{ name: "h", connection: { kind: "local" } }] }).environment;
const SITE = `${env.venvPath}/lib/python3.11/site-packages`;
const locked = lockedPins(LOCK);
const nvcc = locked.get("nvidia-cuda-nvcc")!.version;

const distInfo = (conn: SimulatedConnection, wheel: string, version: string) =>
  path.join(conn.root, SITE, `${wheel.replace(/-/g, "_")}-${version}.dist-info`);

/** The venv as the hash lock installed it: pip's record of every nvidia-* and cuda-* wheel of the lock. */
function lockedVenv(conn: SimulatedConnection): void {
  for (const [name, p] of locked)
    if (name.startsWith("nvidia-") || name.startsWith("cuda-"))
      fs.mkdirSync(distInfo(conn, name, p.version), { recursive: true });
}

/** What `pip install nvidia-cuda-nvcc==13.5.37 nvidia-nvjpeg==13.2.0.1` by hand leaves in pip's records. */
function pipInstallByHand(conn: SimulatedConnection): void {
  fs.rmSync(distInfo(conn, "nvidia-cuda-nvcc", nvcc), { recursive: true });
  fs.mkdirSync(distInfo(conn, "nvidia-cuda-nvcc", "13.5.37"));
  fs.mkdirSync(distInfo(conn, "nvidia-nvjpeg", "13.2.0.1"));
}

describe("a foreign CUDA wheel in the serving venv", () => {
  const host = useSimulatedHosts();
  const inputs = (conn: SimulatedConnection): impl.ToolkitStateInputs => ({
    providerVersion: TOOLKIT_STATE_PROVIDER_VERSION,
    connection: conn,
    expected: expectedToolkitState({ release: "13.0", venvPath: env.venvPath }),
    onDrift: "repair",
    repairs: venvWheelsRepair(env, LOCK).map((r) => ({ ...r, args: r.args ?? [] })),
  });

  it("venv-wheels.sh is shellcheck-clean", async () => {
    expect(await shellcheckFindings([path.join(ROOT, "components/serving-env/scripts/venv-wheels.sh")])).toBe("");
  });

  it("the venv as the lock installed it is no drift", async () => {
    const conn = host();
    lockedVenv(conn);
    const { outs } = await impl.create(inputs(conn));
    expect(outs.observed.venvWheels.nvidia_cuda_nvcc).toBe(nvcc);
    expect(outs.drift).toEqual([]);
  });

  it("a pip install by hand is named (the wheel, its release, the venv), and the next update repairs it from the lock", async () => {
    const conn = host();
    lockedVenv(conn);
    const { id, outs } = await impl.create(inputs(conn));
    pipInstallByHand(conn);
    const read = await impl.read(id, outs);
    const fields = read.props.drift.map((d) => d.field);
    expect(fields).toEqual(["venv.wheels.nvidia-cuda-nvcc", "venv.wheels.nvidia-nvjpeg"]);
    const nvccDrift = read.props.drift[0];
    expect(nvccDrift.found).toBe("nvidia-cuda-nvcc 13.5.37");
    expect(nvccDrift.repair).toContain(
      `nvidia-cuda-nvcc 13.5.37 is of CUDA 13.5, beside the CUDA 13.0 toolkit in ${env.venvPath}`,
    );

    const repaired = await impl.update(id, read.props, read.inputs);
    expect(repaired.outs.drift).toEqual([]);
    expect(repaired.outs.observed.venvWheels.nvidia_cuda_nvcc).toBe(nvcc);
    expect(repaired.outs.observed.venvWheels.nvidia_nvjpeg).toBeUndefined();
    expect(fs.existsSync(distInfo(conn, "nvidia-cuda-nvcc", "13.5.37"))).toBe(false);
  });

  it("without a hash lock there is nothing to put back by hash: the drift stays, named", async () => {
    const conn = host();
    lockedVenv(conn);
    const { id, outs } = await impl.create({ ...inputs(conn), repairs: [] });
    pipInstallByHand(conn);
    const read = await impl.read(id, outs);
    await expect(impl.update(id, read.props, read.inputs)).rejects.toThrow(/venv\.wheels\.nvidia-cuda-nvcc/);
  });
});
