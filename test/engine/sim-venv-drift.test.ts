/**
 * A wheel of another CUDA release put into the serving venv by hand (issue 43.1), under the real
 * engine: `gpuhost drift` names it, the next plain `pulumi up` puts the hash lock's wheel back, and a
 * further `up` changes nothing. The sim stack with the shipped hash lock (environment.requirementsLock):
 * on the simulated host the venv holds pip's records only (python-env.sh installs nothing there), so
 * the `pip install` by hand is its record, nvidia_cuda_nvcc-13.5.37.dist-info. Kept apart from
 * sim-drift.test.ts (its up/repair cycle per drift is already long). Nothing is mocked.
 */
import * as fs from "node:fs";
import * as path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { PROJECT_ROOT } from "../../engine/pulumi";
import { freeLocalPort } from "../../ports";
import { lockedPins } from "../../components/serving-env/lock";
import { driftJson } from "../support/engine";
import { createTestStack, type TestStack, disposeStack } from "../support/stack";
import { simHostRoot } from "../support/sim-stack";

const hostRoot = simHostRoot("venv-drift");
const LOCK = path.join(PROJECT_ROOT, "requirements/sglang-0.5.23.lock.txt");
const nvcc = lockedPins(fs.readFileSync(LOCK, "utf8")).get("nvidia-cuda-nvcc")!.version;
const site = path.join(hostRoot, "opt/gpuhost/venv/lib/python3.11/site-packages");
const record = (version: string) => path.join(site, `nvidia_cuda_nvcc-${version}.dist-info`);
let stack: TestStack | undefined;

/** `pulumi up`: the resources it changed, by operation (same, update, ...). */
async function up(): Promise<Record<string, number>> {
  const r = await stack!.run("up", "--yes", "--skip-preview", "--json");
  if (r.code !== 0) throw new Error(`pulumi up exited ${r.code}\n${r.stdout.slice(-6000)}\n${r.stderr.slice(-3000)}`);
  const summary = r.stdout
    .split("\n")
    .filter((l) => l.startsWith("{"))
    .map((l) => JSON.parse(l) as { summaryEvent?: { resourceChanges: Record<string, number> } })
    .find((e) => e.summaryEvent)?.summaryEvent;
  if (!summary) throw new Error(`pulumi up printed no summary:\n${r.stdout.slice(-3000)}`);
  return summary.resourceChanges;
}

beforeAll(async () => {
  stack = await createTestStack(
    "sim",
    [
      { path: "gpuhost:services.port", value: String(await freeLocalPort()) },
      { path: "gpuhost:hosts[0].connection.root", value: hostRoot },
      { path: "gpuhost:environment.requirementsLock", value: LOCK },
    ],
    240_000,
  );
}, 120_000);

afterAll(() => disposeStack(stack, hostRoot), 300_000);

describe("a foreign CUDA wheel in the venv under the real engine", () => {
  it("pulumi up provisions the host with the hash lock", async () => {
    expect((await up()).create).toBeGreaterThan(10);
  }, 240_000);

  it("pip install nvidia-cuda-nvcc==13.5.37 by hand: drift names it, pulumi up puts the lock's back, the next up changes nothing", async () => {
    fs.mkdirSync(record("13.5.37"), { recursive: true });
    const { report, fields } = await driftJson(stack!.stack, stack!.opts);
    expect(report.exitCode, JSON.stringify(report.errors)).toBe(1);
    expect(fields).toEqual(["venv.wheels.nvidia-cuda-nvcc"]);
    const named = report.hosts.flatMap((h) => h.drift)[0];
    expect(named.found).toBe("nvidia-cuda-nvcc 13.5.37");
    expect(named.repair).toContain("nvidia-cuda-nvcc 13.5.37 is of CUDA 13.5, beside the CUDA 13.0 toolkit");

    expect(await up()).toEqual({ same: expect.any(Number) as unknown, update: 1 });
    expect(fs.existsSync(record("13.5.37"))).toBe(false);
    expect(fs.existsSync(record(nvcc))).toBe(true);
    expect(await up()).toEqual({ same: expect.any(Number) as unknown });
    expect((await driftJson(stack!.stack, stack!.opts)).report.exitCode).toBe(0);
  }, 300_000);
});
