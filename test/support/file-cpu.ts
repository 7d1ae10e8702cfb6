/**
 * A setup file of every test file (vitest.config.ts): moves the worker that runs the file into a
 * cgroup of the file's own below the run's (engine/contain.sh makes that one), so everything the file
 * starts (the engine and its plugins, simulators, a test host, llama-server) is counted against it,
 * detached or not, until it exits. The closing summary reads the counts (fileCpuSeconds) and names the
 * files that used the most CPU: on two shared cores a run cannot end before its CPU time divided by
 * the share it gets, so that, not a file's wall span, is where a shorter run comes from (issue 39).
 * Outside a contained run, or where the hierarchy is not writable, it does nothing.
 */
import * as fs from "node:fs";
import * as path from "node:path";
import { expect } from "vitest";
import { fileCgroupName } from "./file-key";
import { runCgroupDir } from "./run-cpu";

// At the setup file's load, before the test file itself is imported: its imports count as its own.
enterFileCgroup(runCgroupDir(), expect.getState().testPath);

function enterFileCgroup(run: string | undefined, file: string | undefined): void {
  if (run === undefined || typeof file !== "string") return;
  const dir = path.join(run, fileCgroupName(file, process.pid));
  try {
    fs.mkdirSync(dir, { recursive: true });
    fs.writeFileSync(path.join(dir, "cgroup.procs"), String(process.pid));
  } catch {
    // Not writable here (not root, or no such hierarchy): the file's CPU goes uncounted, nothing else changes.
  }
}
