/** The names of the per-file cgroups (test/support/file-cpu.ts makes them, run-cpu.ts reads them). */
import * as crypto from "node:crypto";
import * as path from "node:path";

/** A short stable key of a test file's absolute path (a cgroup's name cannot hold a path). */
export function fileKey(file: string): string {
  return crypto.createHash("sha256").update(path.resolve(file)).digest("hex").slice(0, 16);
}

/** The name of FILE's cgroup below the run's, made by the worker PID that runs it. */
export function fileCgroupName(file: string, pid: number): string {
  return `gpuhost-file-${fileKey(file)}-${pid}`;
}
