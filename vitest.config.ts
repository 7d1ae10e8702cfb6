import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    // Engine and test-host suites drive real processes (pulumi, systemd-nspawn); they set their own
    // per-test timeouts. Files run in parallel only up to the machine's two cores.
    testTimeout: 60_000,
    hookTimeout: 600_000,
    maxWorkers: 2,
    // The console report, plus a JSON one that .ci/run turns into a plain "N passed, N failed" line.
    reporters: ["default", "json"],
    outputFile: { json: ".gpuhost/vitest-report.json" },
  },
});
