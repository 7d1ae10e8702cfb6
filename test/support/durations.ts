/**
 * Each test file's length in seconds, for the order test/support/longest-first.ts starts files in:
 * the last run's report on this checkout, the committed snapshot, or a guess from the file's folder.
 * No vitest import here: bench/suite-timing.ts (run by tsx) writes the snapshot with these.
 */
import * as fs from "node:fs";
import * as path from "node:path";

export const ROOT = path.resolve(__dirname, "../..");
export const REPORT = path.join(ROOT, ".gpuhost", "vitest-report.json");
export const SNAPSHOT = path.join(ROOT, "test", "support", "durations.json");

/** The folders of the slow real parts (engine/run.sh's quick tier leaves them out). */
const SLOW = ["test/engine/", "test/testhost/", "test/real-server/", "test/router/", "test/fleet-verification/"];
/** What a file of a slow folder with no recorded span counts as, in seconds: among the long ones. */
export const UNKNOWN_SLOW_SECONDS = 60;

/** NAME relative to ROOT; a file of another checkout (a fresh clone's report) from its test/ folder on. */
export function relativeTestPath(name: string, root = ROOT): string {
  const rel = path.relative(root, name);
  if (!rel.startsWith("..")) return rel;
  const at = name.indexOf("/test/");
  return at >= 0 ? name.slice(at + 1) : rel;
}

/** Seconds per file (paths relative to the checkout) from a vitest JSON report; {} when unreadable. */
export function spansOfReport(file: string, root = ROOT): Record<string, number> {
  try {
    const report = JSON.parse(fs.readFileSync(file, "utf8")) as {
      testResults?: { name: string; startTime: number; endTime: number }[];
    };
    const spans: Record<string, number> = {};
    for (const r of report.testResults ?? []) {
      spans[relativeTestPath(r.name, root)] = Math.max(0, r.endTime - r.startTime) / 1000;
    }
    return spans;
  } catch {
    return {};
  }
}

/** Seconds per file from the committed snapshot; {} when it is missing. */
export function snapshotSpans(file = SNAPSHOT): Record<string, number> {
  try {
    return JSON.parse(fs.readFileSync(file, "utf8")) as Record<string, number>;
  } catch {
    return {};
  }
}

/** FILES (relative paths, in vitest's order) longest first by KNOWN, then FALLBACK, then their folder. */
export function longestFirst(
  files: string[],
  known: Record<string, number>,
  fallback: Record<string, number> = {},
): string[] {
  const seconds = (f: string) =>
    known[f] ?? fallback[f] ?? (SLOW.some((s) => f.startsWith(s)) ? UNKNOWN_SLOW_SECONDS : 0);
  // Array.prototype.sort is stable: ties keep vitest's order.
  return [...files].sort((a, b) => seconds(b) - seconds(a));
}
