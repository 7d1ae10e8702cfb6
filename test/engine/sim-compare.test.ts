/**
 * `services.compare: true, services.active: auto` under the real engine on a simulated host: the
 * first `pulumi up` measures the three services in turn through the same units and the same gate,
 * records the per-service table and the recommendation as outputs, leaves the winner active on the
 * (simulated) systemd and VerifiedGeneration verifies that one. A second `up` measures nothing (no
 * diff), and a refresh finds no drift (the probe expects the unit the comparison left active).
 * Time scale 40 and short requests keep it to a couple of minutes. Nothing is mocked.
 */
import * as fs from "node:fs";
import * as path from "node:path";
import { afterAll, expect, it } from "vitest";
import { execOnHost } from "../../components/host/exec";
import { ServiceComparisonOutputsSchema } from "../../gate/reports/outputs";
import { freeLocalPort } from "../../ports";
import { projectRoot } from "../../project-files";
import { createTestStack, SHORT_COMPARISON_BENCHMARK, type TestStack } from "../support/stack";
import { simulatedConnection } from "../../sim-host/platform";

// A simulated host's root must lie under the project's .gpuhost/ (the config refuses anything else).
fs.mkdirSync(path.join(projectRoot(), ".gpuhost", "sim-hosts"), { recursive: true });
const hostRoot = fs.mkdtempSync(path.join(projectRoot(), ".gpuhost", "sim-hosts", "compare-"));
const UNITS = ["sglang-autoregressive.service", "sglang-eagle3.service", "sglang-dflash.service"];
let s: TestStack | undefined;

afterAll(async () => {
  await s?.dispose();
  fs.rmSync(hostRoot, { recursive: true, force: true });
}, 300_000);

function summary(out: string): string {
  return out.slice(out.lastIndexOf("Resources:"));
}

async function unitStates(): Promise<Record<string, string>> {
  const r = await execOnHost(
    simulatedConnection(hostRoot),
    `for u in ${UNITS.join(" ")}; do echo "$u=$(systemctl is-active "$u" || true)"; done`,
    [],
    { timeoutMs: 60_000 },
  );
  if (r.code !== 0) throw new Error(r.stderr);
  return Object.fromEntries(
    r.stdout
      .trim()
      .split("\n")
      .map((l): [string, string] => {
        const [unit, state] = l.split("=");
        return [unit, state];
      }),
  );
}

it("pulumi up compares the three services, records the table and leaves the winner active", async () => {
  s = await createTestStack(
    "sim",
    [
      { path: "gpuhost:hosts[0].connection.root", value: hostRoot },
      { path: "gpuhost:services.port", value: String(await freeLocalPort()) },
      { path: "gpuhost:services.compare", value: "true" },
      { path: "gpuhost:services.active", value: "auto" },
      { path: "gpuhost:simulator.timeScale", value: "40" },
      ...SHORT_COMPARISON_BENCHMARK,
    ],
    400_000,
  );
  await s.ok("up", "--yes", "--skip-preview");
  const host = (await s.outputs()).gpuHosts["sim-1"];
  const c = ServiceComparisonOutputsSchema.pick({
    services: true,
    recommended: true,
    recommendation: true,
    activeService: true,
    timeNote: true,
  }).parse(host.comparison);
  expect(c.services.map((x) => x.service)).toEqual(["autoregressive", "eagle3", "dflash"]);
  for (const x of c.services) {
    expect(x.failure).toBeNull();
    expect(x.sweep.map((l) => l.level)).toEqual([1, 4, 16, 32]);
    for (const l of x.sweep) expect(l.outputTokensPerSecond).toBeGreaterThan(0);
    for (const l of x.sweep) expect(l.certificate?.certified, JSON.stringify(l.certificate)).toBe(true);
    expect(x.sustainedOutputTokensPerSecond).toBeGreaterThan(0);
    if (x.service === "autoregressive") expect(x.acceptanceLength).toBeNull();
    else expect(x.acceptanceLength).toBeGreaterThan(1.5);
  }
  expect(c.recommended).not.toBeNull();
  expect(c.recommendation).toMatch(/^Run (autoregressive|EAGLE-3|DFlash): /);
  expect(c.timeNote).toMatch(/time scale 40/);
  // auto: the winner is the active service, on systemd and in the outputs; the gate verified it.
  expect(c.activeService).toBe(c.recommended);
  expect(host.activeService).toBe(c.recommended);
  expect(host.activeUnit).toBe(`sglang-${c.recommended}.service`);
  const states = await unitStates();
  for (const u of UNITS) expect(states[u], u).toBe(u === host.activeUnit ? "active" : "inactive");
  expect(host.generating).toBe(true);
  expect(host.benchComplete).toBe(true);
  if (c.recommended !== "autoregressive") expect(host.acceptanceLength).toBeGreaterThan(1.5);
}, 400_000);

it("a second pulumi up measures nothing, and a refresh finds no drift", async () => {
  const before = (await s!.outputs()).gpuHosts["sim-1"].comparison!.comparedAt;
  const r = await s!.ok("up", "--yes", "--skip-preview");
  // The whole display on failure: which resource changed, and the refresh's findings that made it.
  expect(summary(r.stdout), r.stdout + r.stderr).toMatch(/\d+ unchanged/);
  expect(summary(r.stdout), r.stdout + r.stderr).not.toMatch(/created|updated|replaced|deleted/);
  expect((await s!.outputs()).gpuHosts["sim-1"].comparison!.comparedAt).toBe(before);
  const preview = await s!.run("preview", "--expect-no-changes");
  expect(preview.code, preview.stdout + preview.stderr).toBe(0);
  const refresh = await s!.run("refresh", "--preview-only", "--expect-no-changes");
  expect(refresh.code, refresh.stdout + refresh.stderr).toBe(0);
  expect((await s!.outputs()).gpuHosts["sim-1"].drift).toEqual([]);
}, 300_000);
