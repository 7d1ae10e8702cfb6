/**
 * The benchmark as an SVG: aggregate throughput, TTFT and the other latencies against concurrency,
 * each on its own axis (TTFT is seconds where E2E is minutes: on one axis TTFT would look flat at
 * zero), the saturation point marked. Hand-written SVG (svg.ts): no charting dependency.
 */
import type { BenchSummary } from "../measurement/bench";
import { fmt, panel, svgDocument } from "./svg";

export function benchChart(
  summary: Pick<BenchSummary, "model" | "sweep" | "saturationConcurrency" | "sustainedOutputTokensPerSecond">,
): string {
  const levels = [...summary.sweep].sort((a, b) => a.concurrency - b.concurrency);
  const xs = levels.map((l) => l.concurrency);
  const pick = (f: (l: (typeof levels)[number]) => number | null) =>
    levels.flatMap((l) => {
      const y = f(l);
      return y === null ? [] : [{ x: l.concurrency, y }];
    });
  const mark =
    summary.saturationConcurrency === null
      ? []
      : [
          {
            x: summary.saturationConcurrency,
            label: `saturation at ${summary.saturationConcurrency}`,
            color: "#ff7f0e",
          },
        ];
  const common = { width: 320, height: 250, xLabel: "concurrency (log scale)", xs, markers: mark };
  const row1 = { ...common, top: 80 };
  const row2 = { ...common, top: 420 };
  return svgDocument(880, 730, `${summary.model}: throughput and latency vs concurrency`, headline(summary, xs), [
    panel({
      ...row1,
      left: 90,
      title: "aggregate output tokens/s",
      yLabel: "tokens/s",
      series: [{ label: "output tok/s", color: "#1f77b4", points: pick((l) => l.outputTokensPerSecond) }],
    }),
    panel({
      ...row1,
      left: 520,
      title: "time to first token",
      yLabel: "seconds",
      series: [
        { label: "TTFT p50", color: "#2ca02c", points: pick((l) => l.ttftP50Seconds) },
        { label: "TTFT p99", color: "#98df8a", dashed: true, points: pick((l) => l.ttftP99Seconds) },
      ],
    }),
    panel({
      ...row2,
      left: 90,
      title: "inter-token latency (between output chunks)",
      yLabel: "milliseconds",
      series: [
        {
          label: "ITL p50",
          color: "#9467bd",
          points: pick((l) => (l.itlP50Seconds === null ? null : l.itlP50Seconds * 1000)),
        },
        {
          label: "ITL p99",
          color: "#c5b0d5",
          dashed: true,
          points: pick((l) => (l.itlP99Seconds === null ? null : l.itlP99Seconds * 1000)),
        },
      ],
    }),
    panel({
      ...row2,
      left: 520,
      title: "end-to-end latency",
      yLabel: "seconds",
      series: [
        { label: "E2E p50", color: "#d62728", points: pick((l) => l.e2eP50Seconds) },
        { label: "E2E p99", color: "#ff9896", dashed: true, points: pick((l) => l.e2eP99Seconds) },
      ],
    }),
  ]);
}

/** The knee, or "not saturated up to C=N" with its lower bound: never the last level called saturation. */
function headline(
  summary: Pick<BenchSummary, "saturationConcurrency" | "sustainedOutputTokensPerSecond">,
  xs: number[],
): string {
  const tps = fmt(summary.sustainedOutputTokensPerSecond);
  if (summary.saturationConcurrency !== null)
    return `sustained ${tps} tok/s at concurrency ${summary.saturationConcurrency}`;
  if (summary.sustainedOutputTokensPerSecond > 0 && xs.length > 0)
    return `not saturated up to C=${Math.max(...xs)}: at least ${tps} tok/s`;
  return "no level kept the error budget: no throughput claimed";
}
