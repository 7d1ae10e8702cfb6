// CudaToolkit under the real Pulumi engine (engine/: CLI, language host, command provider) on a
// simulated host: `pulumi up` installs and verifies, a second preview changes nothing, outputs
// carry the fingerprint, destroy runs. The fixture is compiled here so the test needs no full build.
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ensureStack, PROJECT_ROOT, runPulumi } from "../../engine/pulumi";
import { testEngineOptions, writeFixtureProject } from "../support/engine";
import { runOk } from "../support/run";
import { toolkitFingerprint } from "../../components/cuda-toolkit/fingerprint";

const work = fs.mkdtempSync(path.join(os.tmpdir(), "gpuhost-cuda-engine-"));
const out = path.join(PROJECT_ROOT, ".gpuhost", `cuda-toolkit-test-${process.pid}`);
const sim = path.join(work, "sim");
const opts = testEngineOptions(work, 120_000);
const stack = "cuda-toolkit-test";

async function pulumi(...args: string[]) {
  const r = await runPulumi([...args, "--stack", stack], opts);
  if (r.code !== 0) throw new Error(`pulumi ${args.join(" ")} exited ${r.code}\n${r.stdout}\n${r.stderr}`);
  return r;
}

beforeAll(async () => {
  expect(
    fs.existsSync(path.join(PROJECT_ROOT, ".gpuhost/engine/bin/pulumi")),
    "the engine is built by `bash engine/setup.sh`",
  ).toBe(true);
  await runOk(
    path.join(PROJECT_ROOT, "node_modules/.bin/tsc"),
    [
      "--outDir",
      path.join(out, "dist"),
      "--rootDir",
      PROJECT_ROOT,
      "--target",
      "ES2022",
      "--module",
      "commonjs",
      "--moduleResolution",
      "node",
      "--strict",
      "--esModuleInterop",
      "--skipLibCheck",
      "--types",
      "node",
      path.join(__dirname, "fixture/program.ts"),
    ],
    { cwd: PROJECT_ROOT, timeout: 300_000 },
  );
  const program = path.join(out, "dist/test/cuda-toolkit/fixture/program.js");
  writeFixtureProject(work, "gpuhost-cuda-toolkit-test", program);
  await ensureStack(stack, opts);
  await pulumi("config", "set", "simRoot", sim);
}, 400_000);

afterAll(() => {
  fs.rmSync(work, { recursive: true, force: true });
  fs.rmSync(out, { recursive: true, force: true });
});

describe("CudaToolkit under the real engine, simulated host", () => {
  it("pulumi up installs the full toolkit and outputs its fingerprint; a second preview changes nothing; destroy runs", async () => {
    await pulumi("up", "--yes", "--skip-preview");
    const o = JSON.parse((await pulumi("stack", "output", "--json")).stdout) as {
      packageVersions: Record<string, string>;
      fingerprint: string;
      proof: string;
    };
    expect(o).toMatchObject({ cudaHome: "/usr/local/cuda-13.0", nvccVersion: "V13.0.88" });
    expect(o.packageVersions["libcurand-dev-13-0"]).toBe("10.4.0.35-1");
    expect(o.fingerprint).toBe(toolkitFingerprint("13.0", o.packageVersions));
    expect(o.proof).toMatch(/^ran: gpuhost stand-in binary: proof\.cu compiled against /);
    expect(fs.readlinkSync(path.join(sim, "etc/alternatives/cuda"))).toBe("../../usr/local/cuda-13.0");

    const again = await pulumi("preview", "--expect-no-changes", "--diff");
    // The stack, the component, its three commands and the simulated host's preparation step.
    expect(again.stdout).toMatch(/6 unchanged/);

    await pulumi("destroy", "--yes", "--skip-preview");
    // removeOnDestroy defaults to false: the toolkit stays.
    expect(fs.existsSync(path.join(sim, "usr/local/cuda-13.0/include/curand.h"))).toBe(true);
  }, 120_000);
});
