import { defineConfig } from "vitest/config";
import LongestFirstSequencer from "./test/support/longest-first";

export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    // Engine and test-host suites drive real processes (pulumi, systemd-nspawn); they set their own
    // per-test timeouts. Three files at once on two cores: an engine or test-host file keeps only
    // 0.6-0.7 of a core busy over its span (it waits on its host, its deadlines, its simulator), so a
    // third fills the gaps. Beside a CPU-bound job the run took 1,504 s with three, against 1,750 s
    // with two and 1,645 s with four (more CPU spent on contention: docs/development.md).
    testTimeout: 60_000,
    hookTimeout: 600_000,
    maxWorkers: 3,
    // Longest files first (the last run's spans, else test/support/durations.json): the long engine and
    // test-host files then overlap the short ones instead of running alone at the end.
    sequence: { sequencer: LongestFirstSequencer },
    // Fails any test that holds its worker's event loop for long (test/support/event-loop-guard.ts);
    // counts each file's CPU, all it started included (test/support/file-cpu.ts).
    setupFiles: ["./test/support/event-loop-guard.ts", "./test/support/file-cpu.ts"],
    // The console report, a JSON one, and last a plain summary: the counts and every failure's
    // cause in a few lines, so a log's tail (all CI shows) holds them all.
    reporters: ["default", "json", "./test/support/report-summary.ts"],
    outputFile: { json: ".gpuhost/vitest-report.json" },
  },
});
