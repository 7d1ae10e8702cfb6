/**
 * The order vitest starts test files in: longest first, so that on two workers the long engine and
 * test-host files do not start last and leave one worker running alone at the end (the run's tail).
 *
 * A file's length is, first known first: its span in the last run's JSON report on this checkout
 * (`.gpuhost/vitest-report.json`, which every `npm test` writes), else in the snapshot committed
 * beside this file (`test/support/durations.json`, written by `bench/suite-timing.ts
 * --write-durations` from a whole run), so a fresh clone, which has no report, orders the same way.
 * A file in neither (a new one) counts as long when it lies in a folder of the slow real parts (the
 * folders `npm run test:quick` leaves out) and as short otherwise. Ties keep vitest's own order.
 */
import * as path from "node:path";
import { BaseSequencer, type TestSpecification } from "vitest/node";
import { longestFirst, REPORT, ROOT, snapshotSpans, spansOfReport } from "./durations";

export default class LongestFirstSequencer extends BaseSequencer {
  override async sort(files: TestSpecification[]): Promise<TestSpecification[]> {
    const base = await super.sort(files);
    const rel = (s: TestSpecification) => path.relative(ROOT, s.moduleId);
    const byPath = new Map(base.map((s) => [rel(s), s]));
    return longestFirst(base.map(rel), spansOfReport(REPORT), snapshotSpans()).map((f) => byPath.get(f)!);
  }
}
