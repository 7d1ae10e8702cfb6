/**
 * CSV, one family for bench and compare: one row per level, the columns a spreadsheet needs,
 * seconds (of host time) and tokens per second as plain numbers, an empty cell where there was no
 * value. bench writes it beside its JSON; compare with --csv.
 */
import type { CompareResult } from "../plan/compare-run";
import type { Certificate } from "../judge/certificate";
import type { LevelSummary } from "../judge/levels";

/** A CSV cell: empty for null (no successful request), the plain number otherwise. */
export function csvCell(v: number | string | boolean | null | undefined): string {
  if (v === null || v === undefined) return "";
  const text = String(v);
  // RFC 4180: a cell with a comma, a quote or a line break is quoted, its quotes doubled.
  return /[",\r\n]/.test(text) ? `"${text.replaceAll('"', '""')}"` : text;
}

/** The certificate as two cells: certified (true/false/empty) and the failed checks' details. */
function certificateCells(c: Certificate | null | undefined): [boolean | null, string] {
  if (!c) return [null, "no evidence was gathered"];
  return [
    c.certified,
    c.checks
      .filter((x) => !x.ok)
      .map((x) => `${x.name}: ${x.detail}`)
      .join(" | "),
  ];
}

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
    "mode",
    "offeredRequestsPerSecond",
    "achievedRequestsPerSecond",
    "keptUp",
    "withinErrorBudget",
    "answerlessRequests",
    "truncatedRequests",
  ] as const satisfies ReadonlyArray<keyof LevelSummary>;
  const interval = [
    "outputTokensPerSecondLow",
    "outputTokensPerSecondHigh",
    "goodputTokensPerSecond",
    "certified",
    "certificateFailures",
  ];
  return (
    [
      [...columns, ...interval].join(","),
      ...sweep.map((l) =>
        [
          ...columns.map((c) => l[c]),
          l.throughput.low,
          l.throughput.high,
          l.goodput.mean,
          ...certificateCells(l.certificate),
        ]
          .map(csvCell)
          .join(","),
      ),
    ].join("\n") + "\n"
  );
}

/** FILE.json -> FILE.csv (any other name gets .csv appended). */
export function csvPathFor(jsonPath: string): string {
  return jsonPath.endsWith(".json") ? `${jsonPath.slice(0, -5)}.csv` : `${jsonPath}.csv`;
}

/** One row per service and level. */
export function compareCsv(r: CompareResult): string {
  const header = [
    "service",
    "mode",
    "level",
    "output_tok_s_mean",
    "output_tok_s_ci95_low",
    "output_tok_s_ci95_high",
    "goodput_tok_s",
    "ttft_p50_s",
    "ttft_p95_s",
    "ttfa_p95_s",
    "itl_per_token_p50_s",
    "itl_per_token_p95_s",
    "e2e_p50_s",
    "acceptance_length",
    "requests",
    "errors",
    "meets_slo",
    "within_error_budget",
    "achieved_req_s",
    "kept_up",
    "time_scale",
    "certified",
    "certificate_failures",
  ];
  const rows = r.outcomes.flatMap((o) =>
    o.sweep.map((l) =>
      [
        o.service,
        l.mode,
        l.level,
        l.throughput.mean,
        l.throughput.low,
        l.throughput.high,
        l.goodput.mean,
        l.ttftP50Seconds,
        l.ttftP95Seconds,
        l.ttfaP95Seconds,
        l.itlPerTokenP50Seconds,
        l.itlPerTokenP95Seconds,
        l.e2eP50Seconds,
        l.acceptanceLength,
        l.requests,
        l.errors,
        l.meetsSlo,
        l.withinErrorBudget,
        l.achievedRequestsPerSecond,
        l.keptUp,
        r.timeScale,
        ...certificateCells(l.certificate),
      ]
        .map(csvCell)
        .join(","),
    ),
  );
  return [header.join(","), ...rows].join("\n") + "\n";
}
