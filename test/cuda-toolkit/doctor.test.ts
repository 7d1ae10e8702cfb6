// `gpuhost doctor` against simulated hosts provisioned by the real scripts (no Pulumi).
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { doctorMain } from "../../cli/doctor";
import { doctor } from "../../components/cuda-toolkit/doctor";
import { cudaToolkitOptionsSchema } from "../../components/cuda-toolkit/options";
import { toolkitPlan } from "../../components/cuda-toolkit/plan";
import { execOnHost } from "../../components/host/exec";
import { readScript } from "../../components/host/script";
import { prepareSimulatedHost, SIM_REPO_URL, simulatedConnection } from "../../sim-host/platform";

const plan = toolkitPlan(cudaToolkitOptionsSchema.parse({ repository: { url: SIM_REPO_URL, trust: "trusted" } }));
const roots: string[] = [];

async function host(extra?: string): Promise<string> {
  const root = fs.mkdtempSync(path.join(os.tmpdir(), "gpuhost-doctor-"));
  roots.push(root);
  prepareSimulatedHost(root);
  for (const step of [plan.repository, plan.install]) {
    const r = await execOnHost(simulatedConnection(root), readScript(step.script).text, step.args);
    expect(r.code).toBe(0);
  }
  if (extra) expect((await execOnHost(simulatedConnection(root), `set -e\n${extra}`, [])).code).toBe(0);
  return root;
}

let healthy: string;
let broken: string;
let trap: string;
beforeAll(async () => {
  [healthy, broken, trap] = await Promise.all([
    host(),
    host('rm "$GPUHOST_ROOT/usr/local/cuda-13.0/include/curand.h"'),
    host('apt-get install -y cuda-toolkit-12-8 >/dev/null && ln -sfn cuda-12.8 "$GPUHOST_ROOT/usr/local/cuda"'),
  ]);
});
afterAll(() => roots.forEach((r) => fs.rmSync(r, { recursive: true, force: true })));

const noPath = { PATH: "/nonexistent" };

describe("gpuhost doctor", () => {
  it("a full toolkit found through /usr/local/cuda is healthy", () => {
    const r = doctor({ expectRelease: "13.0", env: noPath, root: healthy });
    expect(r.problems).toEqual([]);
    expect(r).toMatchObject({
      healthy: true,
      resolvedBy: "/usr/local/cuda",
      release: "13.0",
      nvccVersion: "V13.0.88",
      usrLocalCuda: "/usr/local/cuda-13.0",
    });
  });

  it("follows FlashInfer's order: CUDA_HOME before CUDA_PATH before nvcc on PATH before /usr/local/cuda", () => {
    const env = { CUDA_HOME: "/usr/local/cuda-13.0", CUDA_PATH: "/opt/elsewhere", PATH: "/usr/local/cuda-13.0/bin" };
    expect(doctor({ expectRelease: "13.0", env, root: healthy }).resolvedBy).toBe("CUDA_HOME");
    expect(doctor({ expectRelease: "13.0", env: { ...env, CUDA_HOME: "" }, root: healthy })).toMatchObject({
      resolvedBy: "CUDA_PATH",
      healthy: false,
    });
    expect(doctor({ expectRelease: "13.0", env: { PATH: "/usr/local/cuda-13.0/bin" }, root: healthy })).toMatchObject({
      resolvedBy: "nvcc on PATH",
      cudaHome: "/usr/local/cuda-13.0",
      healthy: true,
    });
  });

  it("names the missing header and the package that provides it", () => {
    const r = doctor({ expectRelease: "13.0", env: noPath, root: broken });
    expect(r.healthy).toBe(false);
    expect(r.problems).toEqual([
      {
        problem: "missing /usr/local/cuda/include/curand.h",
        package: "libcurand-dev-13-0",
        fix: "apt-get install --reinstall libcurand-dev-13-0",
      },
    ]);
  });

  it("compiles the proof program with the toolkit it finds and reports the compiler's verdict", () => {
    // The simulated host's stand-in nvcc makes a script that says it ran no GPU code.
    const ok = doctor({ expectRelease: "13.0", env: noPath, root: healthy });
    expect(ok.proof.status).toBe("ran");
    expect(ok.proof.detail).toMatch(/^ran: gpuhost stand-in binary: proof\.cu compiled against .*cuda-13\.0/);
    const r = doctor({ expectRelease: "13.0", env: noPath, root: broken });
    expect(r.proof.status).toBe("compile-failed");
    expect(r.proof.detail).toMatch(
      /^not compiled: proof\.cu:\d+:10: fatal error: curand\.h: No such file or directory \(\/usr\/local\/cuda\/include\/curand\.h is provided by package libcurand-dev-13-0\)$/,
    );
    // the missing header is one problem, not one per check that met it
    expect(r.problems).toHaveLength(1);
    expect(doctor({ expectRelease: "13.0", env: noPath, root: broken, proof: false }).proof).toEqual({
      status: "skipped",
      detail: "not compiled (--no-proof)",
    });
  });

  it("detects /usr/local/cuda pointing at 12.8 and CUDA_HOME/PATH disagreeing", () => {
    const r = doctor({ expectRelease: "13.0", env: { PATH: "/usr/local/cuda-13.0/bin" }, root: trap });
    // nvcc on PATH wins over /usr/local/cuda, so this resolves to 13.0 but warns.
    expect(r.healthy).toBe(true);
    expect(r.warnings.join("\n")).toContain("/usr/local/cuda points at /usr/local/cuda-12.8");
    const bare = doctor({ expectRelease: "13.0", env: noPath, root: trap });
    expect(bare.healthy).toBe(false);
    expect(bare.release).toBe("12.8");
    expect(bare.problems[0].problem).toBe(
      "CUDA found by /usr/local/cuda (/usr/local/cuda-12.8) is release 12.8, expected 13.0",
    );
    expect(bare.problems[0].package).toBe("cuda-toolkit-13-0");
  });

  it("with no toolkit at all names the meta package", () => {
    const empty = fs.mkdtempSync(path.join(os.tmpdir(), "gpuhost-doctor-"));
    roots.push(empty);
    const r = doctor({ expectRelease: "13.0", env: noPath, root: empty });
    expect(r.problems).toEqual([expect.objectContaining({ package: "cuda-toolkit-13-0" })]);
  });

  it("doctorMain: exit 0 healthy, 1 problems (text and --json), 2 usage", async () => {
    const out: string[] = [];
    const spy = vi.spyOn(process.stdout, "write").mockImplementation((s) => (out.push(String(s)), true));
    const err = vi.spyOn(process.stderr, "write").mockImplementation(() => true);
    try {
      expect(await doctorMain(["--root", healthy], noPath)).toBe(0);
      expect(out.join("")).toContain("healthy");
      out.length = 0;
      expect(await doctorMain(["--root", broken], noPath)).toBe(1);
      expect(out.join("")).toContain(
        "problem: missing /usr/local/cuda/include/curand.h, provided by package libcurand-dev-13-0",
      );
      expect(out.join("")).toMatch(/^proof: not compiled: proof\.cu:\d+:10: fatal error: curand\.h/m);
      out.length = 0;
      expect(
        await doctorMain(["--json", "--cuda-home", "/usr/local/cuda-13.0"], { ...noPath, GPUHOST_ROOT: broken }),
      ).toBe(1);
      expect((JSON.parse(out.join("")) as { problems: { package: string }[] }).problems[0].package).toBe(
        "libcurand-dev-13-0",
      );
      expect(await doctorMain(["--bogus"], noPath)).toBe(2);
      expect(await doctorMain(["--cuda-home"], noPath)).toBe(2);
      expect(await doctorMain(["--expect-release", "9.9"], noPath)).toBe(2);
    } finally {
      spy.mockRestore();
      err.mockRestore();
    }
  });
});
