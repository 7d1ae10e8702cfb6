/**
 * run(): spawnSync's answer without blocking the test's worker. A synchronous child process stops the
 * worker's event loop for as long as the child runs (minutes for an engine or a build under load):
 * the worker then answers nothing and enforces no timeout (under vitest 3 its RPC timed out and failed
 * a green run); test/support/event-loop-guard.ts fails a test that does it.
 */
import { spawn, type SpawnOptions } from "node:child_process";

export interface RunResult {
  /** The exit code, or null when a signal ended the child (then signal says which). */
  status: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
  /** The spawn error (ENOENT, ...), as spawnSync reports it. */
  error?: Error;
}

export interface RunOptions extends Pick<SpawnOptions, "cwd" | "env"> {
  /** Written to the child's stdin, which is then closed; without it stdin is /dev/null. */
  input?: string;
  /** SIGKILL after this many ms (a bound that really fires); default 10 minutes. */
  timeout?: number;
  /** stderr goes to this process's stderr instead of being captured. */
  inheritStderr?: boolean;
}

/** Runs FILE with ARGS to its end and resolves with what it printed; never rejects. */
export function run(file: string, args: readonly string[], opts: RunOptions = {}): Promise<RunResult> {
  return new Promise((resolve) => {
    const child = spawn(file, args, {
      cwd: opts.cwd,
      env: opts.env,
      stdio: [opts.input === undefined ? "ignore" : "pipe", "pipe", opts.inheritStderr ? "inherit" : "pipe"],
    });
    let stdout = "";
    let stderr = "";
    let error: Error | undefined;
    child.stdout?.setEncoding("utf8").on("data", (d: string) => (stdout += d));
    child.stderr?.setEncoding("utf8").on("data", (d: string) => (stderr += d));
    const timer = setTimeout(() => child.kill("SIGKILL"), opts.timeout ?? 600_000);
    child.on("error", (e) => (error = e));
    child.on("close", (status, signal) => {
      clearTimeout(timer);
      resolve({ status, signal, stdout, stderr, ...(error ? { error } : {}) });
    });
    if (opts.input !== undefined) {
      // A child that exits without reading its stdin must not fail the run with EPIPE.
      child.stdin?.on("error", () => undefined);
      child.stdin?.end(opts.input);
    }
  });
}

/** run(), then the stdout of a child that exited 0; otherwise an error naming the command and its stderr. */
export async function runOk(file: string, args: readonly string[], opts: RunOptions = {}): Promise<string> {
  const r = await run(file, args, opts);
  if (r.status !== 0)
    throw new Error(
      `${[file, ...args].join(" ")} ${r.error ? `failed: ${r.error.message}` : `exited ${r.status ?? r.signal}`}: ${r.stderr.slice(-2000)}`,
    );
  return r.stdout;
}

/**
 * shellcheck's findings on FILES at style severity ("" when clean), as the script tests check them;
 * throws when shellcheck is not installed. BASH: check as bash whatever the shebang says.
 */
export async function shellcheckFindings(files: readonly string[], opts: { cwd?: string; bash?: boolean } = {}) {
  const r = await run("shellcheck", [...(opts.bash ? ["--shell=bash"] : []), "--severity=style", ...files], {
    cwd: opts.cwd,
    timeout: 300_000,
  });
  if (r.error) throw new Error(`shellcheck is not installed (apt-get install -y shellcheck): ${r.error.message}`);
  const findings = r.stdout + r.stderr;
  // A non-zero exit with nothing printed is a failure too (a file it could not read says so on stderr).
  return findings === "" && r.status !== 0 ? `shellcheck exited ${r.status ?? r.signal}` : findings;
}
