/** Small process helpers the test host's builders share: run a command bounded, hold a file lock. */
import { spawn } from "node:child_process";
import { promises as fs, readFileSync } from "node:fs";

export interface RunResult {
  code: number;
  stdout: string;
  stderr: string;
}

export interface RunOptions {
  cwd?: string;
  env?: NodeJS.ProcessEnv;
  input?: string;
  /** The command is killed (SIGKILL) past this bound; a hung debootstrap must not hang CI. */
  timeoutMs?: number;
  /** Return non-zero exits instead of throwing. */
  allowFailure?: boolean;
}

/** Runs a command without a shell; throws with the stderr tail on failure unless allowFailure. */
export function run(cmd: string, args: string[], opts: RunOptions = {}): Promise<RunResult> {
  return new Promise((resolve, reject) => {
    const child = spawn(cmd, args, {
      cwd: opts.cwd,
      env: opts.env ?? process.env,
      stdio: [opts.input === undefined ? "ignore" : "pipe", "pipe", "pipe"],
    });
    let stdout = "";
    let stderr = "";
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      child.kill("SIGKILL");
    }, opts.timeoutMs ?? 120_000);
    child.stdout!.on("data", (d: Buffer) => (stdout += d.toString()));
    child.stderr!.on("data", (d: Buffer) => (stderr += d.toString()));
    child.on("error", (err) => {
      clearTimeout(timer);
      reject(new Error(`${cmd}: ${err.message}`));
    });
    child.on("close", (code, signal) => {
      clearTimeout(timer);
      const result = { code: code ?? (signal ? 128 : 1), stdout, stderr };
      if (timedOut)
        return reject(new Error(`${cmd} ${args.join(" ")}: timed out after ${opts.timeoutMs ?? 120_000} ms`));
      if (result.code !== 0 && !opts.allowFailure) {
        return reject(new Error(`${cmd} ${args.join(" ")} exited ${result.code}:\n${(stderr || stdout).slice(-4000)}`));
      }
      resolve(result);
    });
    if (child.stdin) {
      // a command that exits without reading its input must not crash the test process with EPIPE
      child.stdin.on("error", () => undefined);
      child.stdin.end(opts.input);
    }
  });
}

function pidAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/**
 * Runs fn while holding an exclusive lock (a directory made with mkdir, which is atomic). A lock
 * left by a dead process is taken over, so a crashed build never blocks the next CI run.
 */
export async function withLock<T>(lockPath: string, waitMs: number, fn: () => Promise<T>): Promise<T> {
  const deadline = Date.now() + waitMs;
  for (;;) {
    try {
      await fs.mkdir(lockPath);
      await fs.writeFile(`${lockPath}/pid`, String(process.pid));
      break;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== "EEXIST") throw err;
      let owner = 0;
      try {
        owner = Number(readFileSync(`${lockPath}/pid`, "utf8"));
      } catch {
        // the owner is between mkdir and writing its pid: wait for it
      }
      if (owner > 0 && !pidAlive(owner)) {
        await fs.rm(lockPath, { recursive: true, force: true });
        continue;
      }
      if (Date.now() > deadline)
        throw new Error(`timed out waiting for lock ${lockPath} (held by pid ${owner})`, { cause: err });
      await new Promise((r) => setTimeout(r, 500));
    }
  }
  try {
    return await fn();
  } finally {
    await fs.rm(lockPath, { recursive: true, force: true });
  }
}
