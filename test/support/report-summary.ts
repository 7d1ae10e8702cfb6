/**
 * The closing lines of a test run (a vitest reporter, the last in vitest.config.ts): the counts, then
 * every failure with the first lines of its message and its last error lines. CI keeps only the
 * tail of a run's log, and vitest prints its failures in full one after another, so with several
 * failures only the last one was readable there; this puts each failure's cause in the tail, in
 * order, briefly. Hook errors are included: a failed beforeAll skips its tests and vitest's JSON
 * report leaves its error out.
 */
import * as fs from "node:fs";
import * as path from "node:path";
import type { Reporter, TestModule } from "vitest/node";
import { type CpuSample, cpuLine, cpuSample, fileCpuSeconds } from "./run-cpu";

/** One failure: where, what, how long it took, its message. */
export interface Failure {
  where: string;
  name: string;
  durationMs?: number;
  message: string;
}

export interface Counts {
  passed: number;
  failed: number;
  skipped: number;
}

// eslint-disable-next-line no-control-regex -- ANSI colour codes are what this strips
const ANSI = /\u001b\[[0-9;]*m/g;
/** A failure's first lines, which say what failed. */
const HEAD_LINES = 4;
/** Then its last lines that name an error: a command's output (pulumi's) ends with its diagnostics. */
const ERROR_LINES = 8;
const ERRORISH = /error|fail|exited|expected|refus|timed? ?out|never|cannot|denied|no such/i;
/** The whole summary's bound, in characters: CI shows about the last 5,000 of a run's log. */
const MAX_CHARS = 4000;

/**
 * One failure message, briefly: without colour codes and stack frames, its first lines, then its last
 * lines that name an error, then how many lines were left out.
 */
function brief(message: string): string {
  const lines = message
    .replace(ANSI, "")
    .split("\n")
    .filter((l) => l.trim() !== "" && !/^\s+at /.test(l) && !/^\s*❯ /.test(l));
  const head = lines.slice(0, HEAD_LINES);
  const errors = lines
    .slice(HEAD_LINES)
    .filter((l) => ERRORISH.test(l))
    .slice(-ERROR_LINES);
  const kept = [...head, ...(errors.length > 0 ? ["…", ...errors] : [])];
  const left = lines.length - head.length - errors.length;
  if (left > 0) kept.push(`(${left} more line(s) in the full log)`);
  return kept.map((l) => `    ${l.length > 300 ? `${l.slice(0, 300)}…` : l}`).join("\n");
}

/** The summary of a run: COUNTS, then each of FAILURES briefly, bounded as a whole. */
export function summarize(counts: Counts, failures: Failure[]): string {
  const out = [`${counts.passed} passed, ${counts.failed} failed, ${counts.skipped} skipped`];
  if (failures.length === 0) return out[0];
  out.push(`failures, in the order they were reported (${failures.length}):`);
  let used = out.join("\n").length;
  for (const [i, f] of failures.entries()) {
    const took = f.durationMs === undefined ? "" : ` (${(f.durationMs / 1000).toFixed(1)} s)`;
    const title = `[${i + 1}/${failures.length}] ${f.where}${f.name ? ` > ${f.name}` : ""}${took}`;
    const entry = `${title}\n${brief(f.message)}`;
    if (used + entry.length > MAX_CHARS) {
      out.push(`${title} (message left out: the summary is bounded)`);
      continue;
    }
    out.push(entry);
    used += entry.length + 1;
  }
  return out.join("\n");
}

/** Where the closing summary leaves each file's CPU seconds (bench/suite-timing.ts reads it beside the JSON report). */
export const FILE_CPU_JSON = path.join(".gpuhost", "vitest-file-cpu.json");

/**
 * The files that used the most CPU, in one line, after writing every file's seconds to FILE_CPU_JSON;
 * nothing when the run counted none (not contained, or no writable cgroup hierarchy).
 */
function fileCpuLine(modules: ReadonlyArray<TestModule>, top = 5): string {
  const seconds = fileCpuSeconds(modules.map((m) => m.moduleId));
  if (seconds.size === 0) return "";
  const rows = [...seconds]
    .map(([f, s]): [string, number] => [path.relative(process.cwd(), f), s])
    .sort((a, b) => b[1] - a[1]);
  try {
    fs.mkdirSync(path.dirname(FILE_CPU_JSON), { recursive: true });
    fs.writeFileSync(FILE_CPU_JSON, `${JSON.stringify(Object.fromEntries(rows), null, 1)}\n`);
  } catch {
    // The line below still says it.
  }
  const named = rows.slice(0, top).map(([f, s]) => `${f} ${s.toFixed(0)} s`);
  return `the most CPU (every file's in ${FILE_CPU_JSON}): ${named.join(", ")}\n`;
}

type ReportedError = { name?: string; message?: string };
const text = (errors: ReadonlyArray<ReportedError> | undefined) =>
  (errors ?? []).map((e) => `${e.name ?? "Error"}: ${e.message ?? JSON.stringify(e)}`).join("\n");

/**
 * Prints summarize() of the run when it ends. vitest calls each reporter's onTestRunEnd in the order
 * vitest.config.ts lists them, and this one is last, so it comes after the default reporter's failure
 * details and summary and is the log's last lines.
 */
export default class FailureSummary implements Reporter {
  private started: CpuSample | undefined;

  onInit(): void {
    this.started = cpuSample();
  }

  onTestRunEnd(modules: ReadonlyArray<TestModule>, unhandled: ReadonlyArray<ReportedError>): void {
    const counts: Counts = { passed: 0, failed: 0, skipped: 0 };
    const failures: Failure[] = [];
    for (const m of modules) {
      const where = path.relative(process.cwd(), m.moduleId);
      if (m.errors().length > 0) failures.push({ where, name: "", message: text(m.errors()) });
      for (const s of m.children.allSuites()) {
        if (s.errors().length > 0)
          failures.push({ where, name: `${s.fullName} (a hook of the suite)`, message: text(s.errors()) });
      }
      for (const t of m.children.allTests()) {
        const r = t.result();
        if (r.state === "passed") counts.passed++;
        else if (r.state === "failed") {
          counts.failed++;
          failures.push({ where, name: t.fullName, durationMs: t.diagnostic()?.duration, message: text(r.errors) });
        } else counts.skipped++;
      }
    }
    for (const e of unhandled) failures.push({ where: "unhandled error", name: "", message: text([e]) });
    const cpu = this.started ? `${cpuLine(this.started, cpuSample())}\n${fileCpuLine(modules)}` : "";
    console.log(`\n${cpu}${summarize(counts, failures)}`);
  }
}
