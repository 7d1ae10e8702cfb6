// A simulated host provisioned with the full CUDA 13.0 toolkit through the host layer's shims,
// plus what ToolkitState expects of it. One golden host is built per test file; each test gets a
// copy (cp -a keeps the relative links update-alternatives and the packages made).
import { execFileSync } from "node:child_process";
import * as crypto from "node:crypto";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import type { SimulatedConnection } from "../../sim-host/platform";
import { execOnHost } from "../../components/host/exec";
import { prepareSimulatedHost, simulatedConnection } from "../../sim-host/platform";
import { expectedToolkitState } from "../../components/drift/expected";
import type { ExpectedState } from "../../components/drift/schema";

export const UNIT_NAME = "sglang-test.service";
export const UNIT_FILE = `/etc/systemd/system/${UNIT_NAME}`;
export const UNIT_PATH = "/usr/local/cuda-13.0/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";
export const JIT_BASE = "/var/cache/gpuhost/flashinfer";
export const JIT_KEY = "cuda13.0-torch2.9-sm120";

const fixtures = path.join(__dirname, "fixtures");
const unitSource = path.join(fixtures, "sglang-test.service");

export function unitSha256(): string {
  return crypto.createHash("sha256").update(fs.readFileSync(unitSource)).digest("hex");
}

/** What provisioning set, as the composition would pass it (from the toolkit description). */
export function expectedForSim(): ExpectedState {
  return expectedToolkitState({
    release: "13.0",
    unitPath: UNIT_PATH,
    units: { [UNIT_FILE]: { sha256: unitSha256(), enabled: "enabled", active: "inactive" } },
    jitBase: JIT_BASE,
    jitKey: JIT_KEY,
  });
}

/** Run a shell script on the simulated host (shims on PATH, GPUHOST_ROOT set); throws on failure. */
export async function onHost(conn: SimulatedConnection, script: string, args: string[] = []): Promise<string> {
  const r = await execOnHost(conn, `set -euo pipefail\n${script}`, args, { timeoutMs: 120_000 });
  if (r.code !== 0) throw new Error(`host script failed (${r.code}): ${r.stderr}`);
  return r.stdout;
}

/** Build the golden simulated host: prepared platform, toolkit installed, unit enabled, JIT folder. */
export async function provisionGoldenHost(): Promise<string> {
  const root = fs.mkdtempSync(path.join(os.tmpdir(), "gpuhost-drift-golden-"));
  const repoUrl = prepareSimulatedHost(root);
  const script = fs.readFileSync(path.join(fixtures, "provision-sim.sh"), "utf8");
  const r = await execOnHost(
    simulatedConnection(root),
    script,
    [repoUrl, "13.0", UNIT_NAME, unitSource, `${JIT_BASE}/${JIT_KEY}`],
    {
      scriptName: "provision-sim.sh",
      timeoutMs: 300_000,
    },
  );
  if (r.code !== 0) throw new Error(`provisioning the simulated host failed (${r.code}):\n${r.stderr}${r.stdout}`);
  return root;
}

/** A private copy of the golden host for one test. */
export function copyHost(golden: string): SimulatedConnection {
  const root = fs.mkdtempSync(path.join(os.tmpdir(), "gpuhost-drift-"));
  execFileSync("cp", ["-a", `${golden}/.`, root]);
  return simulatedConnection(root);
}

export function removeHost(root: string): void {
  fs.rmSync(root, { recursive: true, force: true });
}
