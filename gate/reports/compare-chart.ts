/**
 * The comparison as an SVG: aggregate throughput and TTFT p95 against concurrency, one line per
 * service, each crossover (where a speculative service stops beating autoregressive) marked.
 */
import { SERVICE_LABEL, type ServiceName } from "../measurement/compare";
import type { CompareResult } from "../measurement/compare-run";
import { timeNote } from "./compare-report";
import { esc, panel, svgDocument, type Series } from "./svg";

const COLORS: Record<ServiceName, string> = { autoregressive: "#1f77b4", eagle3: "#d62728", dflash: "#2ca02c" };

export function compareChart(r: CompareResult, model: string): string {
  const measured = r.outcomes.filter((o) => o.failure === null && o.sweep.length > 0);
  const xs = measured.flatMap((o) => o.sweep.map((l) => l.level));
  const mode = measured[0]?.sweep[0]?.mode ?? "closed";
  const series = (f: (l: (typeof measured)[number]["sweep"][number]) => number | null): Series[] =>
    measured.map((o) => ({
      label: SERVICE_LABEL[o.service],
      color: COLORS[o.service],
      points: o.sweep.flatMap((l) => {
        const y = f(l);
        return y === null ? [] : [{ x: l.level, y }];
      }),
    }));
  const markers = (r.comparison?.crossovers ?? [])
    .filter((c) => c.estimatedLevel !== null)
    .map((c) => ({
      x: c.estimatedLevel!,
      label: `${SERVICE_LABEL[c.service]} = AR at ~${Math.round(c.estimatedLevel!)}`,
      color: COLORS[c.service],
    }));
  const xLabel = mode === "closed" ? "concurrency (log scale)" : "request rate, req/s (log scale)";
  const subtitle = r.comparison ? r.comparison.sentence : "no service could be measured";
  const W = 1040;
  return svgDocument(W, 470, `${model}: services compared on one host`, shorten(subtitle, 150), [
    panel({
      left: 80,
      top: 80,
      width: 400,
      height: 300,
      title: "aggregate output tokens/s",
      xLabel,
      yLabel: "tokens/s",
      xs,
      series: series((l) => l.throughput.mean),
      markers,
    }),
    panel({
      left: 600,
      top: 80,
      width: 400,
      height: 300,
      title: "time to first token, p95",
      xLabel,
      yLabel: "seconds",
      xs,
      series: series((l) => l.ttftP95Seconds),
    }),
    `<text x="${W / 2}" y="455" text-anchor="middle" fill="#555" font-size="11">${esc(timeNote(r.timeScale))}</text>`,
  ]);
}

function shorten(s: string, max: number): string {
  return s.length <= max ? s : `${s.slice(0, max - 1)}…`;
}
