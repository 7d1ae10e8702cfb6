/**
 * A checkout and its state moved to another folder (a CI runner's path vs a laptop's) keep working:
 * `npm run demo -- --stack` (a simulated host, its units running, verified and benchmarked) in
 * folder A; A moved to B with `mv`, so A is gone; then in B the demo again, `pulumi refresh` and
 * `pulumi preview --expect-no-changes`: no error, no replacement, and no diff but the scheduled drift
 * check's units, which run the CLI from the checkout and so must follow it. Before, the dynamic
 * resources' refresh loaded code from A ("Cannot find module '<A>/dist/...'"), and every simulated
 * command, probe and unit named A, so the first `up` in B updated them all and replaced the
 * verification.
 *
 * The clone is this checkout's tracked files and its build (node_modules linked, as it is large and
 * outside what moves); the stack is a throwaway one (its own name, port, passphrase and file backend
 * inside the clone), run by the clone's own demo entry, as `npm run demo -- --stack` runs it.
 */
import { execFileSync, spawn } from "node:child_process";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { PROJECT_ROOT, type EngineOptions, ensureStack, runPulumi } from "../../engine/pulumi";
import { freeLocalPort } from "../../ports";
import { type StateExport, TEST_PASSPHRASE, testEngineOptions } from "../support/engine";

const work = fs.mkdtempSync(path.join(os.tmpdir(), "gpuhost-sim-move-"));
const a = path.join(work, "a");
const b = path.join(work, "b");
const stack = "moved";

const opts = (dir: string): EngineOptions => testEngineOptions(dir, 300_000);

async function pulumi(dir: string, ...args: string[]) {
  const r = await runPulumi([...args, "--stack", stack], opts(dir));
  if (r.code !== 0) throw new Error(`pulumi ${args.join(" ")} in ${dir} exited ${r.code}\n${r.stdout}\n${r.stderr}`);
  return r;
}

/** The clone's `npm run demo -- --stack` on this stack (its own compiled demo entry, in the clone). */
function demo(dir: string): Promise<{ code: number | null; out: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [path.join(dir, "dist", "cli", "demo.js"), "--stack"], {
      cwd: dir,
      env: {
        ...process.env,
        GPUHOST_STACK: stack,
        PULUMI_BACKEND_URL: `file://${path.join(dir, "state")}`,
        PULUMI_CONFIG_PASSPHRASE: TEST_PASSPHRASE,
      },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let out = "";
    child.stdout.on("data", (d: Buffer) => (out += d.toString()));
    child.stderr.on("data", (d: Buffer) => (out += d.toString()));
    child.on("close", (code) => resolve({ code, out }));
  });
}

const summary = (out: string) => out.slice(out.lastIndexOf("Resources:"));

beforeAll(async () => {
  for (const f of execFileSync("git", ["ls-files", "-z"], { cwd: PROJECT_ROOT, encoding: "utf8" }).split("\0")) {
    if (!f || !fs.existsSync(path.join(PROJECT_ROOT, f))) continue;
    fs.mkdirSync(path.join(a, path.dirname(f)), { recursive: true });
    fs.copyFileSync(path.join(PROJECT_ROOT, f), path.join(a, f));
    fs.chmodSync(path.join(a, f), fs.statSync(path.join(PROJECT_ROOT, f)).mode);
  }
  // What `npm run build` and `npm run setup` leave in a clone: the build and the engine folder.
  fs.cpSync(path.join(PROJECT_ROOT, "dist"), path.join(a, "dist"), { recursive: true });
  fs.cpSync(path.join(PROJECT_ROOT, ".gpuhost", "engine"), path.join(a, ".gpuhost", "engine"), { recursive: true });
  fs.symlinkSync(path.join(PROJECT_ROOT, "node_modules"), path.join(a, "node_modules"));
  // The embedded stack's config without its salt, on a port of its own.
  const config = fs
    .readFileSync(path.join(a, "stacks", "Pulumi.sim.yaml"), "utf8")
    .replace(/^encryptionsalt: .*$/m, "")
    .replace(/^(\s+port:) 30000$/m, `$1 ${await freeLocalPort()}`);
  fs.writeFileSync(path.join(a, "stacks", `Pulumi.${stack}.yaml`), config);
  await ensureStack(stack, opts(a));
  await pulumi(a, "config", "set", "--secret", "gpuhost:apiKey", "sk-moved-test-key");
}, 300_000);

afterAll(async () => {
  const where = fs.existsSync(b) ? b : a;
  if (fs.existsSync(where)) await runPulumi(["destroy", "--yes", "--skip-preview", "--stack", stack], opts(where));
  fs.rmSync(work, { recursive: true, force: true });
}, 300_000);

describe("a checkout with a running simulated host, moved to another folder", () => {
  it("the demo's stack in A: provisioned, verified, benchmarked", async () => {
    const r = await demo(a);
    expect(r.code, r.out).toBe(0);
    expect(r.out).toMatch(/"benchComplete": true/);
  }, 300_000);

  it("moved to B (A gone): the demo there updates only the drift check's units, then refresh and preview change nothing", async () => {
    fs.renameSync(a, b);
    expect(fs.existsSync(a)).toBe(false);
    const again = await demo(b);
    expect(again.code, again.out).toBe(0);
    // The scheduled drift check (operations.driftCheck) runs the CLI from the checkout, so its
    // service unit (and the enable step that restarts its timer) must follow the move: those two are
    // updated, nothing is created, replaced or deleted, and nothing else changes.
    expect(summary(again.out), again.out).toMatch(/\d+ unchanged/);
    expect(summary(again.out), again.out).toMatch(/~ 2 updated/);
    expect(summary(again.out), again.out).not.toMatch(/created|replaced|deleted/);
    const updated = again.out.split("\n").filter((l) => /\supdated \(/.test(l));
    expect(updated.length, again.out).toBe(2);
    for (const line of updated) expect(line).toMatch(/drift-check-(service|enable) updated/);
    const refresh = await pulumi(b, "refresh", "--yes", "--skip-preview");
    expect(summary(refresh.stdout), refresh.stdout).not.toMatch(/updated|deleted/);
    // The state was refreshed just above: the preview compares against it without a refresh of its own.
    const preview = await runPulumi(["preview", "--expect-no-changes", "--refresh=false", "--stack", stack], opts(b));
    expect(preview.code, preview.stdout + preview.stderr).toBe(0);
    // No resource's inputs name A: what decides a diff holds no path of the old folder (outputs may
    // still quote it, e.g. a command's stdout, until that command runs again).
    const state = JSON.parse((await pulumi(b, "stack", "export")).stdout) as StateExport;
    const naming = state.deployment.resources.filter((r) => JSON.stringify(r.inputs ?? {}).includes(a));
    expect(naming.map((r) => r.urn)).toEqual([]);
  }, 600_000);
});
