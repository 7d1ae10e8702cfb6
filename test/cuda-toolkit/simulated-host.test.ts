// CudaToolkit's host scripts end to end on the simulated platform, WITHOUT Pulumi: the same plan
// the component renders, run through execOnHost against a fresh temporary root.
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { toolkitFingerprint, parsePackageVersions } from "../../components/cuda-toolkit/fingerprint";
import { cudaToolkitOptionsSchema } from "../../components/cuda-toolkit/options";
import { type ScriptStep, toolkitPlan } from "../../components/cuda-toolkit/plan";
import { execOnHost } from "../../components/host/exec";
import { parseKeyValues, readScript } from "../../components/host/script";
import { prepareSimulatedHost, SIM_GPUHOST_DIR, SIM_REPO_URL, simulatedConnection } from "../../sim-host/platform";
import { projectRoot } from "../../project-files";
import type { HostConnection } from "../../components/host/connection";

let root: string;
let conn: HostConnection;
const options = cudaToolkitOptionsSchema.parse({ repository: { url: SIM_REPO_URL, trust: "trusted" } });
const plan = { ...toolkitPlan(options), options };

function run(step: ScriptStep) {
  const { text, name } = readScript(step.script);
  return execOnHost(conn, text, step.args, { scriptName: name });
}
function shell(command: string) {
  return execOnHost(conn, `set -euo pipefail\n${command}`, []);
}
/** Every file under the root with its content or link target: "what changed" for the no-op check. */
function snapshot(dir: string): Record<string, string> {
  const out: Record<string, string> = {};
  const walk = (d: string) => {
    for (const e of fs.readdirSync(d, { withFileTypes: true })) {
      const p = path.join(d, e.name);
      if (p.includes("/tmp/")) continue;
      if (e.isSymbolicLink()) out[p] = `-> ${fs.readlinkSync(p)}`;
      else if (e.isDirectory()) walk(p);
      else out[p] = fs.readFileSync(p, "utf8");
    }
  };
  walk(dir);
  return out;
}

beforeEach(() => {
  root = fs.mkdtempSync(path.join(os.tmpdir(), "gpuhost-sim-"));
  prepareSimulatedHost(root);
  conn = simulatedConnection(root);
});
afterEach(() => fs.rmSync(root, { recursive: true, force: true }));

async function provision() {
  for (const step of [plan.repository, plan.install]) {
    const r = await run(step);
    expect(r.stderr + r.stdout).not.toMatch(/^E:/m);
    expect(r.code).toBe(0);
  }
}

describe("CudaToolkit scripts on the simulated host", () => {
  it("the host's /opt/gpuhost is its own folder: a link to the checkout left there by an older preparation goes", () => {
    // The default venv is /opt/gpuhost/venv: with gpuhost's folder linked at /opt/gpuhost, python-env.sh
    // wrote the host's venv into the checkout.
    const old = path.join(root, "opt", "gpuhost");
    fs.symlinkSync(path.relative(path.dirname(old), process.cwd()), old);
    prepareSimulatedHost(root);
    expect(fs.existsSync(old)).toBe(false);
    expect(fs.realpathSync(path.join(root, SIM_GPUHOST_DIR))).toBe(fs.realpathSync(projectRoot()));
    // A real folder there (the host's venv) is left alone.
    fs.mkdirSync(path.join(old, "venv"), { recursive: true });
    prepareSimulatedHost(root);
    expect(fs.existsSync(path.join(old, "venv"))).toBe(true);
  });

  it("installs the full toolkit, pins /usr/local/cuda and verifies it, proof program included", async () => {
    await provision();
    const v = await run(plan.verify);
    expect(v.stderr).toBe("");
    expect(v.code).toBe(0);
    const kv = parseKeyValues(v.stdout);
    expect(kv.verified).toBe("yes");
    expect(kv.nvcc_release).toBe("13.0");
    expect(kv.nvcc_version).toBe("V13.0.88");
    expect(kv.cuda_link).toBe("/usr/local/cuda-13.0");
    expect(kv.proof).toMatch(/^ran: gpuhost stand-in binary: .*proof\.cu compiled against .*cuda-13\.0/);
    // Location-free: the toolkit as the host names it, never the folder the simulated host lives in.
    expect(kv.proof).toMatch(/ compiled against \/usr\/local\/cuda-13\.0 \(release 13\.0\)/);
    expect(kv.proof).not.toContain(root);
    const versions = parsePackageVersions(kv.packages);
    expect(Object.keys(versions).sort()).toEqual(plan.packages);
    expect(versions["libcurand-dev-13-0"]).toBe("10.4.0.35-1");
    expect(kv.fingerprint).toBe(toolkitFingerprint("13.0", versions));
    expect(fs.readlinkSync(path.join(root, "usr/local/cuda"))).toBe("../../etc/alternatives/cuda");
  });

  it("reports which nvcc each JIT consumer resolves: FlashInfer and humming-kernels both the pinned 13.0", async () => {
    await provision();
    const v = await run(toolkitPlan(plan.options, "/opt/gpuhost/venv").verify);
    expect(v.code).toBe(0);
    const kv = parseKeyValues(v.stdout);
    expect(kv.jit_flashinfer).toBe("/usr/local/cuda-13.0/bin/nvcc 13.0 (CUDA_HOME)");
    expect(kv.jit_humming_kernels).toMatch(/^\/usr\/local\/cuda-13\.0\/bin\/nvcc 13\.0 \(the highest/);
    // No venv built on the simulated host: said, not guessed.
    expect(kv.jit_cute_dsl).toMatch(/^not built yet/);
    expect(kv.jit_triton).toMatch(/^not built yet/);
  });

  it("with a venv: CuTe-DSL's bundled stack, triton's own ptxas, and the proof run again against the venv's CUDA libraries", async () => {
    await provision();
    // The venv's files as pip lays them out (what verify reads of it): CuTe-DSL's record, triton's
    // ptxas, the CUDA wheels' lib folder.
    const site = path.join(root, "opt/gpuhost/venv/lib/python3.11/site-packages");
    fs.mkdirSync(path.join(site, "nvidia_cutlass_dsl_libs_cu13-4.8.0.dist-info"), { recursive: true });
    fs.mkdirSync(path.join(site, "nvidia/cu13/lib"), { recursive: true });
    fs.mkdirSync(path.join(site, "triton/backends/nvidia/bin"), { recursive: true });
    fs.writeFileSync(
      path.join(site, "triton/backends/nvidia/bin/ptxas"),
      "#!/bin/sh\necho 'Cuda compilation tools, release 12.9, V12.9.86'\n",
      { mode: 0o755 },
    );
    const v = await run(toolkitPlan(plan.options, "/opt/gpuhost/venv").verify);
    expect(v.code).toBe(0);
    const kv = parseKeyValues(v.stdout);
    expect(kv.jit_cute_dsl).toBe("nvidia-cutlass-dsl-libs-cu13 4.8.0 (its bundled stack, not CUDA_HOME)");
    expect(kv.jit_triton).toBe(
      "/opt/gpuhost/venv/lib/python3.11/site-packages/triton/backends/nvidia/bin/ptxas 12.9 (its own ptxas: SASS to the driver, no PTX)",
    );
    // The stand-in proof program runs here (it is a script), so the venv's libraries get their run.
    expect(kv.proof_venv).toMatch(
      /^ran with \/opt\/gpuhost\/venv\/lib\/python3\.11\/site-packages\/nvidia\/cu13\/lib: gpuhost stand-in binary/,
    );
  });

  it("a leftover /usr/local/cuda-13.2 beside the pinned 13.0 is refused in one sentence naming both", async () => {
    await provision();
    // What an old install leaves behind: its own nvcc, release 13.2. humming-kernels takes the
    // highest 13.x install whatever CUDA_HOME says; FlashInfer takes CUDA_HOME's.
    const nvcc13 = fs.readFileSync(path.join(root, "usr/local/cuda-13.0/bin/nvcc"), "utf8");
    fs.mkdirSync(path.join(root, "usr/local/cuda-13.2/bin"), { recursive: true });
    fs.writeFileSync(
      path.join(root, "usr/local/cuda-13.2/bin/nvcc"),
      nvcc13.replace(/"13\.0"( +# gpuhost:nvccRelease)/, '"13.2"$1').replace(/"V13\.0\.88"/, '"V13.2.51"'),
      { mode: 0o755 },
    );
    const v = await run(plan.verify);
    expect(v.code).toBe(1);
    expect(parseKeyValues(v.stdout).jit_humming_kernels).toMatch(/^\/usr\/local\/cuda-13\.2\/bin\/nvcc 13\.2 /);
    const sentence = v.stderr.split("\n").find((l) => l.includes("two CUDA releases for the JIT"));
    expect(sentence).toContain("FlashInfer resolves /usr/local/cuda-13.0/bin/nvcc (CUDA 13.0, through CUDA_HOME)");
    expect(sentence).toContain("humming-kernels resolves /usr/local/cuda-13.2/bin/nvcc (CUDA 13.2");
    expect(sentence).toContain("remove /usr/local/cuda-13.2");
    expect(sentence).not.toContain(root);
  });

  it("a second run of every script changes nothing on the host", async () => {
    await provision();
    expect((await run(plan.verify)).code).toBe(0);
    const before = snapshot(root);
    for (const step of [plan.repository, plan.install]) {
      const r = await run(step);
      expect(r.code).toBe(0);
      expect(parseKeyValues(r.stdout).changed).toBe("no");
    }
    expect((await run(plan.verify)).code).toBe(0);
    expect(snapshot(root)).toEqual(before);
  });

  it("the nvcc-only install (the story's trap) fails verification naming curand.h and libcurand-dev-13-0", async () => {
    expect((await run(plan.repository)).code).toBe(0);
    const trap = await shell(
      "apt-get update -q && apt-get install -y cuda-nvcc-13-0 cuda-cudart-dev-13-0 && update-alternatives --install /usr/local/cuda cuda /usr/local/cuda-13.0 130",
    );
    expect(trap.code).toBe(0);
    const v = await run(plan.verify);
    expect(v.code).toBe(1);
    expect(v.stderr).toContain(
      "missing /usr/local/cuda-13.0/include/curand.h (provided by package libcurand-dev-13-0)",
    );
    expect(v.stderr).toContain(
      "missing /usr/local/cuda-13.0/include/cublas_v2.h (provided by package libcublas-dev-13-0)",
    );
    expect(v.stderr).toContain(
      "missing /usr/local/cuda-13.0/include/cusparse.h (provided by package libcusparse-dev-13-0)",
    );
    expect(v.stderr).toContain("package cuda-toolkit-13-0 is not installed");
    expect(v.stderr).toMatch(
      /the proof program does not compile: proof\.cu:\d+:10: fatal error: curand\.h: No such file or directory \(\/usr\/local\/cuda-13\.0\/include\/curand\.h is provided by package libcurand-dev-13-0\)/,
    );
    expect(v.stderr).not.toContain("nvcc at");
  });

  it("detects /usr/local/cuda pointing at 12.8, and the install repairs it", async () => {
    await provision();
    const trap = await shell(
      'apt-get install -y cuda-toolkit-12-8 >/dev/null && ln -sfn cuda-12.8 "$GPUHOST_ROOT/usr/local/cuda"',
    );
    expect(trap.code).toBe(0);
    const v = await run(plan.verify);
    expect(v.code).toBe(1);
    expect(v.stderr).toContain(
      "/usr/local/cuda points at '/usr/local/cuda-12.8', not /usr/local/cuda-13.0 (update-alternatives --set cuda /usr/local/cuda-13.0)",
    );
    const again = await run(plan.install);
    expect(again.code).toBe(0);
    expect(parseKeyValues(again.stdout)).toMatchObject({ changed: "yes", cuda_link: "/usr/local/cuda-13.0" });
    expect((await run(plan.verify)).code).toBe(0);
  });

  it("a removed libcurand-dev-13-0 fails verification and the next install converges", async () => {
    await provision();
    expect((await shell("apt-get remove -y libcurand-dev-13-0")).code).toBe(0);
    const v = await run(plan.verify);
    expect(v.code).toBe(1);
    expect(v.stderr).toContain("package libcurand-dev-13-0 is not installed");
    expect(v.stderr).toContain(
      "missing /usr/local/cuda-13.0/lib64/libcurand.so (provided by package libcurand-dev-13-0)",
    );
    const again = await run(plan.install);
    expect(parseKeyValues(again.stdout).changed).toBe("yes");
    expect((await run(plan.verify)).code).toBe(0);
  });

  it("a header deleted by hand is restored by reinstalling the package that provides it", async () => {
    await provision();
    fs.rmSync(path.join(root, "usr/local/cuda-13.0/include/cublas_v2.h"));
    const again = await run(plan.install);
    expect(again.code).toBe(0);
    expect(again.stderr).toContain("missing /usr/local/cuda-13.0/include/cublas_v2.h: reinstalling libcublas-dev-13-0");
    expect(fs.existsSync(path.join(root, "usr/local/cuda-13.0/include/cublas_v2.h"))).toBe(true);
  });

  it("a repository the simulated host cannot reach makes install fail loudly", async () => {
    const bad = { ...plan.repository, args: ["trusted", "file:///nowhere/", "debian12", "x86_64", "file:///unused"] };
    expect((await run(bad)).code).toBe(0);
    const r = await run(plan.install);
    expect(r.code).not.toBe(0);
    expect(r.stderr).toMatch(/Failed to fetch file:\/\/\/nowhere|Unable to locate package cuda-toolkit-13-0/);
  });

  it("uninstall removes the packages, the alternative and the source", async () => {
    await provision();
    const r = await run(plan.uninstall);
    expect(r.code).toBe(0);
    expect(fs.existsSync(path.join(root, "usr/local/cuda-13.0/include/curand.h"))).toBe(false);
    expect(fs.lstatSync(path.join(root, "usr/local/cuda"), { throwIfNoEntry: false })).toBeUndefined();
    expect(fs.existsSync(path.join(root, plan.sourcesList))).toBe(false);
    expect((await run(plan.uninstall)).code).toBe(0);
  });
});
