/**
 * The fleet under the real engine with the real SMG (PyPI smg, hash-locked): a throwaway copy of
 * stacks/Pulumi.sim-fleet.yaml (three simulated hosts, each on its own free port, the router on the
 * first host's folder) with a secret API key; the third host's simulator starts with the `silent`
 * fault (it accepts connections and never answers, its unit active): its gate never passes. In
 * sequence: `pulumi up` brings up a fleet of two (router.minHealthyHosts 2), the third host left out
 * and named with the gate's diagnosis; the router's key is in no argv, environment, log or plaintext
 * state; with the fault removed, the next `up` gates the third host and the router serves from all
 * three; a further `up` measures nothing again; a host whose service was stopped is named by the
 * refresh, and the next `up` brings it back into the router, which serves from it again. Destroy
 * leaves no router running. Nothing is mocked.
 */
import { randomBytes } from "node:crypto";
import * as fs from "node:fs";
import * as path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { PROJECT_ROOT } from "../../engine/pulumi";
import { execOnHost } from "../../components/host/exec";
import { simulatedConnection } from "../../sim-host/platform";
import { freeLocalPort as freePort } from "../../ports";
import type { FleetOutputs } from "../../stack/outputs";
import { createTestStack, type TestStack } from "../support/stack";
import { smgVenv } from "../support/smg";

const simHosts = path.join(PROJECT_ROOT, ".gpuhost", "sim-hosts");
fs.mkdirSync(simHosts, { recursive: true });
const base = fs.mkdtempSync(path.join(simHosts, "fleet-"));
const roots = [1, 2, 3].map((i) => path.join(base, `h${i}`));
const apiKey = `sim-fleet-${randomBytes(16).toString("hex")}`;
const ROUTER_UNIT = "gpuhost-router.service";
let stack: TestStack | undefined;

async function onHost(root: string, script: string): Promise<string> {
  const r = await execOnHost(simulatedConnection(root), `set -euo pipefail\n${script}`, [], { timeoutMs: 60_000 });
  if (r.code !== 0) throw new Error(`host script failed (${r.code}): ${r.stderr}`);
  return r.stdout;
}

async function upJson(): Promise<{ changes: Record<string, number>; changed: string[] }> {
  const r = await stack!.ok("up", "--yes", "--skip-preview", "--json");
  const events = r.stdout
    .split("\n")
    .filter((l) => l.startsWith("{"))
    .map(
      (l) =>
        JSON.parse(l) as {
          summaryEvent?: { result: string; resourceChanges: Record<string, number> };
          resOutputsEvent?: { metadata?: { op: string; urn: string } };
        },
    );
  const summary = events.find((e) => e.summaryEvent)?.summaryEvent;
  if (!summary) throw new Error(`pulumi up printed no summary:\n${r.stdout.slice(-3000)}`);
  expect(summary.result).toBe("succeeded");
  const changed = events
    .map((e) => e.resOutputsEvent?.metadata)
    .filter((m): m is NonNullable<typeof m> => !!m && !["same", "refresh", "read"].includes(m.op))
    .map((m) => `${m.op} ${m.urn.slice(m.urn.lastIndexOf("::") + 2)}`);
  return { changes: summary.resourceChanges, changed };
}

async function fleet(): Promise<FleetOutputs> {
  const f = (await stack!.outputs()).fleet;
  if (!f) throw new Error("the stack exported no fleet");
  return f;
}

beforeAll(async () => {
  // The venv the tests' own router runs from doubles as pip's warm cache for the router's install.
  smgVenv();
  const ports = [await freePort(), await freePort(), await freePort(), await freePort(), await freePort()];
  stack = await createTestStack(
    "sim-fleet",
    [
      ...roots.flatMap((root, i) => [
        { path: `gpuhost:hosts[${i}].connection.root`, value: root },
        { path: `gpuhost:hosts[${i}].port`, value: String(ports[i]) },
      ]),
      { path: "gpuhost:router.port", value: String(ports[3]) },
      { path: "gpuhost:router.prometheusPort", value: String(ports[4]) },
      { path: "gpuhost:router.minHealthyHosts", value: "2" },
      { path: "gpuhost:hosts[2].simulatorFaults[0]", value: "silent" },
      { path: "gpuhost:verification.deadlineSeconds", value: "30" },
      { path: "gpuhost:apiKey", value: apiKey, secret: true },
    ],
    600_000,
  );
}, 600_000);

afterAll(async () => {
  try {
    await stack?.dispose();
  } finally {
    fs.rmSync(base, { recursive: true, force: true });
  }
}, 600_000);

describe("sim-fleet under the real engine and the real SMG", () => {
  it("comes up with the two hosts whose gate passed; the third is left out, named with the gate's diagnosis", async () => {
    await upJson();
    const f = await fleet();
    expect(f.smgVersion).toContain("1.13.0");
    expect(f.registered.map((w) => w.name)).toEqual(["sim-fleet-1", "sim-fleet-2"]);
    expect(f.leftOut.map((l) => l.name)).toEqual(["sim-fleet-3"]);
    expect(f.leftOut[0].reason).toMatch(/not ready after 30 s|phase "(connect|models)"/);
    expect(f.drift).toEqual([]);
    for (const w of f.registered) expect(w.requests).toBeGreaterThan(0);
    expect(f.sweep.map((l) => l.concurrency)).toEqual([8, 16, 32]);
    expect(f.plan.hosts).toBe(2);
  }, 900_000);

  it("the router's key is in no argv, no environment, no journal line and not in the state in plaintext; the router holds it", async () => {
    const pid = Number((await onHost(roots[0], `systemctl show -p MainPID --value ${ROUTER_UNIT}`)).trim());
    expect(pid).toBeGreaterThan(0);
    expect(fs.readFileSync(`/proc/${pid}/cmdline`, "utf8")).not.toContain(apiKey);
    expect(fs.readFileSync(`/proc/${pid}/environ`, "utf8")).not.toContain(apiKey);
    const ps = (await onHost(roots[0], "ps -eo args ww")).split("\n");
    expect(ps.filter((l) => l.includes(apiKey))).toEqual([]);
    expect(await onHost(roots[0], `journalctl -u ${ROUTER_UNIT} -n 100000 --no-pager || true`)).not.toContain(apiKey);
    const f = await fleet();
    expect((await fetch(`${f.routerEndpoint}/workers`)).status).toBe(401);
    // Nor in the state in plaintext: the key file's stdin and FleetVerification's input are secrets.
    expect((await stack!.ok("stack", "export")).stdout).not.toContain(apiKey);
  });

  it("with the fault removed, the next up gates the third host and the router serves from all three", async () => {
    await stack!.ok("config", "rm", "--path", "gpuhost:hosts[2].simulatorFaults");
    await upJson();
    const f = await fleet();
    expect(f.registered.map((w) => w.name)).toEqual(["sim-fleet-1", "sim-fleet-2", "sim-fleet-3"]);
    expect(f.leftOut).toEqual([]);
    expect(f.sustainedOutputTokensPerSecond).toBeGreaterThan(0);
    // Every worker served part of the fleet benchmark, and the shares are SMG's own counts.
    for (const w of f.registered) {
      expect(w.requests).toBeGreaterThan(0);
      expect(w.hostSustainedOutputTokensPerSecond).toBeGreaterThan(0);
    }
    expect(f.registered.reduce((s, w) => s + (w.share ?? 0), 0)).toBeCloseTo(1, 6);
    expect(f.sweep.map((l) => l.concurrency)).toEqual([12, 24, 48]);
    expect(f.scalingEfficiency).toBeCloseTo(
      f.sustainedOutputTokensPerSecond / f.hostsSustainedOutputTokensPerSecond,
      9,
    );
    expect(f.plan.hosts).toBe(3);
  }, 900_000);

  it("a second up with nothing changed re-measures nothing", async () => {
    const { changes, changed } = await upJson();
    expect(changed).toEqual([]);
    expect(Object.keys(changes)).toEqual(["same"]);
  }, 600_000);

  it("a host whose service stopped is named by the refresh; the next up brings it back into the router", async () => {
    const before = await fleet();
    await onHost(roots[1], "systemctl stop sglang-autoregressive.service");
    const refresh = await stack!.run("refresh", "--preview-only", "--expect-no-changes", "--json");
    expect(refresh.code).not.toBe(0);
    expect(`${refresh.stdout}${refresh.stderr}`).toMatch(/sim-fleet-2-(verified|toolkit-state)/);
    const { changed } = await upJson();
    expect(changed).toEqual(expect.arrayContaining([expect.stringMatching(/fleet-verified$/)]));
    const after = await fleet();
    expect(after.verifiedAt).not.toBe(before.verifiedAt);
    expect(after.registered.map((w) => w.name)).toEqual(["sim-fleet-1", "sim-fleet-2", "sim-fleet-3"]);
    expect(after.registered.find((w) => w.name === "sim-fleet-2")!.requests).toBeGreaterThan(0);
  }, 900_000);
});
