import { defineConfig } from "vitest/config";

// The fast layer alone (`npm run test:unit`): Pulumi mock tests of each component's resource graph and
// arguments, no engine, no host, no build. `npm test` runs them too, with everything else.
export default defineConfig({
  test: {
    include: ["test/mocks/**/*.mock.test.ts"],
    testTimeout: 30_000,
    maxWorkers: 2,
  },
});
