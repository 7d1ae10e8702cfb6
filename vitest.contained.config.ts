import { defineConfig } from "vitest/config";

// The run test/testhost/contained.test.ts starts under engine/contain.sh and kills: one file that
// starts the suite's real parts and waits. No JSON report: it would replace the last run's.
export default defineConfig({
  test: {
    include: ["test/testhost/contained-parts.fixture.ts"],
    testTimeout: 3_600_000,
    hookTimeout: 600_000,
    maxWorkers: 1,
    reporters: ["default"],
  },
});
