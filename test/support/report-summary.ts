/**
 * The closing lines of a CI run, read from vitest's JSON report (.gpuhost/vitest-report.json): the
 * counts, then each failure with the first lines of its message. CI keeps only the tail of a run's
 * log, and vitest prints its failures in full one after another, so with several failures only the
 * last one was readable; this puts every failure's cause in the tail, in order, briefly.
 *
 * Usage: node dist/test/support/report-summary.js REPORT.json
 */
import { readFileSync } from "node:fs";
import * as path from "node:path";

interface AssertionResult {
  fullName: string;
  status: string;
  duration?: number | null;
  failureMessages?: string[];
}

interface FileResult {
  name: string;
  status: string;
  message?: string;
  assertionResults: AssertionResult[];
}

export interface VitestJsonReport {
  numPassedTests: number;
  numFailedTests: number;
  numPendingTests: number;
  numTodoTests: number;
  testResults: FileResult[];
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

/** The summary of REPORT, its paths relative to ROOT. */
export function summarize(report: VitestJsonReport, root: string): string {
  const out = [
    `${report.numPassedTests} passed, ${report.numFailedTests} failed, ${report.numPendingTests + report.numTodoTests} skipped`,
  ];
  const failures: string[] = [];
  for (const file of report.testResults) {
    const rel = path.relative(root, file.name);
    const failed = file.assertionResults.filter((a) => a.status === "failed");
    // A file can fail with no failed test: a hook, an import or an unhandled error.
    if (file.status === "failed" && file.message) failures.push(`${rel}: ${brief(file.message).trimStart()}`);
    for (const a of failed) {
      const took = a.duration == null ? "" : ` (${(a.duration / 1000).toFixed(1)} s)`;
      failures.push(`${rel} > ${a.fullName}${took}\n${brief((a.failureMessages ?? []).join("\n"))}`);
    }
  }
  if (failures.length > 0) {
    out.push(`failures, in the order they were reported (${failures.length}):`);
    let used = out.join("\n").length;
    for (const [i, f] of failures.entries()) {
      const entry = `[${i + 1}/${failures.length}] ${f}`;
      if (used + entry.length > MAX_CHARS) {
        out.push(`[${i + 1}/${failures.length}] ${f.split("\n")[0]} (message left out: the summary is bounded)`);
        continue;
      }
      out.push(entry);
      used += entry.length + 1;
    }
  }
  return out.join("\n");
}

if (require.main === module) {
  const file = process.argv[2];
  if (!file) {
    console.error("usage: node dist/test/support/report-summary.js REPORT.json");
    process.exit(2);
  }
  let report: VitestJsonReport;
  try {
    report = JSON.parse(readFileSync(file, "utf8")) as VitestJsonReport;
  } catch (e) {
    console.error(`no test report to summarize at ${file}: ${(e as Error).message}`);
    process.exit(1);
  }
  console.log(summarize(report, process.cwd()));
}
