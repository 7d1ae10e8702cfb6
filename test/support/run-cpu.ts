/**
 * How busy a test run kept the machine: the CPU time of the run's own processes (the cgroup that
 * engine/contain.sh makes for it: every simulator, engine, plugin and test host it started, gone
 * or not) and of the whole machine (others' work included), between two samples. The closing
 * summary prints it, so a run's wall time comes with whether it waited or computed (issue 39).
 */
import * as fs from "node:fs";
import * as os from "node:os";
import { fileKey } from "./file-key";

export interface CpuSample {
  atMs: number;
  /** The run's cgroup's usage_usec; undefined outside a contained run (its cgroup would be the machine's). */
  runUsec?: number;
  machineBusyTicks: number;
  machineTotalTicks: number;
}

/** The cgroup-v2 hierarchies' mount points: unified, or a hybrid machine's /sys/fs/cgroup/unified. */
export const CGROUP_ROOTS = ["/sys/fs/cgroup/unified", "/sys/fs/cgroup"];

/**
 * The folder of the contained run's own cgroup that this process is in (engine/contain.sh names it
 * gpuhost-run-...; the nearest where runs nest, as the contain tests' do, so a run started inside a
 * test file counts, and keeps, its own), or undefined outside one.
 */
export function runCgroupDir(): string | undefined {
  let rel: string | undefined;
  try {
    rel = /^0::(.*)$/m.exec(fs.readFileSync("/proc/self/cgroup", "utf8"))?.[1];
  } catch {
    return undefined;
  }
  const at = rel?.lastIndexOf("/gpuhost-run-") ?? -1;
  if (rel === undefined || at < 0) return undefined;
  const end = rel.indexOf("/", at + 1);
  const runRel = end < 0 ? rel : rel.slice(0, end);
  return CGROUP_ROOTS.map((root) => `${root}${runRel}`).find((dir) => fs.existsSync(`${dir}/cpu.stat`));
}

/** The usage_usec of the cgroup in DIR, or undefined when it cannot be read. */
export function cgroupUsec(dir: string): number | undefined {
  try {
    const usec = /^usage_usec (\d+)$/m.exec(fs.readFileSync(`${dir}/cpu.stat`, "utf8"))?.[1];
    return usec === undefined ? undefined : Number(usec);
  } catch {
    return undefined;
  }
}

function runCgroupUsec(): number | undefined {
  const dir = runCgroupDir();
  return dir === undefined ? undefined : cgroupUsec(dir);
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

/**
 * The CPU seconds each of FILES used, from the cgroups test/support/file-cpu.ts made for them below
 * the run's (a file run twice, or in two workers, sums its cgroups); none for a file with no cgroup.
 */
export function fileCpuSeconds(
  files: readonly string[],
  run: string | undefined = runCgroupDir(),
): Map<string, number> {
  const out = new Map<string, number>();
  if (run === undefined) return out;
  let dirs: string[];
  try {
    dirs = fs.readdirSync(run).filter((d) => d.startsWith("gpuhost-file-"));
  } catch {
    return out;
  }
  for (const file of files) {
    const prefix = `gpuhost-file-${fileKey(file)}-`;
    let usec = 0;
    let seen = false;
    for (const d of dirs.filter((x) => x.startsWith(prefix))) {
      const u = cgroupUsec(`${run}/${d}`);
      if (u === undefined) continue;
      usec += u;
      seen = true;
    }
    if (seen) out.set(file, usec / 1e6);
  }
  return out;
}
