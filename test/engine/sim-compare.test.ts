/**
 * `services.compare: true, services.active: auto` under the real engine on a simulated host: the
 * first `pulumi up` measures the three services in turn through the same units and the same gate,
 * records the per-service table and the recommendation as outputs, leaves the winner active on the
 * (simulated) systemd and VerifiedGeneration verifies that one. A second `up` measures nothing (no
 * diff), and a refresh finds no drift (the probe expects the unit the comparison left active).
 * Time scale 40 and short requests keep it to a couple of minutes. Nothing is mocked.
 */
import { afterAll, expect, it } from "vitest";
import { ServiceComparisonOutputsSchema } from "../../gate/reports/outputs";
import { createTestStack, disposeStack, type TestStack } from "../support/stack";
import { SGLANG_UNITS, sglangUnitStates, simComparisonSettings, simHostRoot } from "../support/sim-stack";

const hostRoot = simHostRoot("compare");
let s: TestStack | undefined;

afterAll(() => disposeStack(s, hostRoot), 300_000);

function summary(out: string): string {
  return out.slice(out.lastIndexOf("Resources:"));
}

it("pulumi up compares the three services, records the table and leaves the winner active", async () => {
  s = await createTestStack(
    "sim",
    await simComparisonSettings(hostRoot, [{ path: "gpuhost:services.active", value: "auto" }]),
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
  const states = await sglangUnitStates(hostRoot);
  for (const u of SGLANG_UNITS) expect(states[u], u).toBe(u === host.activeUnit ? "active" : "inactive");
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
