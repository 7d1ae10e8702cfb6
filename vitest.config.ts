import { defineConfig } from "vitest/config";
import LongestFirstSequencer from "./test/support/longest-first";

export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    // Engine and test-host suites drive real processes (pulumi, systemd-nspawn); they set their own
    // per-test timeouts. Three files at once on two cores: with two, a fresh-clone run beside a
    // CPU-bound job kept 1.16 cores busy (1,750 s); with three, 1.41 cores and 1,504 s, green
    // (docs/development.md): one file's waits overlap the others' work, and the run's share of a
    // busy machine grows.
    testTimeout: 60_000,
    hookTimeout: 600_000,
    maxWorkers: 3,
    // Longest files first (the last run's spans, else test/support/durations.json): the long engine and
    // test-host files then overlap the short ones instead of running alone at the end.
    sequence: { sequencer: LongestFirstSequencer },
    // Fails any test that holds its worker's event loop for long (test/support/event-loop-guard.ts).
    setupFiles: ["./test/support/event-loop-guard.ts"],
    // The console report, a JSON one, and last a plain summary: the counts and every failure's
    // cause in a few lines, so a log's tail (all CI shows) holds them all.
    reporters: ["default", "json", "./test/support/report-summary.ts"],
    outputFile: { json: ".gpuhost/vitest-report.json" },
  },
});
