/**
 * gpuhost as a library, under the real engine: examples/sim-vm, a program of its own (Pulumi.yaml,
 * package.json) that depends on gpuhost the way another team's would (npm installs a copy of the
 * package, only what package.json `files` ships), imports it through `exports`, and feeds a stand-in
 * VM's output into GpuServingHost on a simulated host. `pulumi up` must provision, verify and
 * benchmark it; a second up changes nothing; destroy removes it.
 */
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { PROJECT_ROOT, ensureStack, runPulumi } from "../../engine/pulumi";
import { freeLocalPort } from "../../ports";
import { testEngineOptions } from "../support/engine";
import { runOk } from "../support/run";

const work = fs.mkdtempSync(path.join(os.tmpdir(), "gpuhost-example-"));
const example = path.join(work, "sim-vm");
const opts = testEngineOptions(example, 300_000);
const stack = "example";

async function pulumi(...args: string[]) {
  const r = await runPulumi([...args, "--stack", stack], opts);
  if (r.code !== 0) throw new Error(`pulumi ${args.join(" ")} exited ${r.code}\n${r.stdout}\n${r.stderr}`);
  return r;
}

beforeAll(async () => {
  fs.cpSync(path.join(PROJECT_ROOT, "examples", "sim-vm"), example, { recursive: true });
  // the dependency on this checkout, wherever the copy is
  const manifest = JSON.parse(fs.readFileSync(path.join(example, "package.json"), "utf8")) as {
    dependencies: Record<string, string>;
  };
  manifest.dependencies.gpuhost = `file:${PROJECT_ROOT}`;
  fs.writeFileSync(path.join(example, "package.json"), JSON.stringify(manifest, null, 2));
  // --install-links: a copy of the package as a registry install would give (its `files` only)
  await runOk(
    "npm",
    ["install", "--install-links", "--no-audit", "--no-fund", "--prefer-offline", "--no-package-lock"],
    { cwd: example, timeout: 300_000 },
  );
  // the sim stack's gpuhost config, on a free port
  const config = fs
    .readFileSync(path.join(PROJECT_ROOT, "stacks", "Pulumi.sim.yaml"), "utf8")
    .replace(/^encryptionsalt: .*$/m, "")
    .replace(/^ {4}port: 30000$/m, `    port: ${await freeLocalPort()}`);
  fs.writeFileSync(path.join(example, `Pulumi.${stack}.yaml`), config);
  await ensureStack(stack, opts);
}, 600_000);

afterAll(async () => {
  await runPulumi(["destroy", "--yes", "--skip-preview", "--stack", stack], opts).catch(() => undefined);
  fs.rmSync(work, { recursive: true, force: true });
}, 300_000);

describe("examples/sim-vm: another program using gpuhost as a library", () => {
  it("installs only what the package ships, and imports the library (not the program) through exports", async () => {
    const installed = path.join(example, "node_modules", "gpuhost");
    expect(fs.lstatSync(installed).isSymbolicLink()).toBe(false);
    expect(fs.existsSync(path.join(installed, "dist", "lib.d.ts"))).toBe(true);
    expect(fs.existsSync(path.join(installed, "dist", "test"))).toBe(false);
    expect(fs.existsSync(path.join(installed, "test"))).toBe(false);
    // The offline stand-ins for Pulumi's plugins serve a checkout on a machine with no official
    // Pulumi; a user of the package has one.
    expect(fs.existsSync(path.join(installed, "dist", "engine", "offline-plugins"))).toBe(false);
    expect(fs.existsSync(path.join(installed, "dist", "engine", "pulumi.js"))).toBe(true);
    const keys = await runOk("node", ["-p", "Object.keys(require('gpuhost')).sort().join(',')"], { cwd: example });
    expect(keys).toContain("GpuServingHost");
    expect(keys).toContain("simulatedPlatform");
  });

  it("pulumi up: the stand-in VM's output becomes the simulated host GpuServingHost provisions and verifies", async () => {
    await pulumi("up", "--yes", "--skip-preview");
    const out = JSON.parse((await pulumi("stack", "output", "--json")).stdout) as {
      vmAddress: string;
      generating: boolean;
      sustainedOutputTokensPerSecond: number;
    };
    expect(out.vmAddress).toBe(path.join(example, ".gpuhost", "vms", "vm-1"));
    expect(fs.existsSync(path.join(out.vmAddress, "etc", "systemd", "system"))).toBe(true);
    expect(out.generating).toBe(true);
    expect(out.sustainedOutputTokensPerSecond).toBeGreaterThan(0);
  }, 600_000);

  it("a second up changes nothing", async () => {
    const r = await pulumi("preview", "--expect-no-changes");
    expect(r.code).toBe(0);
  }, 300_000);
});
