/**
 * Nothing lost, nothing twice, with a real process: `gpuhost job` started as its own process, killed
 * with SIGKILL at several moments (and once left with a torn last line, as a kill in the middle of a
 * write leaves it), interrupted once with SIGINT, and run again each time with the same command: at
 * the end every custom_id of the input is in the output or the errors file exactly once.
 */
import { type ChildProcess, spawn } from "node:child_process";
import * as fs from "node:fs";
import * as path from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { jobServer, type JobServer } from "./job-server";
import { recordedCounts, tempDir, writeInput } from "./helpers";

const repo = path.resolve(__dirname, "../..");
const N = 300;
let server: JobServer | null = null;
const children = new Set<ChildProcess>();
afterEach(async () => {
  for (const c of children) c.kill("SIGKILL");
  children.clear();
  await server?.stop();
  server = null;
});

function lines(file: string): number {
  return fs.existsSync(file) ? fs.readFileSync(file, "utf8").split("\n").length - 1 : 0;
}

/** The job as its own process; resolves with its exit status and stderr. */
function job(dir: string, url: string, at?: { lines: number; signal: NodeJS.Signals }) {
  const files = ["--input", path.join(dir, "in.jsonl"), "--output", path.join(dir, "out.jsonl")];
  const args = ["job", ...files, "--endpoint", url, "--concurrency", "8"];
  const child = spawn(
    process.execPath,
    ["--import", "tsx", path.join(repo, "cli/gpuhost.ts"), ...args, "--progress-every", "1"],
    {
      cwd: repo,
      stdio: ["ignore", "pipe", "pipe"],
    },
  );
  children.add(child);
  let err = "";
  child.stderr.on("data", (d) => (err += d));
  child.stdout.resume();
  const poll = at
    ? setInterval(() => {
        if (lines(path.join(dir, "out.jsonl")) >= at.lines) {
          clearInterval(poll);
          child.kill(at.signal);
        }
      }, 2)
    : undefined;
  return new Promise<{ code: number | null; signal: NodeJS.Signals | null; err: string }>((resolve) =>
    child.on("exit", (code, signal) => {
      clearInterval(poll);
      children.delete(child);
      resolve({ code, signal, err });
    }),
  );
}

describe("gpuhost job killed and run again", () => {
  it(
    "records every custom_id exactly once across SIGKILLs, a torn last line and a SIGINT",
    { timeout: 180_000 },
    async () => {
      server = await jobServer();
      server.delayMs = 15;
      const dir = tempDir();
      writeInput(path.join(dir, "in.jsonl"), N);
      const out = path.join(dir, "out.jsonl");
      for (const at of [40, 110]) {
        const r = await job(dir, server.url, { lines: at, signal: "SIGKILL" });
        expect(r.signal).toBe("SIGKILL");
      }
      // What a kill in the middle of a write leaves: half a line, no newline.
      const kept = lines(out);
      fs.appendFileSync(out, '{"id":"batch_req_torn","custom_id":"r-');
      const interrupted = await job(dir, server.url, { lines: kept + 60, signal: "SIGINT" });
      expect(interrupted.code).toBe(130);
      expect(interrupted.err).toMatch(/was torn \(no newline at its end\); cut off/);
      expect(interrupted.err).toMatch(/SIGINT: stopping/);
      const last = await job(dir, server.url);
      expect(last.code).toBe(0);
      expect(last.err).toMatch(/already recorded/);
      const counts = recordedCounts(dir);
      expect(counts.size).toBe(N);
      expect([...counts.entries()].filter(([, c]) => c !== 1)).toEqual([]);
      // The requests in flight at each stop were sent again: the server did at least the whole job.
      expect(server.answered).toBeGreaterThanOrEqual(N);
    },
  );
});
