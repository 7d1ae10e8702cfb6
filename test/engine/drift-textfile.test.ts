// `gpuhost drift --textfile DIR` under the real engine (issue 27): on a throwaway `sim` stack whose
// simulated host lost curand.h, the check exits 1 (the engine itself exits 7 under
// --expect-no-changes) and the .prom file names the header; on a stack that does not exist it exits
// 12 (the engine: 6) and the file still says the check failed, and why. Each file (clean, drift,
// failed) passes Prometheus's own `promtool check metrics`. Then what runs around the refresh (issue
// 27): an update holding the stack's lock (the engine's own lock file, which pulumi itself refuses an
// up on) skips the check (14) without a refresh; --repair runs the update and checks again; the same
// drift back is not repaired twice; a repair whose update fails (a stale FlashInfer cache no step
// removes) leaves the stack paused (17) until --resume.
import { randomBytes } from "node:crypto";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { driftMain } from "../../cli/drift";
import { execOnHost } from "../../components/host/exec";
import { type EngineOptions, lastUpdate, runPulumi, stackLocks } from "../../engine/pulumi";
import { freeLocalPort } from "../../ports";
import { simulatedConnection } from "../../sim-host/platform";
import { promtool, SKIP_PROMTOOL } from "../support/promtool";
import { createTestStack, type TestStack, disposeStack } from "../support/stack";
import { simHostRoot } from "../support/sim-stack";

const hostRoot = simHostRoot("textfile");
const CURAND_H = "/usr/local/cuda-13.0/include/curand.h";
const textDir = fs.mkdtempSync(path.join(os.tmpdir(), "gpuhost-textfile-"));
const stateDir = fs.mkdtempSync(path.join(os.tmpdir(), "gpuhost-drift-state-"));
const JIT_STALE = "/var/cache/gpuhost/flashinfer/cuda12.8-stale";
let stack: TestStack | undefined;

/**
 * `gpuhost drift --stack NAME --textfile DIR [FLAGS]` in this process on the test stack's backend (the
 * real lock and history look-ups, on that backend): its status, the engine commands it ran with their
 * statuses (engineCode: the last one's), its output, the file.
 */
async function driftTextfile(name: string, opts: EngineOptions, flags: string[] = []) {
  let engineCode = -1;
  const commands: string[] = [];
  let out = "";
  const code = await driftMain(["--stack", name, "--textfile", textDir, ...flags], {
    out: (t) => void (out += t),
    err: (t) => void (out += t),
    runPulumi: async (args, o) => {
      const r = await runPulumi(args, { ...opts, ...o, env: { ...opts.env, ...o?.env } });
      engineCode = r.code;
      // the engine commands of the check and the repair (the lock and history look-ups run their own)
      commands.push(`${args[0]} ${r.code}`);
      return r;
    },
    stackLocks: (s, o) => stackLocks(s, { ...opts, ...o }),
    lastUpdate: (s, o) => lastUpdate(s, { ...opts, ...o }),
    stateDir,
  });
  const file = path.join(textDir, `gpuhost-drift-${name}.prom`);
  return { code, engineCode, commands, out, text: fs.existsSync(file) ? fs.readFileSync(file, "utf8") : "" };
}

/** `promtool check metrics` on TEXT: Prometheus's own parser and linter, nothing to say. */
async function expectPromtoolClean(text: string) {
  if (SKIP_PROMTOOL) return;
  const r = await promtool(["check", "metrics"], text);
  expect(r.status, `${r.stdout}${r.stderr}\n${text}`).toBe(0);
  expect(r.stdout + r.stderr).toBe("");
}

const onHost = async (script: string) => {
  const r = await execOnHost(simulatedConnection(hostRoot), script, [], { timeoutMs: 60_000 });
  expect(r.code, r.stderr).toBe(0);
};

beforeAll(async () => {
  stack = await createTestStack(
    "sim",
    [
      { path: "gpuhost:services.port", value: String(await freeLocalPort()) },
      { path: "gpuhost:hosts[0].connection.root", value: hostRoot },
      { path: "gpuhost:apiKey", value: `sim-textfile-${randomBytes(16).toString("hex")}`, secret: true },
    ],
    240_000,
  );
}, 120_000);

afterAll(() => disposeStack(stack, hostRoot, textDir, stateDir), 300_000);

describe("gpuhost drift --textfile under the real engine", () => {
  it("a stack that does not exist: exit 12 (the engine's 6); the file says success 0 and why", async () => {
    const name = `${stack!.stack}-absent`;
    const r = await driftTextfile(name, stack!.opts);
    expect(r.engineCode, r.out).toBe(6);
    expect(r.code, r.out).toBe(12);
    expect(r.text).toContain(`gpuhost_drift_check_success{stack="${name}"} 0\n`);
    expect(r.text).toContain(`gpuhost_drift_check_failure_reason{stack="${name}",reason="no-stack"} 1\n`);
    await expectPromtoolClean(r.text);
  }, 120_000);

  it("brought up: clean, exit 0; promtool check metrics passes the file", async () => {
    await stack!.ok("up", "--yes", "--skip-preview");
    const r = await driftTextfile(stack!.stack, stack!.opts);
    expect(r.code, r.out).toBe(0);
    expect(r.text).toContain(`gpuhost_drift_check_success{stack="${stack!.stack}"} 1\n`);
    await expectPromtoolClean(r.text);
  }, 400_000);

  it("an update holds the stack's lock (pulumi itself refuses an up): skipped, exit 14, no refresh run", async () => {
    const name = stack!.stack;
    const lockDir = path.join(stack!.dir, "state", ".pulumi", "locks", "organization", "gpuhost", name);
    fs.mkdirSync(lockDir, { recursive: true });
    // The engine's own lock (pkg/backend/diy/lock.go), of a live process of this host: this one.
    const lock = { pid: process.pid, username: os.userInfo().username, hostname: os.hostname(), timestamp: new Date() };
    fs.writeFileSync(path.join(lockDir, "test-update.json"), JSON.stringify(lock));
    try {
      const up = await stack!.run("up", "--yes", "--skip-preview");
      expect(up.code).not.toBe(0);
      expect(up.stdout + up.stderr).toMatch(/the stack is currently locked/);
      const r = await driftTextfile(name, stack!.opts);
      expect(r.code, r.out).toBe(14);
      expect(r.commands).toEqual([]);
      expect(r.out).toMatch(new RegExp(`skipped: an update holds stack ${name}'s lock \\(.*pid ${process.pid}`));
      expect(r.text).toContain(`gpuhost_drift_check_skipped{stack="${name}",reason="locked"} 1\n`);
      expect(r.text).not.toContain("gpuhost_drift_check_success{");
      await expectPromtoolClean(r.text);
    } finally {
      fs.rmSync(path.join(lockDir, "test-update.json"), { force: true });
    }
  }, 120_000);

  it("curand.h removed from the host: exit 1 (the engine's 7); the file names it, success 1", async () => {
    await onHost(`rm -f "$GPUHOST_ROOT${CURAND_H}"`);
    const name = stack!.stack;
    const r = await driftTextfile(name, stack!.opts);
    expect(r.engineCode, r.out).toBe(7);
    expect(r.code, r.out).toBe(1);
    expect(r.text).toMatch(
      new RegExp(
        `^gpuhost_drift\\{stack="${name}",host="[^"]+",item="files\\.${CURAND_H.replace(/\./g, "\\.")}"\\} 1$`,
        "m",
      ),
    );
    expect(r.text).toMatch(new RegExp(`^gpuhost_drift_items\\{stack="${name}",host="[^"]+"\\} [1-9]\\d*$`, "m"));
    expect(r.text).toContain(`gpuhost_drift_check_success{stack="${name}"} 1\n`);
    expect(r.text).not.toContain("gpuhost_drift_check_failure_reason{");
    await expectPromtoolClean(r.text);
  }, 400_000);

  it("--repair: the update restores curand.h, the check after it is clean (exit 0); the file says it ran", async () => {
    const name = stack!.stack;
    const r = await driftTextfile(name, stack!.opts, ["--repair"]);
    expect(r.commands, r.out).toEqual(["refresh 7", "up 0", "refresh 0"]);
    expect(r.code, r.out).toBe(0);
    expect(r.text).toContain(`gpuhost_drift_repair_ran{stack="${name}"} 1\n`);
    expect(r.text).toContain(`gpuhost_drift_repair_success{stack="${name}"} 1\n`);
    expect(r.text).toContain(`gpuhost_drift_repairs_today{stack="${name}"} 1\n`);
    await onHost(`test -f "$GPUHOST_ROOT${CURAND_H}"`);
    await expectPromtoolClean(r.text);
  }, 600_000);

  it("the same drift back: --repair does not run the update again (same-drift), whatever the daily limit", async () => {
    const name = stack!.stack;
    await onHost(`rm -f "$GPUHOST_ROOT${CURAND_H}"`);
    const r = await driftTextfile(name, stack!.opts, ["--repair", "--max-repairs", "5"]);
    expect(r.commands, r.out).toEqual(["refresh 7"]);
    expect(r.code, r.out).toBe(1);
    expect(r.out).toMatch(/not repaired: --repair ran the update for this same drift before/);
    expect(r.text).toContain(`gpuhost_drift_repair_ran{stack="${name}"} 0\n`);
    expect(r.text).toContain(`gpuhost_drift_repair_held{stack="${name}",reason="same-drift"} 1\n`);
  }, 400_000);

  it("a repair whose update fails (a stale JIT cache no step removes): paused, exit 17, until --resume", async () => {
    const name = stack!.stack;
    await onHost(`mkdir -p "$GPUHOST_ROOT${JIT_STALE}"`);
    // other drift than the last repair's (curand.h and the cache), and a second repair allowed today
    const r = await driftTextfile(name, stack!.opts, ["--repair", "--max-repairs", "2"]);
    expect(r.commands, r.out).toEqual(["refresh 7", "up 1"]);
    expect(r.code, r.out).toBe(17);
    expect(r.text).toContain(`gpuhost_drift_repair_success{stack="${name}"} 0\n`);
    expect(r.text).toContain(`gpuhost_drift_check_paused{stack="${name}",reason="failed-update"} 1\n`);
    await expectPromtoolClean(r.text);
    // no one acted: still paused, nothing refreshed
    const again = await driftTextfile(name, stack!.opts, ["--repair", "--max-repairs", "9"]);
    expect(again.code, again.out).toBe(17);
    expect(again.commands).toEqual([]);
    expect(again.out).toMatch(/paused: the last update of stack .* failed, so nothing is checked until a person acts/);
    // a person looked: --resume checks the stack as it is (drift), and the next check is not paused
    const resumed = await driftTextfile(name, stack!.opts, ["--resume"]);
    expect(resumed.code, resumed.out).toBe(1);
    expect(resumed.commands).toEqual(["refresh 7"]);
    expect(resumed.out).toMatch(/resumed: the failed update of stack .* is acknowledged/);
    expect(resumed.text).toMatch(/item="jit\.key"\} 1$/m);
    expect(resumed.text).not.toContain("gpuhost_drift_check_paused");
  }, 900_000);
});
