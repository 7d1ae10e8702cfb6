/** The closing summary of a test run: every failure's cause, hook errors too, in a bounded tail. */
import { spawnSync } from "node:child_process";
import { promises as fs } from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { describe, expect, it } from "vitest";
import { summarize } from "./report-summary";

const ROOT = path.resolve(__dirname, "..", "..");

describe("summarize", () => {
  it("all green: the counts alone", () => {
    expect(summarize({ passed: 5, failed: 0, skipped: 2 }, [])).toBe("5 passed, 0 failed, 2 skipped");
  });

  it("every failure in order, without colours or stack frames", () => {
    const s = summarize({ passed: 1, failed: 2, skipped: 0 }, [
      { where: "test/a.test.ts", name: "x (a hook of the suite)", message: "beforeAll hook failed" },
      {
        where: "test/a.test.ts",
        name: "x a first",
        durationMs: 2500,
        message: "\u001b[31mError: pulumi up exited 1\u001b[39m\n    at y (/r/test/a.test.ts:3:4)",
      },
      { where: "test/b.test.ts", name: "b second", message: "boom" },
    ]);
    expect(s).toBe(
      [
        "1 passed, 2 failed, 0 skipped",
        "failures, in the order they were reported (3):",
        "[1/3] test/a.test.ts > x (a hook of the suite)",
        "    beforeAll hook failed",
        "[2/3] test/a.test.ts > x a first (2.5 s)",
        "    Error: pulumi up exited 1",
        "[3/3] test/b.test.ts > b second",
        "    boom",
      ].join("\n"),
    );
  });

  it("a long message keeps its head and its last error lines; the whole stays bounded, naming what it left out", () => {
    const pulumiOut = [
      "Error: pulumi up exited 255",
      "Updating (testhost):",
      ...Array.from({ length: 200 }, (_, i) => `    + resource ${i} creating`),
      "    error: the toolkit probe failed: nvcc is missing",
      "Resources:",
      "    3 unchanged",
    ].join("\n");
    const one = summarize({ passed: 0, failed: 1, skipped: 0 }, [
      { where: "c.test.ts", name: "t", message: pulumiOut },
    ]);
    expect(one).toContain("    Error: pulumi up exited 255\n    Updating (testhost):");
    expect(one).toContain(
      "    …\n        error: the toolkit probe failed: nvcc is missing\n    (200 more line(s) in the full log)",
    );
    const many = Array.from({ length: 40 }, (_, i) => ({ where: "c.test.ts", name: `t${i}`, message: pulumiOut }));
    const s = summarize({ passed: 0, failed: 40, skipped: 0 }, many);
    expect(s.length).toBeLessThan(6000);
    expect(s).toContain("[40/40] c.test.ts > t39 (message left out: the summary is bounded)");
  });
});

describe("the reporter under vitest", () => {
  it("names a failed test and a failed beforeAll, whose tests vitest only counts as skipped", async () => {
    const dir = await fs.mkdtemp(path.join(os.tmpdir(), "gpuhost-summary-"));
    try {
      const file = path.join(dir, "fixture.test.ts");
      await fs.writeFile(
        file,
        `import { beforeAll, describe, expect, it } from "vitest";
describe("outer", () => {
  it("fails", () => expect(1).toBe(2));
  describe("inner", () => {
    beforeAll(() => { throw new Error("the stack never converged"); });
    it("skipped one", () => undefined);
  });
});
`,
      );
      const r = spawnSync(
        process.execPath,
        [
          path.join(ROOT, "node_modules", "vitest", "vitest.mjs"),
          "run",
          "--root",
          dir,
          "--reporter",
          path.join(ROOT, "test", "support", "report-summary.ts"),
        ],
        { encoding: "utf8", timeout: 60_000, cwd: dir },
      );
      expect(r.status, r.stderr).toBe(1);
      expect(r.stdout).toContain("0 passed, 1 failed, 1 skipped\nfailures, in the order they were reported (2):");
      expect(r.stdout).toContain(
        "[1/2] fixture.test.ts > outer > inner (a hook of the suite)\n    Error: the stack never converged",
      );
      expect(r.stdout).toMatch(
        /\[2\/2\] fixture\.test\.ts > outer > fails \(\d+\.\d s\)\n {4}AssertionError: expected 1 to be 2/,
      );
    } finally {
      await fs.rm(dir, { recursive: true, force: true });
    }
  }, 60_000);
});
