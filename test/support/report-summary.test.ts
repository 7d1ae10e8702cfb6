/** The CI summary of vitest's JSON report: every failure's cause in a bounded tail. */
import { describe, expect, it } from "vitest";
import { summarize, type VitestJsonReport } from "./report-summary";

const report = (over: Partial<VitestJsonReport>): VitestJsonReport => ({
  numPassedTests: 0,
  numFailedTests: 0,
  numPendingTests: 0,
  numTodoTests: 0,
  testResults: [],
  ...over,
});

describe("summarize", () => {
  it("all green: the counts alone", () => {
    expect(summarize(report({ numPassedTests: 5, numPendingTests: 1, numTodoTests: 1 }), "/r")).toBe(
      "5 passed, 0 failed, 2 skipped",
    );
  });

  it("every failure in order, hook errors too, without colours or stack frames", () => {
    const s = summarize(
      report({
        numFailedTests: 2,
        testResults: [
          {
            name: "/r/test/a.test.ts",
            status: "failed",
            message: "Error: beforeAll hook failed",
            assertionResults: [
              {
                fullName: "a first",
                status: "failed",
                duration: 2500,
                failureMessages: [
                  "\u001b[31mError: pulumi up exited 1\u001b[39m\n    at x (/r/node_modules/v/index.js:1:1)\n    at y (/r/test/a.test.ts:3:4)",
                ],
              },
              { fullName: "a passes", status: "passed", duration: 1 },
            ],
          },
          {
            name: "/r/test/b.test.ts",
            status: "failed",
            assertionResults: [{ fullName: "b second", status: "failed", failureMessages: ["boom"] }],
          },
        ],
      }),
      "/r",
    );
    expect(s).toBe(
      [
        "0 passed, 2 failed, 0 skipped",
        "failures, in the order they were reported (3):",
        "[1/3] test/a.test.ts: Error: beforeAll hook failed",
        "[2/3] test/a.test.ts > a first (2.5 s)",
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
    const one = summarize(
      report({
        numFailedTests: 1,
        testResults: [
          {
            name: "/r/c.test.ts",
            status: "failed",
            assertionResults: [{ fullName: "t", status: "failed", failureMessages: [pulumiOut] }],
          },
        ],
      }),
      "/r",
    );
    expect(one).toContain("    Error: pulumi up exited 255\n    Updating (testhost):");
    expect(one).toContain(
      "    …\n        error: the toolkit probe failed: nvcc is missing\n    (200 more line(s) in the full log)",
    );
    const many = Array.from({ length: 40 }, (_, i) => ({
      fullName: `t${i}`,
      status: "failed",
      failureMessages: [pulumiOut],
    }));
    const s = summarize(
      report({ numFailedTests: 40, testResults: [{ name: "/r/c.test.ts", status: "failed", assertionResults: many }] }),
      "/r",
    );
    expect(s.length).toBeLessThan(6000);
    expect(s).toContain("[40/40] c.test.ts > t39 (message left out: the summary is bounded)");
  });
});
