// verify.sh's GPU checks with a FAKE nvidia-smi (no GPU on these machines): driver branch,
// SM 12.x needing CUDA >= 12.9, architectures CUDA 13.0 dropped. Everything else is real: the
// simulated host, its shims and the stand-in toolkit.
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { doctor } from "../../components/cuda-toolkit/doctor";
import { cudaToolkitOptionsSchema } from "../../components/cuda-toolkit/options";
import { toolkitPlan } from "../../components/cuda-toolkit/plan";
import { execOnHost } from "../../components/host/exec";
import { parseKeyValues, readScript } from "../../components/host/script";
import { prepareSimulatedHost, SIM_REPO_URL, simShimDir } from "../../sim-host/platform";

const roots: string[] = [];
const fake = fs.mkdtempSync(path.join(os.tmpdir(), "gpuhost-fake-smi-"));
const plans = {
  "13.0": toolkitPlan(cudaToolkitOptionsSchema.parse({ repository: { url: SIM_REPO_URL, trust: "trusted" } })),
  "12.8": toolkitPlan(
    cudaToolkitOptionsSchema.parse({ release: "12.8", repository: { url: SIM_REPO_URL, trust: "trusted" } }),
  ),
};
const hosts: Record<string, string> = {};

/** Run a step on the simulated root with the fake nvidia-smi answering `gpus` first on PATH. */
function run(root: string, step: { script: string; args: string[] }, gpus?: string) {
  const bin = path.join(
    fake,
    String(roots.indexOf(root)) + (gpus ? Buffer.from(gpus).toString("hex").slice(0, 16) : "none"),
  );
  fs.mkdirSync(bin, { recursive: true });
  if (gpus)
    fs.writeFileSync(
      path.join(bin, "nvidia-smi"),
      `#!/bin/sh\nprintf '%s\\n' ${gpus
        .split("\n")
        .map((g) => `'${g}'`)
        .join(" ")}\n`,
      { mode: 0o755 },
    );
  return execOnHost({ kind: "local" }, readScript(step.script).text, step.args, {
    environment: { GPUHOST_ROOT: root, PATH: `${bin}:${simShimDir()}:${process.env.PATH}` },
  });
}

beforeAll(async () => {
  for (const release of ["13.0", "12.8"] as const) {
    const root = fs.mkdtempSync(path.join(os.tmpdir(), "gpuhost-gpu-"));
    roots.push(root);
    prepareSimulatedHost(root);
    for (const step of [plans[release].repository, plans[release].install])
      expect((await run(root, step)).code).toBe(0);
    hosts[release] = root;
  }
});
afterAll(() => [...roots, fake].forEach((r) => fs.rmSync(r, { recursive: true, force: true })));

describe("verify.sh GPU checks (fake nvidia-smi)", () => {
  it("8x SM 12.0 on an R580 driver with CUDA 13.0 passes and runs the proof because GPUs exist", async () => {
    const r = await run(hosts["13.0"], plans["13.0"].verify, Array(8).fill("580.82.07, 12.0").join("\n"));
    expect(r.stderr).toBe("");
    expect(parseKeyValues(r.stdout)).toMatchObject({ gpus: "8", verified: "yes" });
    expect(parseKeyValues(r.stdout).proof).toMatch(/^ran: /);
  });

  it("a driver older than R580 is named", async () => {
    const r = await run(hosts["13.0"], plans["13.0"].verify, "575.57.08, 12.0");
    expect(r.code).toBe(1);
    expect(r.stderr).toContain("GPU 1: driver 575.57.08 is older than the R580 branch CUDA 13.0 needs");
  });

  it("Volta (7.0) is rejected for CUDA 13.0", async () => {
    const r = await run(hosts["13.0"], plans["13.0"].verify, "580.82.07, 9.0\n580.82.07, 7.0");
    expect(r.code).toBe(1);
    expect(r.stderr).toContain("GPU 2: compute capability 7.0 is not supported by CUDA 13.0");
    expect(r.stderr).not.toContain("GPU 1:");
  });

  it("SM 12.0 with the 12.8 toolkit: FlashInfer needs CUDA >= 12.9", async () => {
    const r = await run(hosts["12.8"], plans["12.8"].verify, "580.82.07, 12.0");
    expect(r.code).toBe(1);
    expect(r.stderr).toContain(
      "GPU 1: compute capability 12.0 (SM 12.x) needs CUDA >= 12.9 for FlashInfer, toolkit is 12.8",
    );
  });
});

describe("gpuhost doctor's GPU checks (fake nvidia-smi)", () => {
  it("SM 12.0 with the 12.8 toolkit: the typed rule of physics/preflight.ts, the one preview applies", () => {
    const bin = path.join(fake, "doctor-sm120");
    fs.mkdirSync(bin, { recursive: true });
    fs.writeFileSync(path.join(bin, "nvidia-smi"), "#!/bin/sh\necho '580.82.07, 12.0'\n", { mode: 0o755 });
    const env = { PATH: `${bin}:${simShimDir()}:${process.env.PATH}` };
    const r = doctor({ expectRelease: "12.8", env, root: hosts["12.8"], proof: false });
    expect(r.gpus).toEqual([{ driver: "580.82.07", computeCapability: "12.0" }]);
    expect(r.release).toBe("12.8");
    expect(r.problems.map((p) => p.problem)).toContainEqual(
      expect.stringMatching(
        /^GPU 0: compute capability 12\.0 needs CUDA >= 12\.9, not 12\.8 \(rule sm12x-flashinfer-needs-cuda-12\.9, /,
      ),
    );
    expect(doctor({ expectRelease: "13.0", env, root: hosts["13.0"], proof: false }).problems).toEqual([]);
  });
});
