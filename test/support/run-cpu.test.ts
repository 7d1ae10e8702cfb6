import { describe, expect, it } from "vitest";
import { cpuLine, cpuSample } from "./run-cpu";

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
