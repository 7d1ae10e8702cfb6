// The simulated systemd's lock and liveness check. systemd serialises jobs in one manager process;
// here every systemctl is its own process, so the commands that change state take one host-wide
// lock (an atomic mkdir naming its owner's pid); a lock whose owner died is taken over. Without it,
// `start` on an activating unit spawned a second supervisor and unit deletes raced daemon-reload.
import * as fs from "node:fs";
import * as path from "node:path";

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));
// A supervisor that has exited may linger as a zombie until its adoptive parent reaps it.
export const alive = (pid: number | undefined): boolean => {
  if (pid === undefined || !(pid > 0)) return false;
  try {
    process.kill(pid, 0);
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === "EPERM";
  }
  try {
    return !/^\d+ \(.*\) Z/.test(fs.readFileSync(`/proc/${pid}/stat`, "utf8"));
  } catch {
    return true; // no /proc (not Linux): trust kill(0)
  }
};
const LOCK_WAIT_MS = 120_000;

export async function withLock<T>(dir: string, fn: () => Promise<T>): Promise<T> {
  fs.mkdirSync(path.dirname(dir), { recursive: true });
  const until = Date.now() + LOCK_WAIT_MS;
  for (;;) {
    try {
      fs.mkdirSync(dir);
      fs.writeFileSync(path.join(dir, "pid"), String(process.pid));
      break;
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== "EEXIST") throw e;
      let owner = 0;
      try {
        owner = Number(fs.readFileSync(path.join(dir, "pid"), "utf8"));
      } catch {
        // Just created by another process, pid not written yet: wait for it.
      }
      if (owner > 0 && !alive(owner)) fs.rmSync(dir, { recursive: true, force: true });
      else if (Date.now() > until)
        throw new Error(`systemd manager lock ${dir} held by pid ${owner} for 120 s`, { cause: e });
      else await sleep(10 + Math.random() * 20);
    }
  }
  try {
    return await fn();
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}
