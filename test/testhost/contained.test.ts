/**
 * Issue 39.4 with the real parts: vitest run under engine/contain.sh, as `npm test` runs it, whose test
 * has started a real sshd, SMG, llama.cpp's llama-server and a systemd-nspawn Debian host, each the
 * way the suite's fixtures start it (test/testhost/contained-parts.fixture.ts), is killed with
 * SIGKILL, so neither its teardown nor a fixture's cleanup runs: 10 s later none of them, nor anything else it started, is still running,
 * and its cgroup is gone; the watchdog then removes the host's root folder and the run's temporary
 * folder, and ends.
 * test/support/contain.test.ts proves each ending with stand-in processes; this is the same net
 * around what the suite really leaves behind. Needs root, nspawn, the SMG venv and llama-server.
 */
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { alive, killAll, leftBehind, startUntil } from "../support/processes";
import { CGROUP_ROOTS } from "../support/run-cpu";
import type { ContainedParts } from "./contained-parts.fixture";
import { requireTestHost } from "./harness";

const ROOT = path.resolve(__dirname, "../..");
const VITEST = path.join(ROOT, "node_modules", ".bin", "vitest");
const enabled = requireTestHost() && process.env.GPUHOST_SKIP_REAL_SERVER !== "1";

const started: number[] = [];
afterEach(() => killAll(started.splice(0)));

/** The cgroup-v2 folder of PID ("0::/path" in /proc/PID/cgroup), on the unified or hybrid hierarchy. */
function cgroupOf(pid: number): string | null {
  const rel = /^0::(.*)$/m.exec(fs.readFileSync(`/proc/${pid}/cgroup`, "utf8"))?.[1];
  if (!rel) return null;
  const dir = CGROUP_ROOTS.map((r) => r + rel).find((d) => fs.existsSync(d));
  return dir ?? null;
}

describe.runIf(enabled)("engine/contain.sh around the suite's real parts", () => {
  it("SIGKILL of the contained run: 10 s later no sshd, SMG, llama-server or nspawn host it started is running; then its folders go and the watchdog ends", async () => {
    const out = path.join(fs.mkdtempSync(path.join(os.tmpdir(), "contained-")), "parts.json");
    const run = await startUntil(
      "bash",
      ["engine/contain.sh", VITEST, "run", "--config", "vitest.contained.config.ts"],
      { cwd: ROOT, env: { ...process.env, GPUHOST_CONTAINED_PARTS_OUT: out }, boundMs: 480_000 },
      (pid) => fs.existsSync(out) || !alive(pid),
    );
    // The net if this test fails: all it started but the watchdog, which then still cleans up after it.
    started.push(
      run.child.pid!,
      ...[...run.processes].filter(([, c]) => !c.includes("contain.sh --watch")).map(([p]) => p),
    );
    expect(fs.existsSync(out), run.out()).toBe(true);
    const parts = JSON.parse(fs.readFileSync(out, "utf8")) as ContainedParts;
    const commands = [...run.processes.values()];
    // Each real part runs as a descendant of the contained command (so the check below can fail).
    for (const part of [/\/usr\/sbin\/sshd -D -e -f /, /smg/, /llama-server/, /systemd-nspawn/])
      expect(
        commands.filter((c) => part.test(c)),
        `${String(part)} among ${commands.join("\n")}`,
      ).not.toEqual([]);
    const cgroup = cgroupOf(run.child.pid!);
    expect(cgroup, "the run's own cgroup").toMatch(/gpuhost-run-/);
    expect(fs.existsSync(parts.hostRoot)).toBe(true);

    process.kill(run.child.pid!, "SIGKILL");
    // Within 10 s of the kill: every process the run started, and its cgroup, gone.
    const isWatchdog = (cmd: string) => cmd.includes("contain.sh --watch");
    const children = new Map([...run.processes].filter(([, c]) => !isWatchdog(c)));
    const watchdog = new Map([...run.processes].filter(([, c]) => isWatchdog(c)));
    expect(watchdog.size, "the watchdog").toBe(1);
    const killedAt = Date.now();
    const gone = () => !fs.existsSync(cgroup!) && ![...children.keys()].some(alive);
    for (let i = 0; i < 100 && !gone(); i++) await new Promise((r) => setTimeout(r, 100));
    expect(await leftBehind(children, 0)).toEqual([]);
    // Nothing started after the list above was read either: the cgroup held all of it, and went.
    expect(fs.existsSync(cgroup!), `${cgroup} is left`).toBe(false);
    // Then the watchdog removes the run's folders and ends. Removing a booted host's root
    // filesystem (tens of thousands of files) took it 5 s on a machine running four busy loops, and
    // over 10 s in a whole suite's run beside a CPU-bound job, so its bound is a minute, from the kill.
    const left = await leftBehind(watchdog, Math.max(0, 60 - (Date.now() - killedAt) / 1000));
    expect(left, "the watchdog still running a minute after the kill").toEqual([]);
    expect(fs.existsSync(parts.hostRoot), `${parts.hostRoot} is left`).toBe(false);
    expect(fs.existsSync(parts.tmpdir), `${parts.tmpdir} is left`).toBe(false);
    fs.rmSync(path.dirname(out), { recursive: true, force: true });
  }, 600_000);
});
