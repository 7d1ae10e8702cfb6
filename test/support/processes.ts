/** What the interrupt tests read of the processes a run started, from /proc, and how they start it. */
import { type ChildProcess, spawn } from "node:child_process";
import * as fs from "node:fs";
import * as path from "node:path";

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

/** Waits until OK holds, polling every 50 ms for up to BOUND_MS; throws naming WHAT, with OUT(), if it never does. */
export async function until(what: string, ok: () => boolean, out: () => string, boundMs = 120_000): Promise<void> {
  const deadline = Date.now() + boundMs;
  while (!ok() && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
  if (!ok()) throw new Error(`${what} never happened:\n${out()}`);
}

/** A command started by startUntil, with every process it had started when READY first held. */
export interface Started {
  child: ChildProcess;
  /** Its stdout and stderr so far. */
  out(): string;
  processes: Map<number, string>;
  /** Its exit code once it ended, or "hung" when it is still there a minute later. */
  ended(): Promise<number | null | "hung">;
}

/**
 * Starts CMD in a process group of its own (a shell's foreground job, so a signal to -PID is a
 * terminal's Ctrl-C) and resolves once READY(its pid) holds (within BOUND_MS), having read all it started.
 */
export async function startUntil(
  cmd: string,
  args: string[],
  opts: { cwd: string; env: NodeJS.ProcessEnv; boundMs?: number },
  ready: (pid: number) => boolean,
): Promise<Started> {
  const child = spawn(cmd, args, { cwd: opts.cwd, env: opts.env, stdio: ["ignore", "pipe", "pipe"], detached: true });
  let out = "";
  child.stdout.on("data", (b: Buffer) => (out += b.toString()));
  child.stderr.on("data", (b: Buffer) => (out += b.toString()));
  const exited = new Promise<number | null>((r) => child.on("close", (code) => r(code)));
  try {
    await until(
      `${path.basename(cmd)} ${args[0]} reaching its hang`,
      () => ready(child.pid!),
      () => out,
      opts.boundMs,
    );
  } catch (e) {
    killAll([child.pid!, ...descendants(child.pid!).keys()]);
    throw e;
  }
  // Everything it started, read while all of it runs.
  const processes = descendants(child.pid!);
  const ended = () => Promise.race([exited, new Promise<"hung">((r) => setTimeout(() => r("hung"), 60_000))]);
  return { child, out: () => out, processes, ended };
}
