/**
 * The benchmark as an SVG: aggregate throughput (left) and latency percentiles (right) against
 * concurrency, with the saturation point marked. Hand-written SVG: no charting dependency.
 */
import type { BenchSummary } from "./bench";

const W = 960;
const H = 400;
const PANEL_W = 420;
const PANEL_H = 290;
const TOP = 60;

interface Series {
  label: string;
  color: string;
  points: { x: number; y: number }[];
}

export function benchChart(
  summary: Pick<BenchSummary, "model" | "sweep" | "saturationConcurrency" | "sustainedOutputTokensPerSecond">,
): string {
  const levels = [...summary.sweep].sort((a, b) => a.concurrency - b.concurrency);
  const xs = levels.map((l) => l.concurrency);
  const throughput: Series[] = [
    {
      label: "output tok/s",
      color: "#1f77b4",
      points: levels.map((l) => ({ x: l.concurrency, y: l.outputTokensPerSecond })),
    },
  ];
  const pick = (f: (l: (typeof levels)[number]) => number | null) =>
    levels.flatMap((l) => {
      const y = f(l);
      return y === null ? [] : [{ x: l.concurrency, y }];
    });
  const latency: Series[] = [
    { label: "TTFT p50", color: "#2ca02c", points: pick((l) => l.ttftP50Seconds) },
    { label: "TTFT p99", color: "#98df8a", points: pick((l) => l.ttftP99Seconds) },
    { label: "E2E p50", color: "#d62728", points: pick((l) => l.e2eP50Seconds) },
    {
      label: "ITL p50 x100",
      color: "#9467bd",
      points: pick((l) => (l.itlP50Seconds === null ? null : l.itlP50Seconds * 100)),
    },
  ];
  const parts = [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${H}" viewBox="0 0 ${W} ${H}" font-family="sans-serif" font-size="12">`,
    `<rect width="${W}" height="${H}" fill="white"/>`,
    `<text x="${W / 2}" y="24" text-anchor="middle" font-size="16">${esc(summary.model)}: throughput and latency vs concurrency</text>`,
    `<text x="${W / 2}" y="42" text-anchor="middle" fill="#555">sustained ${fmt(summary.sustainedOutputTokensPerSecond)} tok/s at concurrency ${summary.saturationConcurrency ?? "n/a"}</text>`,
    panel(60, "aggregate output tokens/s", xs, throughput, summary.saturationConcurrency),
    panel(540, "latency, seconds", xs, latency, summary.saturationConcurrency),
    "</svg>",
  ];
  return parts.join("\n") + "\n";
}

function panel(left: number, title: string, xs: number[], series: Series[], mark: number | null): string {
  const xMax = Math.max(1, ...xs);
  const yMax = niceCeil(Math.max(0, ...series.flatMap((s) => s.points.map((p) => p.y))));
  const px = (x: number) => left + (x / xMax) * PANEL_W;
  const py = (y: number) => TOP + PANEL_H - (yMax > 0 ? (y / yMax) * PANEL_H : 0);
  const out: string[] = [
    `<g>`,
    `<text x="${left + PANEL_W / 2}" y="${TOP - 6}" text-anchor="middle">${esc(title)}</text>`,
  ];
  out.push(`<rect x="${left}" y="${TOP}" width="${PANEL_W}" height="${PANEL_H}" fill="none" stroke="#999"/>`);
  for (let i = 0; i <= 4; i++) {
    const y = (yMax * i) / 4;
    out.push(
      `<line x1="${left}" x2="${left + PANEL_W}" y1="${py(y).toFixed(1)}" y2="${py(y).toFixed(1)}" stroke="#eee"/>`,
    );
    out.push(`<text x="${left - 4}" y="${(py(y) + 4).toFixed(1)}" text-anchor="end">${fmt(y)}</text>`);
  }
  for (const x of xs)
    out.push(`<text x="${px(x).toFixed(1)}" y="${TOP + PANEL_H + 16}" text-anchor="middle">${x}</text>`);
  out.push(`<text x="${left + PANEL_W / 2}" y="${TOP + PANEL_H + 34}" text-anchor="middle">concurrency</text>`);
  if (mark !== null) {
    out.push(
      `<line x1="${px(mark).toFixed(1)}" x2="${px(mark).toFixed(1)}" y1="${TOP}" y2="${TOP + PANEL_H}" stroke="#ff7f0e" stroke-dasharray="4 3"/>`,
    );
  }
  series.forEach((s, i) => {
    if (s.points.length > 0) {
      const d = s.points.map((p, j) => `${j === 0 ? "M" : "L"}${px(p.x).toFixed(1)},${py(p.y).toFixed(1)}`).join(" ");
      out.push(`<path d="${d}" fill="none" stroke="${s.color}" stroke-width="2"/>`);
      for (const p of s.points)
        out.push(
          `<circle cx="${px(p.x).toFixed(1)}" cy="${py(p.y).toFixed(1)}" r="3" fill="${s.color}"><title>${esc(`${s.label} at ${p.x}: ${fmt(p.y)}`)}</title></circle>`,
        );
    }
    out.push(`<rect x="${left + 8}" y="${TOP + 8 + i * 16}" width="10" height="10" fill="${s.color}"/>`);
    out.push(`<text x="${left + 22}" y="${TOP + 17 + i * 16}">${esc(s.label)}</text>`);
  });
  out.push("</g>");
  return out.join("\n");
}

function niceCeil(v: number): number {
  if (v <= 0) return 1;
  const mag = 10 ** Math.floor(Math.log10(v));
  for (const m of [1, 2, 2.5, 5, 10]) if (m * mag >= v) return m * mag;
  return 10 * mag;
}

function fmt(v: number): string {
  if (v === 0) return "0";
  if (Math.abs(v) >= 100) return Math.round(v).toLocaleString("en-US");
  if (Math.abs(v) >= 1) return v.toFixed(1);
  return v.toPrecision(2);
}

function esc(s: string): string {
  return s.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;").replace(/"/g, "&quot;");
}
