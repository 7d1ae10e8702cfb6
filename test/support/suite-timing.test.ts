import { describe, expect, it } from "vitest";
import { fileTimings } from "../../bench/suite-timing";

describe("bench/suite-timing.ts", () => {
  it("orders files by their own span and names each file's longest test", () => {
    const report = {
      startTime: 1_000,
      numPassedTests: 3,
      numFailedTests: 0,
      numPendingTests: 0,
      testResults: [
        {
          name: "/repo/test/a.test.ts",
          startTime: 1_000,
          endTime: 4_000,
          status: "passed",
          assertionResults: [{ title: "quick", status: "passed", duration: 100 }],
        },
        {
          name: "/repo/test/b.test.ts",
          startTime: 1_500,
          endTime: 11_000,
          status: "passed",
          assertionResults: [
            { title: "short", status: "passed", duration: 1_000 },
            { title: "long", fullName: "b long", status: "passed", duration: 8_000 },
          ],
        },
      ],
    };
    const t = fileTimings(report, "/repo");
    expect(t.files.map((f) => f.file)).toEqual(["test/b.test.ts", "test/a.test.ts"]);
    expect(t.files[0].seconds).toBe(9.5);
    expect(t.files[0].slowest).toEqual({ title: "b long", seconds: 8 });
    expect(t.wall).toBe(10);
    expect(t.summed).toBe(12.5);
  });
});
