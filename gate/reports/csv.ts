/**
 * CSV beside the JSON: one row per sweep level, the columns a spreadsheet needs, seconds and
 * tokens per second as plain numbers (an empty cell where there was no successful request).
 */
import type { LevelSummary } from "../measurement/stats";

export function benchCsv(sweep: LevelSummary[]): string {
  const columns = [
    "concurrency",
    "requests",
    "errors",
    "durationSeconds",
    "outputTokensPerSecond",
    "requestsPerSecond",
    "completionTokens",
    "ttftP50Seconds",
    "ttftP95Seconds",
    "ttftP99Seconds",
    "itlP50Seconds",
    "itlP95Seconds",
    "itlP99Seconds",
    "e2eP50Seconds",
    "e2eP95Seconds",
    "e2eP99Seconds",
    "acceptanceLength",
  ] as const satisfies ReadonlyArray<keyof LevelSummary>;
  const cell = (v: LevelSummary[(typeof columns)[number]]) => (v === null || v === undefined ? "" : String(v));
  return [columns.join(","), ...sweep.map((l) => columns.map((c) => cell(l[c])).join(","))].join("\n") + "\n";
}

/** FILE.json -> FILE.csv (any other name gets .csv appended). */
export function csvPathFor(jsonPath: string): string {
  return jsonPath.endsWith(".json") ? `${jsonPath.slice(0, -5)}.csv` : `${jsonPath}.csv`;
}
