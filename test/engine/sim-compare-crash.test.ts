/**
 * `services.compare: true` under the real engine on a simulated host whose EAGLE-3 service cannot
 * load: its --mem-fraction-static leaves no room for the weights, so the simulator dies of CUDA out
 * of memory during the load, before it opens its port (late-port: as SGLang does), and systemd
 * restarts it into its start limit. The comparison's gate names the unit as soon as systemd reports
 * it restarted or failed (not at its 1,800 s deadline), the other services are compared, and the
 * unit the comparison started and left is not "failed": a second `up` and a refresh find no drift
 * (before, every later `up` failed on "expected inactive, found failed"). Nothing is mocked.
 */
import { afterAll, expect, it } from "vitest";
import { ServiceComparisonOutputsSchema } from "../../gate/reports/outputs";
import { createTestStack, disposeStack, type TestStack } from "../support/stack";
import { sglangUnitStates, simComparisonSettings, simHostRoot } from "../support/sim-stack";

const hostRoot = simHostRoot("compare-crash");
let s: TestStack | undefined;

afterAll(() => disposeStack(s, hostRoot), 300_000);

it("an EAGLE-3 unit that crashes at load: named within seconds, compared without it, and not left failed", async () => {
  s = await createTestStack(
    "sim",
    await simComparisonSettings(hostRoot, [
      // 1 GB of weights cannot fit in 1 % of the simulated GPU's 24 GiB: CUDA out of memory at load.
      { path: "gpuhost:services.eagle3.memFractionStatic", value: "0.01", type: "float" },
      { path: "gpuhost:simulator.faults[0]", value: "late-port" },
      // The gate's default deadline: a comparison that waited for it would not end within this test.
      { path: "gpuhost:verification.deadlineSeconds", value: "1800" },
      // systemd's pause before each restart: 1 s, not the default 15 s of wall time the test would wait.
      { path: "gpuhost:services.restart.restartSec", value: "1", type: "int" },
    ]),
    400_000,
  );
  await s.ok("up", "--yes", "--skip-preview");
  const host = (await s.outputs()).gpuHosts["sim-1"];
  const c = ServiceComparisonOutputsSchema.pick({ services: true, recommended: true }).parse(host.comparison);
  const eagle3 = c.services.find((x) => x.service === "eagle3")!;
  expect(eagle3.failure).toMatch(/the service unit sglang-eagle3\.service (failed|restarted \d+ time\(s\))/);
  expect(eagle3.failure).toContain("CUDA out of memory");
  const after = Number(/after (\d+(?:\.\d+)?) s:/.exec(eagle3.failure ?? "")?.[1]);
  // RestartSec (1 s here) and a second or two per start: far from the 1,800 s deadline.
  expect(after).toBeLessThan(60);
  for (const x of c.services.filter((x) => x.service !== "eagle3")) expect(x.failure).toBeNull();
  expect(await sglangUnitStates(hostRoot)).toEqual({
    "sglang-autoregressive.service": "active",
    "sglang-eagle3.service": "inactive",
    "sglang-dflash.service": "inactive",
  });
}, 400_000);

it("a second pulumi up and a refresh find nothing to repair", async () => {
  await s!.ok("up", "--yes", "--skip-preview");
  const refresh = await s!.run("refresh", "--preview-only", "--expect-no-changes");
  expect(refresh.code, refresh.stdout + refresh.stderr).toBe(0);
  expect((await s!.outputs()).gpuHosts["sim-1"].drift).toEqual([]);
}, 300_000);
