/**
 * Where a test run's time went, per file, from vitest's own JSON reporter (vitest.config.ts writes
 * `.gpuhost/vitest-report.json` on every `npm test`): the run's wall span, the sum of the files' own
 * spans (over the span when files ran side by side), and the slowest files with their longest tests.
 *
 *   npm run tsx -- bench/suite-timing.ts [REPORT.json] [--top N] [--write-durations]
 *
 * Where the run left `.gpuhost/vitest-file-cpu.json` beside the report (the closing summary writes it),
 * the files that used the most CPU follow.
 *
 * `--write-durations` also writes each file's span into test/support/durations.json, the snapshot
 * the suite's sequencer (test/support/longest-first.ts) orders a fresh clone's run by, longest first.
 *
 * A file's span is from its first test's start to its end as the reporter recorded them; a file whose
 * `beforeAll` boots a host or runs `pulumi up` shows that time in its span, not in any one test.
 */
import * as fs from "node:fs";
import * as path from "node:path";
import { relativeTestPath, SNAPSHOT, spansOfReport } from "../test/support/durations";
import { FILE_CPU_JSON } from "../test/support/report-summary";

interface AssertionResult {
  title: string;
  fullName?: string;
  status: string;
  duration?: number | null;
}

interface FileResult {
  name: string;
  startTime: number;
  endTime: number;
  status: string;
  assertionResults: AssertionResult[];
}

interface Report {
  startTime: number;
  numPassedTests: number;
  numFailedTests: number;
  numPendingTests: number;
  testResults: FileResult[];
}

/** One file's line of the table: its span, its share of the run, and its slowest test. */
export interface FileTiming {
  file: string;
  seconds: number;
  tests: number;
  slowest: { title: string; seconds: number } | null;
}

/** The per-file timings of REPORT, slowest first, and the run's wall span and summed file time. */
export function fileTimings(report: Report, root: string): { wall: number; summed: number; files: FileTiming[] } {
  const files = report.testResults.map((f): FileTiming => {
    const timed = f.assertionResults.filter((a) => typeof a.duration === "number");
    const slowest = timed.reduce<AssertionResult | null>(
      (best, a) => (best === null || (a.duration ?? 0) > (best.duration ?? 0) ? a : best),
      null,
    );
    return {
      file: relativeTestPath(f.name, root),
      seconds: Math.max(0, f.endTime - f.startTime) / 1000,
      tests: f.assertionResults.length,
      slowest:
        slowest === null ? null : { title: slowest.fullName ?? slowest.title, seconds: (slowest.duration ?? 0) / 1000 },
    };
  });
  files.sort((a, b) => b.seconds - a.seconds);
  const end = Math.max(report.startTime, ...report.testResults.map((f) => f.endTime));
  return {
    wall: (end - report.startTime) / 1000,
    summed: files.reduce((s, f) => s + f.seconds, 0),
    files,
  };
}

function main(): void {
  const args = process.argv.slice(2);
  const topAt = args.indexOf("--top");
  const top = topAt >= 0 ? Number(args[topAt + 1]) : 15;
  const file =
    args.find((a, i) => !a.startsWith("--") && (topAt < 0 || i !== topAt + 1)) ?? ".gpuhost/vitest-report.json";
  if (!Number.isInteger(top) || top < 1) throw new Error("--top takes a positive whole number");
  if (!fs.existsSync(file)) {
    console.error(`${file} does not exist: run \`npm test\` first (vitest.config.ts writes it).`);
    process.exitCode = 2;
    return;
  }
  const report = JSON.parse(fs.readFileSync(file, "utf8")) as Report;
  const { wall, summed, files } = fileTimings(report, process.cwd());
  console.log(
    `${report.testResults.length} files, ${report.numPassedTests} passed, ${report.numFailedTests} failed, ` +
      `${report.numPendingTests} skipped; wall ${wall.toFixed(0)} s, files' own time summed ${summed.toFixed(0)} s ` +
      `(${(summed / Math.max(wall, 1)).toFixed(2)} files at once on average)`,
  );
  console.log(`\nslowest ${Math.min(top, files.length)} files:`);
  for (const f of files.slice(0, top)) {
    const slow = f.slowest === null ? "" : `; longest test ${f.slowest.seconds.toFixed(0)} s: ${f.slowest.title}`;
    console.log(`${f.seconds.toFixed(0).padStart(6)} s  ${f.file} (${f.tests} tests${slow})`);
  }
  printCpu(path.join(path.dirname(file), path.basename(FILE_CPU_JSON)), files, top);
  if (args.includes("--write-durations")) writeDurations(file);
}

/**
 * The files that used the most CPU (the run's closing summary writes CPU_JSON beside the report: each
 * file's own cgroup, test/support/file-cpu.ts), each with its span: CPU near the span is a file that
 * computes, far below it one that waits.
 */
function printCpu(cpuJson: string, files: FileTiming[], top: number): void {
  if (!fs.existsSync(cpuJson)) return;
  const cpu = JSON.parse(fs.readFileSync(cpuJson, "utf8")) as Record<string, number>;
  const span = new Map(files.map((f) => [f.file, f.seconds]));
  const rows = Object.entries(cpu).sort((a, b) => b[1] - a[1]);
  const total = rows.reduce((s, [, c]) => s + c, 0);
  console.log(`\nmost CPU of ${rows.length} files (${total.toFixed(0)} s in all, from ${cpuJson}):`);
  for (const [f, c] of rows.slice(0, top)) {
    const s = span.get(f);
    const share = s === undefined || s < 1 ? "" : `, ${(c / s).toFixed(2)} cores over its span of ${s.toFixed(0)} s`;
    console.log(`${c.toFixed(0).padStart(6)} s  ${f}${share}`);
  }
}

/** The snapshot of each file's span (whole seconds, sorted by path) the sequencer falls back on. */
function writeDurations(report: string): void {
  const spans = spansOfReport(report);
  const rounded = Object.fromEntries(
    Object.keys(spans)
      .sort()
      .map((f) => [f, Math.round(spans[f])]),
  );
  fs.writeFileSync(SNAPSHOT, `${JSON.stringify(rounded, null, 2)}\n`);
  console.log(`\nwrote ${Object.keys(rounded).length} files' spans to ${path.relative(process.cwd(), SNAPSHOT)}`);
}

if (require.main === module) main();
