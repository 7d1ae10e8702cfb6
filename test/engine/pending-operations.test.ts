/**
 * Issue 19 point 4 under the real engine on the sim stack: a `pulumi up` killed (SIGKILL) while a
 * create is under way leaves the stack locked and the create pending. After `pulumi cancel`, a plain
 * `pulumi preview` and `pulumi up` (the CLI alone, no gpuhost command around it) warn in their own
 * output, naming the stack, the pending create and the command that clears it; the up succeeds and
 * the create stays pending (Pulumi.yaml's `refresh: always` keeps the engine's own warning away, and
 * no update clears a pending create); after that command, the next `up` warns no more. On this file
 * backend the program reads the state file itself: what it reads is checked against the CLI's export.
 */
import { spawn } from "node:child_process";
import * as crypto from "node:crypto";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import {
  cancelCommand,
  clearPendingCommand,
  deadLocks,
  engineEnv,
  pendingOperations,
  pendingOperationsWarning,
  pulumiBin,
  runPulumi,
} from "../../engine/pulumi";
import { freeLocalPort } from "../../ports";
import { readPendingOperationsFromFile } from "../../stack/pending-operations";
import { pluginSets } from "../support/engine";
import { descendants, killAll, leftBehind } from "../support/processes";
import { createTestStack, SHORT_COMPARISON_BENCHMARK, simHostNamed, type TestStack } from "../support/stack";

const stacks: TestStack[] = [];
afterAll(async () => {
  await Promise.all(stacks.map((t) => t.dispose()));
}, 300_000);

/** The stack's checkpoint files in its file backend. */
function checkpointFiles(t: TestStack): string[] {
  const dir = path.join(t.opts.stateDir!, ".pulumi", "stacks");
  const all = fs.existsSync(dir) ? (fs.readdirSync(dir, { recursive: true }) as string[]) : [];
  return all.filter((f) => path.basename(f) === `${t.stack}.json`).map((f) => path.join(dir, f));
}

const readOr = (f: string) => {
  try {
    return fs.readFileSync(f, "utf8");
  } catch {
    return "";
  }
};

/** `pulumi up` on the stack, SIGKILLed once its VerifiedGeneration create is under way and saved as pending. */
async function killedUp(t: TestStack): Promise<string> {
  const up = spawn(pulumiBin(), ["up", "--yes", "--skip-preview", "--non-interactive", "--stack", t.stack], {
    cwd: t.dir,
    env: engineEnv(t.opts),
    stdio: ["ignore", "pipe", "pipe"],
  });
  let out = "";
  up.stdout.on("data", (b: Buffer) => (out += b.toString()));
  up.stderr.on("data", (b: Buffer) => (out += b.toString()));
  const exited = new Promise((r) => up.on("close", r));
  // The display says "creating" before the engine has saved the pending create in the checkpoint:
  // the kill waits until the checkpoint on disk holds it (the file is replaced whole, by a rename).
  const pendingSaved = () => checkpointFiles(t).some((f) => /"pending_operations"[\s\S]*-verified"/.test(readOr(f)));
  for (let i = 0; i < 6000 && !pendingSaved() && up.exitCode === null; i++) await new Promise((r) => setTimeout(r, 50));
  if (!pendingSaved()) throw new Error(`the up never saved a pending create of VerifiedGeneration:\n${out}`);
  const processes = descendants(up.pid!);
  try {
    up.kill("SIGKILL");
    await exited;
    // gpuhost's plugins leave by themselves once their engine is gone (orphans.test.ts).
    await leftBehind(processes, 8);
  } finally {
    killAll(processes.keys());
  }
  return out;
}

// The program finds the CLI among its parents, which differ with the language host: both sets.
describe.each(pluginSets())("pending operations left by a killed up, under a plain pulumi up (%s)", (plugins) => {
  it("are named with the clearing command by preview and up, and no more once cleared", async () => {
    const host = `po-${crypto.randomBytes(3).toString("hex")}`;
    const s = await createTestStack(
      "sim",
      [
        ...simHostNamed(host),
        { path: "gpuhost:services.port", value: String(await freeLocalPort()) },
        // Short single requests for the up after the cancel, which benchmarks. The time scale stays the
        // stack's: the kill must land while VerifiedGeneration's create is under way.
        ...SHORT_COMPARISON_BENCHMARK.filter((x) => x.path.startsWith("gpuhost:benchmark.singleRequest")),
      ],
      300_000,
      plugins,
    );
    stacks.push(s);
    const killed = await killedUp(s);
    // The stack's first up: its program read a checkpoint that may hold this update's own steps.
    expect(killed).not.toMatch(/pending operation/);

    const ops = await pendingOperations(s.stack, s.opts);
    expect(ops, killed).toEqual(
      expect.arrayContaining([{ type: "creating", urn: expect.stringMatching(`::${host}-verified$`) as string }]),
    );
    // What the program reads on a file backend, without a CLI: the same as the CLI's export.
    const qualified = `organization/gpuhost/${s.stack}`;
    expect(readPendingOperationsFromFile(qualified, engineEnv(s.opts))?.ops).toEqual(ops);
    const warning = pendingOperationsWarning(s.stack, ops)!;
    expect(warning).toContain(`stack ${s.stack} has ${ops.length} pending operation(s)`);
    expect(warning).toContain(`creating ${host}-verified`);
    expect(warning).toContain(`\`pulumi refresh --clear-pending-creates --yes --stack ${s.stack}\``);

    // The killed CLI's lock first: the engine refuses every update until it is cancelled.
    const locked = await s.run("up", "--yes", "--skip-preview");
    expect(locked.code).not.toBe(0);
    expect(locked.stdout + locked.stderr).toMatch(/pulumi cancel/);
    // Issue 42.6: that lock names the killed CLI's pid and this host, so it is a dead process's, and
    // the program's advice under a preview (which takes no lock) puts `pulumi cancel` before the refresh.
    const dead = deadLocks(s.stack, s.opts);
    expect(dead.map((l) => l.hostname)).toEqual([os.hostname()]);
    const lockedAdvice = pendingOperationsWarning(s.stack, ops, dead)!;
    expect(lockedAdvice).toContain(
      `\`${cancelCommand(s.stack)}\` (the stopped update's lock is still there: pid ${dead[0].pid} `,
    );
    const lockedPreview = await s.run("preview");
    expect(lockedPreview.stdout, lockedPreview.stdout + lockedPreview.stderr).toContain(`warning: ${lockedAdvice}`);
    await s.ok("cancel", "--yes");

    const preview = await s.ok("preview");
    expect(preview.stdout).toContain(`warning: ${warning}`);

    const up = await s.ok("up", "--yes", "--skip-preview");
    // Once, from the program (the engine's own warning is for updates that do not refresh).
    const diagnostics = up.stdout.slice(up.stdout.indexOf("Diagnostics:"));
    expect(diagnostics.split(`warning: ${warning}`).length - 1, up.stdout).toBe(1);
    expect(up.stdout).not.toMatch(/pending operations from previous deployment/);
    // The up succeeded, created VerifiedGeneration again, and the create is still pending.
    expect((await s.outputs()).gpuHosts[host].generating).toBe(true);
    expect(await pendingOperations(s.stack, s.opts)).toEqual(ops);

    const [bin, ...args] = clearPendingCommand(s.stack).split(" ");
    expect(bin).toBe("pulumi");
    const cleared = await runPulumi(args, s.opts);
    expect(cleared.code, cleared.stdout + cleared.stderr).toBe(0);
    expect(await pendingOperations(s.stack, s.opts)).toEqual([]);
    expect(readPendingOperationsFromFile(qualified, engineEnv(s.opts))?.ops).toEqual([]);

    const clean = await s.ok("up", "--yes", "--skip-preview");
    expect(clean.stdout + clean.stderr).not.toMatch(/pending operation/);
  }, 900_000);
});
