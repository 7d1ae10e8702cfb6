/** What the interrupt tests read of the processes a run started, from /proc. */
import * as fs from "node:fs";

/** Every descendant of PID, read from /proc (pid -> command line). */
export function descendants(pid: number): Map<number, string> {
  const children = new Map<number, number[]>();
  for (const entry of fs.readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = fs.readFileSync(`/proc/${entry}/stat`, "utf8");
      const ppid = Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]);
      children.set(ppid, [...(children.get(ppid) ?? []), Number(entry)]);
    } catch {
      // gone meanwhile
    }
  }
  const found = new Map<number, string>();
  const visit = (p: number) => {
    for (const c of children.get(p) ?? []) {
      let cmd: string;
      try {
        cmd = fs.readFileSync(`/proc/${c}/cmdline`, "utf8").split("\0").join(" ").trim();
      } catch {
        continue;
      }
      found.set(c, cmd);
      visit(c);
    }
  };
  visit(pid);
  return found;
}

/** PID runs (and is no zombie). */
export const alive = (pid: number): boolean => {
  try {
    process.kill(pid, 0);
    const state = fs.readFileSync(`/proc/${pid}/stat`, "utf8");
    return !/^\d+ \(.*\) Z/.test(state);
  } catch {
    return false;
  }
};

/** The processes of PROCESSES still alive after up to SECONDS, as "pid command line". */
export async function leftBehind(processes: Map<number, string>, seconds: number): Promise<string[]> {
  for (let i = 0; i < seconds * 10 && [...processes.keys()].some(alive); i++)
    await new Promise((r) => setTimeout(r, 100));
  return [...processes].filter(([pid]) => alive(pid)).map(([pid, cmd]) => `${pid} ${cmd}`);
}

/** SIGKILL to every PID still there (a test's cleanup). */
export function killAll(pids: Iterable<number>): void {
  for (const pid of pids) {
    try {
      process.kill(pid, "SIGKILL");
    } catch {
      // already gone
    }
  }
}
