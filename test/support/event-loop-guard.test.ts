/**
 * The guard against a test that holds its worker's event loop (test/support/event-loop-guard.ts):
 * the cause of the README's `npm test` exiting 1 on a loaded fresh machine with every test green
 * (vitest 3's worker RPC timed out while a test ran a synchronous child process for minutes). Run
 * here on a fixture under the project's own vitest, with the bound lowered so it takes seconds.
 */
import * as fs from "node:fs/promises";
import * as os from "node:os";
import * as path from "node:path";
import { describe, expect, it } from "vitest";
import { run } from "./run";

const ROOT = path.resolve(__dirname, "../..");

describe("the event-loop guard", () => {
  it("fails a test that blocks its worker (a synchronous child process) and names it; an async one passes", async () => {
    const dir = await fs.mkdtemp(path.join(os.tmpdir(), "gpuhost-guard-"));
    try {
      await fs.writeFile(
        path.join(dir, "fixture.test.ts"),
        `import { spawn, spawnSync } from "node:child_process";
import { it } from "vitest";
it("blocks", () => { spawnSync("sleep", ["3"]); });
it("waits without blocking", () => new Promise((r) => spawn("sleep", ["3"]).on("close", r)));
`,
      );
      // The project's setup file and closing reporter, as vitest.config.ts names them.
      await fs.writeFile(
        path.join(dir, "vitest.config.mjs"),
        `export default { test: { setupFiles: ${JSON.stringify([path.join(ROOT, "test/support/event-loop-guard.ts")])}, reporters: ${JSON.stringify([path.join(ROOT, "test/support/report-summary.ts")])} } };\n`,
      );
      const log = path.join(dir, "delays.tsv");
      const r = await run(
        process.execPath,
        [path.join(ROOT, "node_modules", "vitest", "vitest.mjs"), "run", "--root", dir],
        {
          cwd: dir,
          timeout: 120_000,
          env: { ...process.env, GPUHOST_EVENT_LOOP_BOUND_MS: "1500", GPUHOST_EVENT_LOOP_LOG: log },
        },
      );
      expect(r.status, r.stdout + r.stderr).toBe(1);
      expect(r.stdout).toContain("1 passed, 1 failed, 0 skipped");
      expect(r.stdout).toMatch(
        /fixture\.test\.ts > blocks[^\n]*\n {4}Error: the test "blocks" blocked its vitest worker's event loop for [3-9]\.\d s \(bound 1\.5 s\)/,
      );
      // The file's line: its worst stall, in ms, then the file.
      const [worst, file] = (await fs.readFile(log, "utf8")).trim().split("\t");
      expect(Number(worst)).toBeGreaterThanOrEqual(2900);
      expect(file).toBe("fixture.test.ts");
    } finally {
      await fs.rm(dir, { recursive: true, force: true });
    }
  }, 120_000);
});
