/**
 * The charts, one family for bench and compare: throughput and latencies against the levels
 * (concurrency, or request rate offered for an open loop), hand-written SVG (svg.ts), no charting
 * dependency. The benchmark's: each latency on its own axis (TTFT is seconds where E2E is minutes:
 * on one axis TTFT would look flat at zero), the saturation point marked. The comparison's: one line
 * per service, each crossover (where a speculative service stops beating autoregressive) marked.
 */
import type { BenchSummary } from "../run/bench";
import { SERVICE_LABEL, type ServiceName } from "../plan/compare";
import type { CompareResult } from "../plan/compare-run";
import type { LevelSummary } from "../judge/levels";
import { esc, fmt, panel, svgDocument, type PanelSpec, type Series } from "./svg";
import { timeNote } from "./outputs";

/** The x axis of a sweep: concurrency, or the request rate offered (open loop). */
export function levelAxisLabel(mode: "closed" | "open" | undefined): string {
  return mode === "open" ? "request rate offered, req/s (log scale)" : "concurrency (log scale)";
}

type ChartLevel = Pick<LevelSummary, "level" | "outputTokensPerSecond"> &
  Partial<Pick<LevelSummary, "mode">> &
  Pick<
    LevelSummary,
    "ttftP50Seconds" | "ttftP99Seconds" | "itlP50Seconds" | "itlP99Seconds" | "e2eP50Seconds" | "e2eP99Seconds"
  >;

type BenchChartSummary = Pick<BenchSummary, "model" | "saturationConcurrency" | "sustainedOutputTokensPerSecond"> & {
  sweep: ChartLevel[];
} & Partial<Pick<BenchSummary, "mode" | "sustainedLevel" | "saturated" | "timeScale">>;

export function benchChart(summary: BenchChartSummary): string {
  const mode = summary.mode ?? summary.sweep[0]?.mode ?? "closed";
  const levels = [...summary.sweep].sort((a, b) => a.level - b.level);
  const xs = levels.map((l) => l.level);
  const against = mode === "open" ? "request rate offered" : "concurrency";
  const time =
    summary.timeScale !== undefined && summary.timeScale !== 1
      ? `; simulated host time (time scale ${summary.timeScale})`
      : "";
  const common = {
    width: 320,
    height: 250,
    xLabel: levelAxisLabel(mode),
    xs,
    markers: saturationMarker(summary, mode),
  };
  return svgDocument(
    880,
    730,
    `${summary.model}: throughput and latency vs ${against}`,
    headline(summary, mode, xs) + time,
    benchPanels(levels, common),
  );
}

/** Where the sweep saturated (a closed sweep's concurrency; an open one's sustained rate, once it saturated). */
function saturationMarker(summary: BenchChartSummary, mode: "open" | "closed") {
  const at =
    mode === "open" ? (summary.saturated ? (summary.sustainedLevel ?? null) : null) : summary.saturationConcurrency;
  return at === null
    ? []
    : [{ x: at, label: `saturation at ${at}${mode === "open" ? " req/s offered" : ""}`, color: "#ff7f0e" }];
}

/** The bench chart's four panels: throughput and TTFT above, ITL and end-to-end latency below. */
function benchPanels(levels: ChartLevel[], common: Omit<PanelSpec, "top" | "left" | "title" | "yLabel" | "series">) {
  const pick = (f: (l: ChartLevel) => number | null) =>
    levels.flatMap((l) => {
      const y = f(l);
      return y === null ? [] : [{ x: l.level, y }];
    });
  // A latency's median, solid, and its p99, dashed in a lighter shade of the same colour (UNIT: per second).
  const percentiles = (name: string, colors: [string, string], keys: [LatencyKey, LatencyKey], unit = 1): Series[] =>
    keys.map((key, i) => ({
      label: `${name} ${i === 0 ? "p50" : "p99"}`,
      color: colors[i],
      ...(i === 0 ? {} : { dashed: true }),
      points: pick((l) => (l[key] === null ? null : l[key] * unit)),
    }));
  const tokens = { label: "output tok/s", color: "#1f77b4", points: pick((l) => l.outputTokensPerSecond) };
  const ttft = percentiles("TTFT", ["#2ca02c", "#98df8a"], ["ttftP50Seconds", "ttftP99Seconds"]);
  const itl = percentiles("ITL", ["#9467bd", "#c5b0d5"], ["itlP50Seconds", "itlP99Seconds"], 1000);
  const e2e = percentiles("E2E", ["#d62728", "#ff9896"], ["e2eP50Seconds", "e2eP99Seconds"]);
  const row1 = { ...common, top: 80 };
  const row2 = { ...common, top: 420 };
  return [
    panel({ ...row1, left: 90, title: "aggregate output tokens/s", yLabel: "tokens/s", series: [tokens] }),
    panel({ ...row1, left: 520, title: "time to first token", yLabel: "seconds", series: ttft }),
    panel({ ...row2, left: 90, title: "inter-token latency (per token)", yLabel: "milliseconds", series: itl }),
    panel({ ...row2, left: 520, title: "end-to-end latency", yLabel: "seconds", series: e2e }),
  ];
}

type LatencyKey = Exclude<keyof ChartLevel, "level" | "outputTokensPerSecond" | "mode">;

/** The knee, or "not saturated up to C=N" with its lower bound: never the last level called saturation. */
function headline(
  summary: Pick<BenchSummary, "saturationConcurrency" | "sustainedOutputTokensPerSecond"> &
    Partial<Pick<BenchSummary, "sustainedLevel">>,
  mode: "closed" | "open",
  xs: number[],
): string {
  const tps = fmt(summary.sustainedOutputTokensPerSecond);
  if (mode === "open") {
    if (summary.sustainedOutputTokensPerSecond > 0 && summary.sustainedLevel !== undefined)
      return `capacity ${tps} tok/s: the server fell behind at ${summary.sustainedLevel} req/s offered`;
    if (xs.length > 0)
      return `not saturated up to ${Math.max(...xs)} req/s offered: the offered load bound every level, no capacity claimed`;
    return "no rate level kept the error budget: no throughput claimed";
  }
  if (summary.saturationConcurrency !== null)
    return `sustained ${tps} tok/s at concurrency ${summary.saturationConcurrency}`;
  if (summary.sustainedOutputTokensPerSecond > 0 && xs.length > 0)
    return `not saturated up to C=${Math.max(...xs)}: at least ${tps} tok/s`;
  return "no level kept the error budget: no throughput claimed";
}

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
  const xLabel = levelAxisLabel(mode);
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
