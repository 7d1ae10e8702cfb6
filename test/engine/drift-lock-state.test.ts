/**
 * The stack's lock and update state around `gpuhost drift`'s refresh, under the real engine, on a
 * throwaway stack of the engine fixture program (test/engine/fixture/program.ts: a quick `up`).
 *
 * Issue 42.7: `pulumi refresh --preview-only` takes no lock (pulumi PR #22385), so an update may run
 * while the check reads. The check looks at the lock and the history again after its refresh: a real
 * `pulumi up` run alongside the refresh, and an update's lock (a live process's) taken while it runs,
 * each discard the result: exit 18, "skipped: an update ran during the check", and the textfile says
 * gpuhost_drift_check_skipped{reason="overlapped"} 1 with no success series (as a locked check does).
 * A check no update overlapped is clean as before.
 *
 * Issue 42.6: a lock file whose process is dead (a SIGKILLed demo's engine) fails every update and
 * refresh, while a preview-only refresh reads past it. `gpuhost drift` still checks, and names the lock
 * as held by a dead process with `pulumi cancel` as the advice; the demo refuses the stack in the same
 * sentence before its up; the pending-operations advice puts `pulumi cancel` before the refresh that
 * would fail on the lock; and the advised command, run as printed, lets the next `up` through.
 */
import { spawnSync } from "node:child_process";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { demoMain } from "../../cli/demo";
import { driftMain } from "../../cli/drift";
import {
  cancelCommand,
  deadLocks,
  ensureStack,
  lastUpdate,
  pendingOperationsWarning,
  PROJECT_ROOT,
  runPulumi,
  stackLocks,
} from "../../engine/pulumi";
import { testEngineOptions, writeFixtureProject } from "../support/engine";
import { promtool, SKIP_PROMTOOL } from "../support/promtool";

const PROJECT = "gpuhost-drift-lock";
const STACK = "lock-state";
const work = fs.mkdtempSync(path.join(os.tmpdir(), "gpuhost-drift-lock-"));
const textDir = fs.mkdtempSync(path.join(os.tmpdir(), "gpuhost-drift-lock-metrics-"));
const stateDir = fs.mkdtempSync(path.join(os.tmpdir(), "gpuhost-drift-lock-state-"));
const opts = testEngineOptions(work, 240_000);
/** Where the file backend keeps the stack's locks (pkg/backend/diy/lock.go). */
const lockDir = path.join(work, "state", ".pulumi", "locks", "organization", PROJECT, STACK);

const pulumi = async (...args: string[]) => {
  const r = await runPulumi([...args, "--stack", STACK], opts);
  if (r.code !== 0) throw new Error(`pulumi ${args.join(" ")} exited ${r.code}\n${r.stdout}\n${r.stderr}`);
  return r;
};

/** Writes the engine's own lock file for process PID of this host; its path. */
function plantLock(pid: number, name: string): string {
  fs.mkdirSync(lockDir, { recursive: true });
  const file = path.join(lockDir, `${name}.json`);
  const lock = { pid, username: os.userInfo().username, hostname: os.hostname(), timestamp: new Date() };
  fs.writeFileSync(file, JSON.stringify(lock));
  return file;
}

/**
 * `gpuhost drift --stack STACK --textfile DIR` in this process on the test backend, with DURING run
 * alongside the refresh (and awaited with it): its status, output and metrics file.
 */
async function drift(during?: () => Promise<unknown>) {
  let out = "";
  const code = await driftMain(["--stack", STACK, "--textfile", textDir], {
    out: (t) => void (out += t),
    err: (t) => void (out += t),
    runPulumi: async (args, o) => {
      const run = runPulumi(args, { ...opts, ...o, env: { ...opts.env, ...o?.env } });
      if (args[0] !== "refresh" || !during) return run;
      const [r] = await Promise.all([run, during()]);
      return r;
    },
    stackLocks: (s, o) => stackLocks(s, { ...opts, ...o }),
    deadLocks: (s, o) => deadLocks(s, { ...opts, ...o }),
    lastUpdate: (s, o) => lastUpdate(s, { ...opts, ...o }),
    stateDir,
  });
  const file = path.join(textDir, `gpuhost-drift-${STACK}.prom`);
  return { code, out, text: fs.existsSync(file) ? fs.readFileSync(file, "utf8") : "" };
}

async function expectPromtoolClean(text: string) {
  if (SKIP_PROMTOOL) return;
  const r = await promtool(["check", "metrics"], text);
  expect(r.status, `${r.stdout}${r.stderr}\n${text}`).toBe(0);
}

beforeAll(async () => {
  const evidence = path.join(work, "evidence");
  fs.mkdirSync(evidence);
  writeFixtureProject(work, PROJECT, path.join(PROJECT_ROOT, "dist", "test", "engine", "fixture", "program.js"));
  await ensureStack(STACK, opts);
  await pulumi("config", "set", "evidenceDir", evidence);
  await pulumi("up", "--yes", "--skip-preview");
}, 300_000);

afterAll(() => {
  for (const d of [work, textDir, stateDir]) fs.rmSync(d, { recursive: true, force: true });
});

describe("an update that overlaps the scheduled check (issue 42.7)", () => {
  it("no update during the check: clean, exit 0, success 1", async () => {
    const r = await drift();
    expect(r.code, r.out).toBe(0);
    expect(r.text).toContain(`gpuhost_drift_check_success{stack="${STACK}"} 1\n`);
    expect(r.text).not.toContain("gpuhost_drift_check_skipped");
  }, 240_000);

  it("a real pulumi up runs alongside the refresh: the result is discarded, exit 18, skipped (overlapped) in the metrics", async () => {
    let up = -1;
    const r = await drift(async () => {
      up = (await runPulumi(["up", "--yes", "--skip-preview", "--stack", STACK], opts)).code;
    });
    expect(up, "the overlapping up itself").toBe(0);
    expect(r.code, r.out).toBe(18);
    expect(r.out).toMatch(/skipped: an update ran during the check \(the stack's last update is now one started .*\)/);
    expect(r.text).toContain(`gpuhost_drift_check_skipped{stack="${STACK}",reason="overlapped"} 1\n`);
    expect(r.text).toMatch(/# HELP gpuhost_drift_check_skipped .*skipped: an update ran during the check/);
    expect(r.text).not.toContain("gpuhost_drift_check_success{");
    expect(r.text).not.toContain("gpuhost_drift_check_failure_reason{");
    await expectPromtoolClean(r.text);
  }, 300_000);

  it("an update's lock taken while the refresh runs (a live process's): discarded, exit 18, naming the lock", async () => {
    let file = "";
    try {
      const r = await drift(async () => {
        file = plantLock(process.pid, "overlapping-update");
      });
      expect(r.code, r.out).toBe(18);
      expect(r.out).toMatch(
        new RegExp(`skipped: an update ran during the check \\(it holds the stack's lock now: pid ${process.pid} `),
      );
      expect(r.text).toContain(`gpuhost_drift_check_skipped{stack="${STACK}",reason="overlapped"} 1\n`);
    } finally {
      fs.rmSync(file, { force: true });
    }
    // and the next check, with no update, is clean again
    expect((await drift()).code).toBe(0);
  }, 300_000);
});

describe("a lock left by a dead process (issue 42.6)", () => {
  it("drift names it with pulumi cancel, the demo refuses, the advice clears it and the next up runs", async () => {
    const dead = spawnSync("true").pid;
    const file = plantLock(dead, "killed-demo");
    try {
      // the real engine refuses an update on it: the planted file is the engine's own lock
      const locked = await runPulumi(["up", "--yes", "--skip-preview", "--stack", STACK], opts);
      expect(locked.code).not.toBe(0);
      expect(locked.stdout + locked.stderr).toMatch(/the stack is currently locked/);

      const cancel = cancelCommand(STACK);
      expect(cancel).toBe(`pulumi cancel --yes --stack ${STACK}`);
      const named = `stack ${STACK} is locked by a process that is gone (pid ${dead} of ${os.userInfo().username}@${os.hostname()} since `;
      const r = await drift();
      // the preview-only refresh reads past the lock: the verdict stands, and the lock is named
      expect(r.code, r.out).toBe(0);
      expect(r.out).toContain(`warning: ${named}`);
      expect(r.out).toContain(`run \`${cancel}\` to remove it.`);

      // the advice for pending operations puts the cancel before the refresh that would fail on the lock
      const advice = pendingOperationsWarning(STACK, [{ type: "creating", urn: "urn:x::y" }], deadLocks(STACK, opts))!;
      expect(advice.indexOf(`\`${cancel}\``)).toBeGreaterThan(0);
      expect(advice.indexOf(`\`${cancel}\``)).toBeLessThan(advice.indexOf("`pulumi refresh --clear-pending-creates"));

      // the demo on this stack refuses before its up, in the same words
      let said = "";
      const write = process.stderr.write.bind(process.stderr);
      process.stderr.write = (chunk: string | Uint8Array) => {
        said += chunk.toString();
        return true;
      };
      const saved = process.env.GPUHOST_STACK;
      process.env.GPUHOST_STACK = STACK;
      let demo: number;
      try {
        demo = await demoMain(["--stack"], opts);
      } finally {
        process.stderr.write = write;
        if (saved === undefined) delete process.env.GPUHOST_STACK;
        else process.env.GPUHOST_STACK = saved;
      }
      expect(demo, said).toBe(1);
      expect(said).toContain(`gpuhost demo: ${named}`);
      expect(said).toContain(`\`${cancel}\``);

      // the advised command, as printed, removes it; the next up runs
      const [bin, ...args] = cancel.split(" ");
      expect(bin).toBe("pulumi");
      const cancelled = await runPulumi(args, opts);
      expect(cancelled.code, cancelled.stdout + cancelled.stderr).toBe(0);
      expect(deadLocks(STACK, opts)).toEqual([]);
      await pulumi("up", "--yes", "--skip-preview");
    } finally {
      fs.rmSync(file, { force: true });
    }
  }, 400_000);
});
