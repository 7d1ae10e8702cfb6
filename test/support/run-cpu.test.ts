import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { describe, expect, it } from "vitest";
import { fileCgroupName } from "./file-key";
import { cpuLine, cpuSample, fileCpuSeconds, runCgroupDir } from "./run-cpu";

describe("a run's CPU line", () => {
  it("says the wall, the run's CPU and cores, and the machine's busy share", () => {
    const a = { atMs: 0, runUsec: 0, machineBusyTicks: 0, machineTotalTicks: 0 };
    const b = { atMs: 100_000, runUsec: 150e6, machineBusyTicks: 180, machineTotalTicks: 200 };
    expect(cpuLine(a, b, 2)).toBe(
      "wall 100 s; this run's processes used 150 s of CPU (1.50 of 2 cores on average); the machine's cores were 90 % busy (others' work included)",
    );
  });

  it("outside a contained run (no cgroup of its own) leaves the run's CPU out rather than report the machine's as the run's", () => {
    const a = { atMs: 0, machineBusyTicks: 0, machineTotalTicks: 100 };
    const b = { atMs: 10_000, machineBusyTicks: 50, machineTotalTicks: 200 };
    expect(cpuLine(a, b, 2)).toBe("wall 10 s; the machine's cores were 50 % busy (others' work included)");
  });

  it("reads this machine's counters: they grow while it computes", () => {
    const a = cpuSample();
    const until = Date.now() + 300;
    while (Date.now() < until) Math.sqrt(Math.random());
    const b = cpuSample();
    expect(b.machineTotalTicks).toBeGreaterThan(a.machineTotalTicks);
    expect(b.machineBusyTicks).toBeGreaterThan(a.machineBusyTicks);
    if (a.runUsec !== undefined) expect(b.runUsec).toBeGreaterThan(a.runUsec);
  });
});

describe("each file's CPU", () => {
  it("sums the cgroups a file's workers made and leaves out a file that made none", () => {
    const run = fs.mkdtempSync(path.join(os.tmpdir(), "run-cg-"));
    const cgroup = (file: string, pid: number, usec: number) => {
      const dir = path.join(run, fileCgroupName(file, pid));
      fs.mkdirSync(dir);
      fs.writeFileSync(path.join(dir, "cpu.stat"), `usage_usec ${usec}\nuser_usec 1\nsystem_usec 2\n`);
    };
    cgroup("/p/test/a.test.ts", 10, 2_500_000);
    cgroup("/p/test/a.test.ts", 11, 500_000);
    cgroup("/p/test/b.test.ts", 12, 1_000_000);
    fs.mkdirSync(path.join(run, "gpuhost-run-nested"));
    const got = fileCpuSeconds(["/p/test/a.test.ts", "/p/test/b.test.ts", "/p/test/c.test.ts"], run);
    expect(Object.fromEntries(got)).toEqual({ "/p/test/a.test.ts": 3, "/p/test/b.test.ts": 1 });
    fs.rmSync(run, { recursive: true });
  });

  it("in a contained run, counts this very file's work in a cgroup of its own (test/support/file-cpu.ts)", () => {
    const run = runCgroupDir();
    if (run === undefined) return; // not contained (a bare `vitest run`): nothing is counted, by design
    const file = expect.getState().testPath!;
    const before = fileCpuSeconds([file]).get(file) ?? 0;
    // 0.3 s of this process's own CPU (not of wall time: a loaded machine gives it less than that).
    const start = process.cpuUsage();
    const cpuMs = () => {
      const u = process.cpuUsage(start);
      return (u.user + u.system) / 1000;
    };
    const deadline = Date.now() + 20_000;
    while (cpuMs() < 300 && Date.now() < deadline) Math.sqrt(Math.random());
    expect(cpuMs()).toBeGreaterThanOrEqual(300);
    expect(fileCpuSeconds([file]).get(file)).toBeGreaterThan(before + 0.25);
  });
});
