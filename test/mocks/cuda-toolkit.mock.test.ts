// Mock test (pulumi.runtime.setMocks): CudaToolkit's resource graph and arguments.
import { describe, expect, it } from "vitest";
import { CudaToolkit, cudaToolkitPlan } from "../../components/cuda-toolkit";
import { hostCommandLine, readScript } from "../../components/host/script";
import { dependencyNames, named, parentName, recordResources, unwrap, valueOf } from "./harness";

const rec = recordResources((name) =>
  name.endsWith("-verify")
    ? "nvcc_version=V13.0.88\nfingerprint=f00d\nproof=skipped\npackages=cuda-toolkit-13-0 13.0.2-1,libcurand-dev-13-0 10.4.0.35-1\n"
    : name.endsWith("-repository")
      ? "sources_list=/etc/apt/sources.list.d/cuda.list\n"
      : "",
);

const ssh = {
  kind: "ssh" as const,
  host: "gpu1.example",
  port: 22,
  user: "ops",
  privateKey: "-----BEGIN OPENSSH PRIVATE KEY-----\nx\n-----END OPENSSH PRIVATE KEY-----",
};

describe("CudaToolkit (mocks)", async () => {
  const toolkit = new CudaToolkit("cuda", { connection: ssh, removeOnDestroy: true });
  const fingerprint = await valueOf(toolkit.fingerprint);
  const all = await rec.settle();
  const plan = cudaToolkitPlan({ removeOnDestroy: true });

  it("is a component of three remote Commands in provisioning order: repository -> install -> verify", () => {
    expect(named(all, "cuda").type).toBe("gpuhost:index:CudaToolkit");
    for (const step of ["repository", "install", "verify"]) {
      const r = named(all, `cuda-${step}`);
      expect(r.type).toBe("command:remote:Command");
      expect(parentName(all, r)).toBe("cuda");
    }
    expect(dependencyNames(all, named(all, "cuda-repository"))).toEqual([]);
    expect(dependencyNames(all, named(all, "cuda-install"))).toContain("cuda-repository");
    expect(dependencyNames(all, named(all, "cuda-verify"))).toContain("cuda-install");
  });

  it("runs the plan's scripts with the plan's arguments, sudo for a non-root user, never a secret in the command", () => {
    for (const step of ["repository", "install", "verify"] as const) {
      const r = named(all, `cuda-${step}`);
      const script = readScript(plan[step].script);
      expect(r.inputs.create).toBe(hostCommandLine(ssh, script, plan[step].args));
      // sudo first, then the watch of the SSH session (components/host/remote-session.ts), both root
      expect(r.inputs.create).toMatch(/^exec sudo -n bash -c '[^']*gpuhost_session/);
      expect(r.inputs.create).not.toContain("PRIVATE KEY");
      // The script's hash is always a trigger: an edited script re-runs.
      expect((r.inputs.triggers as string[])[0]).toBe(`${script.name}:${script.hash}`);
      expect(r.inputs.addPreviousOutputInEnv).toBe(false);
    }
  });

  it("connects as configured; the connection reaches the provider as a secret", () => {
    const conn = unwrap(named(all, "cuda-install").inputs.connection);
    expect(conn.secret).toBe(true);
    expect(conn.value).toMatchObject({
      host: "gpu1.example",
      port: 22,
      user: "ops",
      privateKey: ssh.privateKey,
      dialErrorLimit: 10,
      perDialTimeout: 15,
    });
  });

  it("removes the toolkit on destroy only when asked, and re-runs install when the repository changes", () => {
    const install = named(all, "cuda-install").inputs;
    expect(install.delete).toBe(hostCommandLine(ssh, readScript(plan.uninstall.script), plan.uninstall.args));
    expect(install.triggers).toContain("/etc/apt/sources.list.d/cuda.list");
    expect(named(all, "cuda-repository").inputs.delete).toBeUndefined();
  });

  it("outputs what verify.sh reported", async () => {
    expect(fingerprint).toBe("f00d");
    expect(await valueOf(toolkit.nvccVersion)).toBe("V13.0.88");
    expect(await valueOf(toolkit.packageVersions)).toEqual({
      "cuda-toolkit-13-0": "13.0.2-1",
      "libcurand-dev-13-0": "10.4.0.35-1",
    });
    expect(await valueOf(toolkit.cudaHome)).toBe("/usr/local/cuda-13.0");
  });
});
