/**
 * How busy a test run kept the machine: the CPU time of the run's own processes (the cgroup that
 * engine/contain.sh makes for it: every simulator, engine, plugin and test host it started, gone
 * or not) and of the whole machine (others' work included), between two samples. The closing
 * summary prints it, so a run's wall time comes with whether it waited or computed (issue 39).
 */
import * as fs from "node:fs";
import * as os from "node:os";

export interface CpuSample {
  atMs: number;
  /** The run's cgroup's usage_usec; undefined outside a contained run (its cgroup would be the machine's). */
  runUsec?: number;
  machineBusyTicks: number;
  machineTotalTicks: number;
}

/** The cpu.stat of this process's cgroup when it is a contained run's own (engine/contain.sh names it gpuhost-run-...). */
function runCgroupUsec(): number | undefined {
  let rel: string | undefined;
  try {
    rel = /^0::(.*)$/m.exec(fs.readFileSync("/proc/self/cgroup", "utf8"))?.[1];
  } catch {
    return undefined;
  }
  if (!rel?.includes("/gpuhost-run-")) return undefined;
  for (const root of ["/sys/fs/cgroup/unified", "/sys/fs/cgroup"]) {
    try {
      const usec = /^usage_usec (\d+)$/m.exec(fs.readFileSync(`${root}${rel}/cpu.stat`, "utf8"))?.[1];
      if (usec) return Number(usec);
    } catch {
      // not this hierarchy
    }
  }
  return undefined;
}

/** The machine's busy and total ticks from /proc/stat's first line (busy: all but idle and iowait). */
function machineTicks(): { busy: number; total: number } {
  try {
    const fields = fs.readFileSync("/proc/stat", "utf8").split("\n")[0].trim().split(/\s+/).slice(1).map(Number);
    const total = fields.reduce((a, b) => a + b, 0);
    return { busy: total - (fields[3] ?? 0) - (fields[4] ?? 0), total };
  } catch {
    return { busy: 0, total: 0 };
  }
}

export function cpuSample(): CpuSample {
  const m = machineTicks();
  return { atMs: Date.now(), runUsec: runCgroupUsec(), machineBusyTicks: m.busy, machineTotalTicks: m.total };
}

/** One line: the wall time between A and B, the run's CPU time and the cores it kept busy, and the machine's. */
export function cpuLine(a: CpuSample, b: CpuSample, cores: number = os.cpus().length): string {
  const wall = (b.atMs - a.atMs) / 1000;
  const parts = [`wall ${wall.toFixed(0)} s`];
  if (a.runUsec !== undefined && b.runUsec !== undefined && wall > 0) {
    const cpu = (b.runUsec - a.runUsec) / 1e6;
    parts.push(
      `this run's processes used ${cpu.toFixed(0)} s of CPU (${(cpu / wall).toFixed(2)} of ${cores} cores on average)`,
    );
  }
  const total = b.machineTotalTicks - a.machineTotalTicks;
  if (total > 0) {
    const busy = (100 * (b.machineBusyTicks - a.machineBusyTicks)) / total;
    parts.push(`the machine's cores were ${busy.toFixed(0)} % busy (others' work included)`);
  }
  return `${parts.join("; ")}`;
}
