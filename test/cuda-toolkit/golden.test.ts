// Golden tests: the scripts and arguments CudaToolkit renders for a host. A change to either
// must show up here as a reviewed diff (regenerate with GPUHOST_UPDATE_GOLDEN=1).
import * as crypto from "node:crypto";
import * as fs from "node:fs";
import * as path from "node:path";
import { describe, expect, it } from "vitest";
import { cudaToolkitOptionsSchema } from "../../components/cuda-toolkit/options";
import { toolkitPlan } from "../../components/cuda-toolkit/plan";
import { hostCommandLine, readScript } from "../../components/host/script";

const dir = path.join(__dirname, "golden");
const sha = (s: string) => crypto.createHash("sha256").update(s).digest("hex").slice(0, 12);

function golden(name: string, actual: string) {
  const file = path.join(dir, name);
  if (process.env.GPUHOST_UPDATE_GOLDEN === "1") fs.writeFileSync(file, actual);
  expect(actual).toBe(fs.readFileSync(file, "utf8"));
}

/** The plan with the long base64 programs replaced by their hashes, so the golden file stays readable. */
function readablePlan(options: unknown) {
  const plan = toolkitPlan(cudaToolkitOptionsSchema.parse(options));
  for (const [flag, file] of [
    ["--proof-b64", "curand_cublas.cu"],
    ["--p2p-b64", "p2p_bandwidth.cu"],
  ]) {
    const i = plan.verify.args.indexOf(flag);
    plan.verify.args[i + 1] =
      `<proof/${file} sha256:${sha(Buffer.from(plan.verify.args[i + 1], "base64").toString("utf8"))}>`;
  }
  return plan;
}

describe("CudaToolkit rendering", () => {
  it("default options: NVIDIA's debian12/x86_64 repository through the keyring, full cuda-toolkit-13-0", () => {
    golden("plan-default.json", `${JSON.stringify(readablePlan({}), null, 2)}\n`);
  });

  it("a trusted repository on the host (file:// only), ubuntu2404/sbsa naming", () => {
    golden(
      "plan-local-repo.json",
      `${JSON.stringify(readablePlan({ release: "13.0", repository: { url: "file:///srv/cuda-repo/", trust: "trusted", distribution: "ubuntu2404", architecture: "sbsa" }, proofByExecution: false }), null, 2)}\n`,
    );
  });

  it("the install command line for a non-root SSH user goes through sudo -n, script inline", () => {
    const plan = toolkitPlan(cudaToolkitOptionsSchema.parse({}));
    const script = readScript(plan.install.script);
    const line = hostCommandLine(
      { kind: "ssh", host: "gpu-1", port: 22, user: "ubuntu", privateKey: "k" },
      script,
      plan.install.args,
    );
    golden(
      "install-ssh-ubuntu.txt",
      `${line.replace(Buffer.from(script.text).toString("base64"), `<install.sh sha256:${sha(script.text)}>`)}\n`,
    );
  });

  it("package sources: https or file:// only, trusted=yes only for file://, the config path named", () => {
    const issue = (repository: unknown) => {
      const r = cudaToolkitOptionsSchema.safeParse({ repository });
      return r.success ? "ok" : r.error.issues.map((i) => `${i.path.join(".")}: ${i.message}`).join("; ");
    };
    expect(issue({ url: "http://mirror.example/cuda/" })).toMatch(
      /^repository\.url: must be https:\/\/ .*http:\/\/ is refused/,
    );
    expect(issue({ keyringUrl: "http://mirror.example/k.deb" })).toMatch(/^repository\.keyringUrl: must be https/);
    expect(issue({ url: "https://mirror.example/cuda/", trust: "trusted" })).toMatch(
      /^repository\.trust: 'trusted' .* only for a file:\/\/ repository/,
    );
    expect(issue({ url: "file:///srv/repo/", trust: "trusted" })).toBe("ok");
    expect(issue({ keyringSha256: "ABC" })).toMatch(/^repository\.keyringSha256: must be 64 lowercase hex/);
    const pinned = toolkitPlan(cudaToolkitOptionsSchema.parse({ repository: { keyringSha256: "a".repeat(64) } }));
    expect(pinned.repository.args.at(-1)).toBe("a".repeat(64));
  });

  it("never installs a subset: the install step names the meta package only", () => {
    const plan = toolkitPlan(cudaToolkitOptionsSchema.parse({}));
    expect(plan.install.args[0]).toBe("cuda-toolkit-13-0");
    expect(plan.install.args.filter((a) => !a.includes(":") && /^cuda-|^lib/.test(a))).toEqual(["cuda-toolkit-13-0"]);
  });

  it("rejects hostile repository options", () => {
    expect(() => cudaToolkitOptionsSchema.parse({ repository: { url: "http://x/'; touch /tmp/pwned; '" } })).toThrow();
    expect(() => cudaToolkitOptionsSchema.parse({ repository: { distribution: "debian12; id" } })).toThrow(/debian12/);
    expect(() => cudaToolkitOptionsSchema.parse({ release: "13.0 && id" })).toThrow();
    expect(() => cudaToolkitOptionsSchema.parse({ repository: { architecture: "ppc64le" } })).toThrow();
  });
});
