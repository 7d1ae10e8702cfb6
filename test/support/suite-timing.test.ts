import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { describe, expect, it } from "vitest";
import { fileTimings } from "../../bench/suite-timing";
import { longestFirst, ROOT, snapshotSpans, spansOfReport } from "./durations";

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

describe("test/support/durations.ts: the order the suite starts its files in", () => {
  it("longest first by the last report, then the snapshot, then the slow folders; ties keep vitest's order", () => {
    const files = [
      "test/a/x.test.ts",
      "test/engine/new.test.ts",
      "test/b/y.test.ts",
      "test/engine/old.test.ts",
      "test/c/z.test.ts",
    ];
    const order = longestFirst(
      files,
      { "test/b/y.test.ts": 30 },
      { "test/engine/old.test.ts": 200, "test/b/y.test.ts": 1 },
    );
    expect(order).toEqual([
      "test/engine/old.test.ts",
      "test/engine/new.test.ts",
      "test/b/y.test.ts",
      "test/a/x.test.ts",
      "test/c/z.test.ts",
    ]);
  });

  it("reads a report of another checkout (a fresh clone's) by the files' paths from test/ on", () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "durations-"));
    const report = path.join(dir, "report.json");
    fs.writeFileSync(
      report,
      JSON.stringify({
        testResults: [
          { name: "/elsewhere/clone/test/engine/a.test.ts", startTime: 1_000, endTime: 5_500 },
          { name: "/repo/test/b.test.ts", startTime: 0, endTime: 2_000 },
        ],
      }),
    );
    expect(spansOfReport(report, "/repo")).toEqual({ "test/engine/a.test.ts": 4.5, "test/b.test.ts": 2 });
    expect(spansOfReport(path.join(dir, "missing.json"), "/repo")).toEqual({});
    fs.rmSync(dir, { recursive: true, force: true });
  });

  it("the committed snapshot names files that exist", () => {
    const known = Object.keys(snapshotSpans());
    expect(known.length).toBeGreaterThan(100);
    expect(known.filter((f) => !fs.existsSync(path.join(ROOT, f)))).toEqual([]);
  });
});
