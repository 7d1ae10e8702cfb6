/**
 * Issue 19.1 under the real engine on the sim stack: a rollout whose benchmark fails (the simulator
 * answers HTTP 500 under load: `simulator.faults: [overload-500]`), then the revert to the config
 * VerifiedGeneration last recorded. The revert rewrites the units and the activation restarts the
 * service; its service identity equals the recorded one, but the restart is a new activation, so
 * the same `up` verifies (and measures) again instead of returning while the model still loads.
 */
import * as crypto from "node:crypto";
import * as path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { acceptsConnections, freeLocalPort } from "../../ports";
import { PROJECT_ROOT } from "../../engine/pulumi";
import { type TestStack, createTestStack, disposeStack, simHostNamed } from "../support/stack";

const stacks: TestStack[] = [];
/** The simulated hosts' folders (.gpuhost/sim-hosts/NAME of the checkout): gone with the stacks. */
const hostRoots: string[] = [];
afterAll(async () => {
  await Promise.all(stacks.map((s) => disposeStack(s, ...hostRoots)));
}, 300_000);

describe("a reverted rollout on the sim stack", () => {
  it("is verified again in the same up: the revert's restart is followed by the gate", async () => {
    const host = `rb-${crypto.randomBytes(3).toString("hex")}`;
    const port = await freeLocalPort();
    const s = await createTestStack("sim", [
      ...simHostNamed(host),
      { path: "gpuhost:services.port", value: String(port) },
    ]);
    stacks.push(s);
    hostRoots.push(path.join(PROJECT_ROOT, ".gpuhost", "sim-hosts", host));
    await s.ok("up", "--yes", "--skip-preview");
    const first = (await s.outputs()).gpuHosts[host];
    expect(first.generating).toBe(true);

    // Config B: the gate passes, the benchmark breaks its error budget: `up` fails.
    // (set by the up itself, which saves --config into the stack's config as `config set` would)
    const failed = await s.run(
      "up",
      "--yes",
      "--skip-preview",
      "--config-path",
      "--config",
      "gpuhost:simulator.faults[0]=overload-500",
    );
    expect(failed.code, failed.stdout + failed.stderr).not.toBe(0);
    expect(failed.stdout + failed.stderr).toMatch(/error budget/);

    // Back to config A, which VerifiedGeneration last recorded: the units are rewritten and the
    // service restarted, so VerifiedGeneration is replaced and the gate runs in this same up.
    await s.ok("config", "rm", "--path", "gpuhost:simulator.faults");
    const reverted = await s.ok("up", "--yes", "--skip-preview");
    expect(reverted.stdout).toMatch(/VerifiedGeneration[^\n]*replaced/);
    const after = (await s.outputs()).gpuHosts[host];
    expect(after.generating).toBe(true);
    expect(after.readiness.elapsedSeconds).toBeGreaterThan(0);
    // A new verification, not the one recorded before the rollout.
    expect(JSON.stringify(after.readiness)).not.toBe(JSON.stringify(first.readiness));
    // The gate passed before up returned: the service answers right away.
    expect(await acceptsConnections(port)).toBe(true);

    // And a plain up afterwards starts nothing and verifies nothing.
    const again = await s.ok("up", "--yes", "--skip-preview");
    const summary = again.stdout.slice(again.stdout.lastIndexOf("Resources:"));
    expect(summary).toMatch(/\d+ unchanged/);
    expect(summary).not.toMatch(/created|updated|replaced|deleted/);
  }, 900_000);
});
