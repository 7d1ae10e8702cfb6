// Mock test (pulumi.runtime.setMocks): ServingEnvironment's resource graph and arguments.
import { describe, expect, it } from "vitest";
import { hostCommandLine, readScript } from "../../components/host/script";
import { environmentLock, indexArgs, pinsLock, requirements, toolkitKey } from "../../components/serving-env/lock";
import { EnvironmentSchema } from "../../components/serving-env/schema";
import { ServingEnvironment } from "../../components/serving-env/serving-environment";
import { dependencyNames, named, parentName, recordResources, valueOf } from "./harness";

const rec = recordResources((name) => (name.endsWith("-jit-cache") ? "workspace=/var/cache/gpuhost/jit/k\n" : ""));
const local = { kind: "local" as const };
// A file:// index on the host: a remote one needs a hash lock (environment.requirementsLock).
const env = EnvironmentSchema.parse({ pipIndexUrl: "file:///srv/pypi/simple/" });

describe("ServingEnvironment (mocks)", async () => {
  const e = new ServingEnvironment("env", {
    connection: local,
    environment: env,
    toolkitVersion: "13.0",
    toolkitFingerprint: "f00d",
    cudaHome: "/usr/local/cuda-13.0",
  });
  const lock = await valueOf(e.environmentLock);
  const all = await rec.settle();

  it("creates the user, then the venv and the JIT cache side by side; no pre-warm unless asked", () => {
    expect(["env-user", "env-venv", "env-jit-cache"].map((n) => parentName(all, named(all, n)))).toEqual([
      "env",
      "env",
      "env",
    ]);
    expect(dependencyNames(all, named(all, "env-venv"))).toEqual(["env-user"]);
    expect(dependencyNames(all, named(all, "env-jit-cache"))).toEqual(["env-user"]);
    expect(all.find((r) => r.name === "env-prewarm")).toBeUndefined();
  });

  it("passes the pins and requirements to python-env.sh and the keyed cache to jit-cache.sh, as local Commands", () => {
    const venv = named(all, "env-venv");
    expect(venv.type).toBe("command:local:Command");
    expect(venv.inputs.create).toBe(
      hostCommandLine(local, readScript("components/serving-env/scripts/python-env.sh"), [
        env.venvPath,
        env.python,
        "13.0",
        pinsLock(env),
        ...indexArgs(env),
        "--",
        ...requirements(env),
      ]),
    );
    expect(named(all, "env-jit-cache").inputs.create).toBe(
      hostCommandLine(local, readScript("components/serving-env/scripts/jit-cache.sh"), [
        env.jitCacheBase,
        toolkitKey("13.0", "f00d"),
        env.serviceUser,
      ]),
    );
  });

  it("outputs the lock of the pins and the toolkit, and the workspace the host reported", async () => {
    expect(lock).toBe(environmentLock(env, "f00d"));
    expect(await valueOf(e.jitWorkspace)).toBe("/var/cache/gpuhost/jit/k");
  });
});
