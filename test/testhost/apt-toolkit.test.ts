/**
 * The test host's CUDA repository on a real Debian host: NVIDIA's install path (cuda-keyring, a signed
 * flat repository, apt-get), with NVIDIA's own nvcc, headers and libraries in the 13.0 packages (from
 * the pinned wheels, apt-repo.ts). The story's nvcc-only trap fails in the real compiler on curand.h
 * and gpuhost names the package; the full toolkit compiles and links CudaToolkit's proof program with
 * Debian's g++, and reports it not run (no GPU here); /usr/local/cuda is managed by update-alternatives
 * (12.8, still stand-ins, pointing it at itself).
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { doctor } from "../../components/cuda-toolkit/doctor";
import { cudaToolkitOptionsSchema } from "../../components/cuda-toolkit/options";
import { toolkitPlan } from "../../components/cuda-toolkit/plan";
import { execOnHost } from "../../components/host/exec";
import { parseKeyValues, readScript } from "../../components/host/script";
import { packagesOf, toolkit, trapPackages } from "../../components/cuda-catalog/catalog";
import { STANDIN_MARKER } from "../../sim-host/standin";
import { serveAptRepo, AptRepo } from "./apt-repo";
import { bootTestHost, connectionOf, requireTestHost, TestHost } from "./harness";

const enabled = requireTestHost();

// What FlashInfer's sampling kernels start with (include/flashinfer/sampling.cuh includes <curand.h>).
const SAMPLING_CU =
  "#include <cuda_runtime.h>\n#include <curand.h>\n__global__ void sample() {}\nint main() { return 0; }\n";
const APT = "DEBIAN_FRONTEND=noninteractive apt-get -y -q";
const STEP = 180_000; // apt on a busy 2-core runner

describe.runIf(enabled)("CUDA apt repository with NVIDIA's files on a real Debian host", () => {
  let repo: AptRepo;
  let host: TestHost;

  beforeAll(async () => {
    repo = await serveAptRepo();
    host = await bootTestHost({ name: "apt" });
    await host.execOk(`mkdir -p /root/src && cat > /root/src/sampling.cu <<'EOF'\n${SAMPLING_CU}EOF`);
  }, 30 * 60_000);

  afterAll(async () => {
    await host?.stop();
    await repo?.close();
  }, 60_000);

  /** A CudaToolkit step (install.sh, verify.sh), as a root SSH session runs it. */
  const runStep = (step: "install" | "verify") => {
    const planned = toolkitPlan(cudaToolkitOptionsSchema.parse({}))[step];
    const script = readScript(planned.script);
    const conn = connectionOf(host);
    return execOnHost(conn, script.text, planned.args, { timeoutMs: STEP, scriptName: script.name });
  };
  const runInstall = () => runStep("install");
  /** gpuhost doctor on the host's files from this machine (its root folder), the proof program included. */
  const doctorOnHost = () =>
    doctor({
      expectRelease: "13.0",
      cudaHome: "/usr/local/cuda-13.0",
      env: { PATH: "/usr/bin:/bin" },
      root: host.rootDir,
    });

  const compile = (cudaHome: string) =>
    host.exec(`cd /root/src && ${cudaHome}/bin/nvcc -arch=sm_120 -o sampling sampling.cu && ./sampling`);

  it(
    "installs cuda-keyring the way NVIDIA documents it, and apt verifies the signed repository",
    async () => {
      await host.execOk(`curl -fsSLo /tmp/cuda-keyring.deb ${repo.keyringDebUrl} && dpkg -i /tmp/cuda-keyring.deb`);
      expect((await host.execOk(`cat ${repo.sourcesListPath}`)).stdout.trim()).toBe(repo.sourcesLine);
      const update = await host.execOk(`${APT} update 2>&1`);
      expect(update.stdout).not.toMatch(/NO_PUBKEY|not signed|insecure/i);
      expect(repo.requests).toContain("/InRelease");
      const policy = await host.execOk("apt-cache policy cuda-toolkit-13-0");
      expect(policy.stdout).toContain(`Candidate: ${"13.0.2-1"}`);
    },
    STEP,
  );

  it(
    "refuses the repository when the keyring does not hold its key",
    async () => {
      await host.execOk(
        `cp ${repo.keyringPath} /root/keyring.bak && printf 'not a key' > ${repo.keyringPath} && rm -rf /var/lib/apt/lists/127.0.0.1*`,
      );
      const update = await host.exec(`${APT} update 2>&1`);
      expect(update.stdout).toMatch(
        /NO_PUBKEY|not signed|signatures (couldn't|were invalid)|Sub-process \/usr\/bin\/sqv|gpgv/i,
      );
      expect((await host.exec(`${APT} install cuda-nvcc-13-0 2>&1`)).code).not.toBe(0);
      await host.execOk(`cp /root/keyring.bak ${repo.keyringPath} && ${APT} update`);
    },
    STEP,
  );

  it(
    "with only nvcc and cudart (the story's cuda-nvcc-13-0 install), a file including <curand.h> fails to compile",
    async () => {
      // the description's "nvcc-only" trap: cuda-nvcc-13-0 plus cuda-cudart-dev-13-0, no curand/cublas/cusparse
      await host.execOk(`${APT} install ${trapPackages("13.0", "nvcc-only").join(" ")}`);
      expect((await host.exec("dpkg-query -W -f='${Status}' libcurand-dev-13-0")).stdout).not.toContain(
        "install ok installed",
      );
      // NVIDIA's compiler, not a stand-in: an ELF binary printing the catalogue's build line
      expect((await host.execOk("head -c4 /usr/local/cuda-13.0/bin/nvcc | tail -c3")).stdout).toBe("ELF");
      const version = await host.execOk("/usr/local/cuda-13.0/bin/nvcc --version");
      expect(version.stdout).toContain(`Cuda compilation tools, release 13.0, ${toolkit("13.0").nvccVersion}`);
      expect(version.stdout).toContain(`Build ${toolkit("13.0").nvccBuild}`);
      const r = await compile("/usr/local/cuda-13.0");
      expect(r.code).not.toBe(0);
      expect(r.stderr).toMatch(/^sampling\.cu:2:10: fatal error: curand\.h: No such file or directory$/m);
    },
    STEP,
  );

  it(
    "in the trap, CudaToolkit's verify and gpuhost doctor name libcurand-dev-13-0 from the real compiler's error",
    async () => {
      const v = await runStep("verify");
      expect(v.code).toBe(1);
      expect(v.stderr).toMatch(
        /the proof program does not compile: proof\.cu:\d+:10: fatal error: curand\.h: No such file or directory \(\/usr\/local\/cuda-13\.0\/include\/curand\.h is provided by package libcurand-dev-13-0\)/,
      );
      expect(parseKeyValues(v.stdout).proof).toBe("compile-failed");
      const d = doctorOnHost();
      expect(d.release).toBe("13.0");
      expect(d.proof.status).toBe("compile-failed");
      expect(d.proof.detail).toMatch(
        /fatal error: curand\.h: No such file or directory \(\/usr\/local\/cuda-13\.0\/include\/curand\.h is provided by package libcurand-dev-13-0\)$/,
      );
      expect(d.problems).toContainEqual(
        expect.objectContaining({
          problem: "missing /usr/local/cuda-13.0/include/curand.h",
          package: "libcurand-dev-13-0",
        }),
      );
    },
    STEP,
  );

  it(
    "apt-get install cuda-toolkit-13-0 brings the whole closure, nvcc reports 13.0 and the compile succeeds",
    async () => {
      await host.execOk(`${APT} install cuda-toolkit-13-0`);
      const installed = (await host.execOk("dpkg-query -W -f='${Package} ${Status}\\n'")).stdout;
      for (const pkg of packagesOf("cuda-toolkit-13-0")) expect(installed).toContain(`${pkg} install ok installed`);
      expect(installed).not.toContain("cuda-curand-dev-13-0"); // no such package at NVIDIA either
      const version = await host.execOk("/usr/local/cuda/bin/nvcc --version");
      expect(version.stdout).toContain("release 13.0");
      expect((await host.execOk("readlink -f /usr/local/cuda")).stdout.trim()).toBe("/usr/local/cuda-13.0");
      const r = await compile("/usr/local/cuda");
      expect(r.stderr).toBe("");
      expect(r.code).toBe(0);
      // what was compiled is an x86-64 program, linked by Debian's ld
      expect((await host.execOk("head -c4 /root/src/sampling | tail -c3")).stdout).toBe("ELF");
      // NVIDIA's headers and libraries, the unversioned links the wheels lack made beside them
      const header = (await host.execOk("cat /usr/local/cuda-13.0/include/cublas_v2.h")).stdout;
      expect(header).not.toContain(STANDIN_MARKER);
      expect(header).toContain("NVIDIA");
      expect((await host.execOk("readlink -f /usr/local/cuda-13.0/lib64/libcublas.so")).stdout.trim()).toBe(
        "/usr/local/cuda-13.0/lib64/libcublas.so.13.0.2.14",
      );
    },
    STEP,
  );

  it(
    "CudaToolkit's proof program is compiled and linked by NVIDIA's nvcc against curand and cublas, and not run: no GPU",
    async () => {
      const v = await runStep("verify");
      expect(v.stderr).toBe("");
      expect(v.code).toBe(0);
      const kv = parseKeyValues(v.stdout);
      expect(kv.verified).toBe("yes");
      expect(kv.gpus).toBe("0");
      expect(kv.proof).toBe("compiled and linked with nvcc 13.0.88; not run: no GPU");
      // doctor runs the same program with the toolkit it finds, and says the same
      const d = doctorOnHost();
      expect(d.problems).toEqual([]);
      expect(d.proof).toEqual({ status: "compiled", detail: "compiled and linked with nvcc 13.0.88; not run: no GPU" });
    },
    STEP,
  );

  it(
    "a leftover /usr/local/cuda-13.2 beside the pinned 13.0 is refused by verify, naming both (humming-kernels would take it)",
    async () => {
      // What an older CUDA install leaves behind: a compiler of its own release. NVIDIA's 13.0 nvcc is
      // the one CUDA_HOME names; humming-kernels takes the highest /usr/local/cuda-13.* whatever
      // CUDA_HOME says, so the 13.2 one would compile its kernels.
      await host.execOk(
        "mkdir -p /usr/local/cuda-13.2/bin && printf '%s\\n' '#!/bin/sh' " +
          "'echo \"Cuda compilation tools, release 13.2, V13.2.51\"' >/usr/local/cuda-13.2/bin/nvcc && chmod +x /usr/local/cuda-13.2/bin/nvcc",
      );
      try {
        const v = await runStep("verify");
        expect(v.code).toBe(1);
        const kv = parseKeyValues(v.stdout);
        expect(kv.jit_flashinfer).toBe("/usr/local/cuda-13.0/bin/nvcc 13.0 (CUDA_HOME)");
        expect(kv.jit_humming_kernels).toMatch(/^\/usr\/local\/cuda-13\.2\/bin\/nvcc 13\.2 /);
        expect(v.stderr).toMatch(
          /two CUDA releases for the JIT: FlashInfer resolves \/usr\/local\/cuda-13\.0\/bin\/nvcc \(CUDA 13\.0, through CUDA_HOME\) and humming-kernels resolves \/usr\/local\/cuda-13\.2\/bin\/nvcc \(CUDA 13\.2/,
        );
      } finally {
        await host.execOk("rm -rf /usr/local/cuda-13.2");
      }
      expect((await runStep("verify")).code).toBe(0);
    },
    STEP,
  );

  it(
    "installing 12.8 beside 13.0 leaves /usr/local/cuda on 13.0 (priority), until someone sets it to 12.8",
    async () => {
      await host.execOk(`${APT} install cuda-toolkit-12-8`);
      expect((await host.execOk("readlink -f /usr/local/cuda")).stdout.trim()).toBe("/usr/local/cuda-13.0");
      await host.execOk("update-alternatives --set cuda /usr/local/cuda-12.8");
      expect((await host.execOk("/usr/local/cuda/bin/nvcc --version")).stdout).toContain("release 12.8");
      expect((await host.execOk("update-alternatives --query cuda")).stdout).toMatch(/Status: manual/);
      await host.execOk("update-alternatives --auto cuda");
      expect((await host.execOk("readlink -f /usr/local/cuda")).stdout.trim()).toBe("/usr/local/cuda-13.0");
    },
    STEP,
  );

  it(
    "removing libcurand-dev-13-0 brings the curand.h failure back (the drift the end-to-end suite repairs)",
    async () => {
      await host.execOk(`${APT} remove libcurand-dev-13-0`);
      expect((await host.exec("dpkg-query -W -f='${Status}' cuda-toolkit-13-0")).stdout).not.toContain(
        "install ok installed",
      );
      const r = await compile("/usr/local/cuda");
      expect(r.stderr).toContain("fatal error: curand.h: No such file or directory");
    },
    STEP,
  );

  it(
    "removing the toolkits unregisters the alternative: no /usr/local/cuda is left",
    async () => {
      await host.execOk(
        `${APT} purge 'cuda-*-13-0' 'libcu*-13-0' libnvvm-13-0 'cuda-*-12-8' 'libcu*-12-8' cuda-toolkit-13-0-config-common cuda-toolkit-12-8-config-common`,
      );
      expect((await host.exec("test -e /usr/local/cuda")).code).not.toBe(0);
      expect((await host.exec("update-alternatives --query cuda")).code).not.toBe(0);
    },
    STEP,
  );

  it(
    "install.sh converges after an install cut off before a dependency was unpacked (dpkg --configure -a alone cannot)",
    async () => {
      // After the purge above: what a dropped SSH session mid-install can leave, a package unpacked whose
      // dependency the cut-off run never reached. `dpkg --configure -a` fails on it; the install step
      // must still converge.
      await host.execOk(
        `cd /tmp && ${APT} download cuda-command-line-tools-13-0 && dpkg --unpack cuda-command-line-tools-13-0_*.deb`,
      );
      expect((await host.exec("dpkg --configure -a")).code).not.toBe(0);
      const r = await runInstall();
      expect(r.code, r.stderr).toBe(0);
      expect(r.stderr).toContain("completing it with apt-get install -f");
      expect((await host.execOk("dpkg --audit")).stdout.trim()).toBe("");
      expect((await host.execOk("dpkg-query -W -f='${Status}' cuda-toolkit-13-0")).stdout).toBe("install ok installed");
      // And a second run changes nothing.
      const again = await runInstall();
      expect(again.code, again.stderr).toBe(0);
      expect(again.stdout).toContain("changed=no");
    },
    STEP,
  );

  it(
    "install.sh converges after dpkg was killed mid-unpack (a package left half-installed, reinst-required)",
    async () => {
      // What `kill -9` of dpkg in the middle of unpacking cuda-sanitizer leaves (seen in CI's
      // interrupted-install test): its dependant unpacked, itself recorded at its version but
      // half-installed and flagged reinst-required, part of its files gone. `dpkg --configure -a`
      // skips it and apt takes its recorded version as present, so a plain install of the meta
      // package failed configuring cuda-command-line-tools ("cuda-sanitizer-13-0 is not installed").
      await host.execOk(
        `${APT} purge 'cuda-*-13-0' 'libcu*-13-0' libnvvm-13-0 cuda-toolkit-13-0-config-common && cd /tmp && rm -f ./*.deb && ` +
          `${APT} download cuda-sanitizer-13-0 cuda-command-line-tools-13-0 && dpkg --unpack cuda-sanitizer-13-0_*.deb cuda-command-line-tools-13-0_*.deb && ` +
          `sed -i '/^Package: cuda-sanitizer-13-0$/,/^$/s/^Status: .*/Status: install reinstreq half-installed/' /var/lib/dpkg/status && ` +
          `dpkg -L cuda-sanitizer-13-0 | while read -r f; do if [ -f "$f" ]; then rm -f "$f"; fi; done`,
      );
      expect((await host.execOk("dpkg-query -W -f='${db:Status-Abbrev}' cuda-sanitizer-13-0")).stdout).toBe("iHR");
      const r = await runInstall();
      expect(r.code, r.stdout + r.stderr).toBe(0);
      expect(r.stderr).toContain("half-installed: cuda-sanitizer-13-0");
      expect((await host.execOk("dpkg --audit")).stdout.trim()).toBe("");
      expect((await host.execOk("dpkg-query -W -f='${Status}' cuda-toolkit-13-0")).stdout).toBe("install ok installed");
      // Its files are back, not only its record.
      expect((await host.exec("dpkg -L cuda-sanitizer-13-0 | xargs -r -d '\\n' ls -d >/dev/null")).code).toBe(0);
    },
    STEP,
  );
});
