/**
 * Hand-written SVG line panels (no charting dependency): each panel has its own y axis, x is the
 * concurrency on a log2 scale (1, 8, 16, 32, 64 spread evenly enough to read), labels stay inside
 * the panel, and vertical markers carry a label.
 */

export interface Series {
  label: string;
  color: string;
  dashed?: boolean;
  points: { x: number; y: number }[];
}

export interface Marker {
  x: number;
  label: string;
  color: string;
}

export interface PanelSpec {
  left: number;
  top: number;
  width: number;
  height: number;
  title: string;
  xLabel: string;
  yLabel: string;
  xs: number[];
  series: Series[];
  markers?: Marker[];
  /** y axis from 0 (default) or from the data's minimum. */
  yFromZero?: boolean;
}

/** A round tick step of at least v: 1, 2, 2.5 or 5 times a power of ten. */
export function niceStep(v: number): number {
  if (v <= 0) return 1;
  const mag = 10 ** Math.floor(Math.log10(v));
  for (const m of [1, 2, 2.5, 5, 10]) if (m * mag >= v) return m * mag;
  return 10 * mag;
}

export function fmt(v: number): string {
  if (v === 0) return "0";
  if (Math.abs(v) >= 100) return Math.round(v).toLocaleString("en-US");
  if (Math.abs(v) >= 10) return v.toFixed(0);
  if (Math.abs(v) >= 1) return v.toFixed(1);
  return v.toPrecision(2);
}

export function esc(s: string): string {
  return s.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;").replace(/"/g, "&quot;");
}

export function panel(p: PanelSpec): string {
  const scale = panelScale(p);
  return [
    "<g>",
    `<text x="${p.left + p.width / 2}" y="${p.top - 8}" text-anchor="middle" font-weight="bold">${esc(p.title)}</text>`,
    `<rect x="${p.left}" y="${p.top}" width="${p.width}" height="${p.height}" fill="none" stroke="#999"/>`,
    ...axes(p, scale),
    ...(p.markers ?? []).flatMap((m, i) => markerLines(p, scale, m, i)),
    ...p.series.flatMap((s, i) => seriesLines(p, scale, s, i)),
    "</g>",
  ].join("\n");
}

/** A panel's coordinates: x on a log2 scale over its levels, y from 0 to a round value over its largest point. */
interface PanelScale {
  xs: number[];
  px: (x: number) => number;
  py: (y: number) => number;
  step: number;
  ticks: number;
}

function panelScale(p: PanelSpec): PanelScale {
  const xs = [...new Set(p.xs)].filter((x) => x > 0).sort((a, b) => a - b);
  const lx = (x: number) => Math.log2(Math.max(x, 1e-9));
  const xMin = xs.length ? lx(xs[0]) : 0;
  const xMax = xs.length ? lx(xs[xs.length - 1]) : 1;
  // Inner margins keep the first and last points (and their labels) off the frame.
  const pad = 18;
  const px = (x: number) =>
    p.left + pad + (xMax > xMin ? ((lx(x) - xMin) / (xMax - xMin)) * (p.width - 2 * pad) : (p.width - 2 * pad) / 2);
  // About four gridlines at round values, the top one at or above the largest point.
  const top = Math.max(0, ...p.series.flatMap((s) => s.points.map((q) => q.y)));
  const step = niceStep(top / 4);
  const ticks = Math.max(1, Math.ceil(top / step - 1e-9));
  const yMax = step * ticks;
  const py = (y: number) => p.top + p.height - (yMax > 0 ? (y / yMax) * p.height : 0);
  return { xs, px, py, step, ticks };
}

/** The gridlines with their values, the x ticks with their levels, and both axes' labels. */
function axes(p: PanelSpec, { xs, px, py, step, ticks }: PanelScale): string[] {
  const out: string[] = [];
  for (let i = 0; i <= ticks; i++) {
    const y = step * i;
    out.push(
      `<line x1="${p.left}" x2="${p.left + p.width}" y1="${py(y).toFixed(1)}" y2="${py(y).toFixed(1)}" stroke="#eee"/>`,
    );
    out.push(`<text x="${p.left - 5}" y="${(py(y) + 4).toFixed(1)}" text-anchor="end">${fmt(y)}</text>`);
  }
  out.push(
    `<text transform="translate(${p.left - 48},${p.top + p.height / 2}) rotate(-90)" text-anchor="middle" fill="#333">${esc(p.yLabel)}</text>`,
  );
  for (const x of xs) {
    out.push(
      `<line x1="${px(x).toFixed(1)}" x2="${px(x).toFixed(1)}" y1="${p.top + p.height}" y2="${p.top + p.height + 4}" stroke="#999"/>`,
    );
    out.push(`<text x="${px(x).toFixed(1)}" y="${p.top + p.height + 17}" text-anchor="middle">${x}</text>`);
  }
  out.push(
    `<text x="${p.left + p.width / 2}" y="${p.top + p.height + 34}" text-anchor="middle" fill="#333">${esc(p.xLabel)}</text>`,
  );
  return out;
}

/** The I-th marker: a dashed vertical line and its label. */
function markerLines(p: PanelSpec, { px }: PanelScale, m: Marker, i: number): string[] {
  const x = px(m.x);
  // Labels of markers stack upwards from the bottom; past the middle they sit left of the line.
  const right = x < p.left + p.width * 0.6;
  return [
    `<line x1="${x.toFixed(1)}" x2="${x.toFixed(1)}" y1="${p.top}" y2="${p.top + p.height}" stroke="${m.color}" stroke-dasharray="5 4"/>`,
    `<text x="${(right ? x + 4 : x - 4).toFixed(1)}" y="${p.top + p.height - 8 - i * 15}" text-anchor="${right ? "start" : "end"}" fill="${m.color}" font-size="11">${esc(m.label)}</text>`,
  ];
}

/** The I-th series: its line and points (each with its value on hover), and its legend entry. */
function seriesLines(p: PanelSpec, { px, py }: PanelScale, s: Series, i: number): string[] {
  const out: string[] = [];
  if (s.points.length > 0) {
    const d = s.points
      .slice()
      .sort((a, b) => a.x - b.x)
      .map((q, j) => `${j === 0 ? "M" : "L"}${px(q.x).toFixed(1)},${py(q.y).toFixed(1)}`)
      .join(" ");
    out.push(
      `<path d="${d}" fill="none" stroke="${s.color}" stroke-width="2"${s.dashed ? ' stroke-dasharray="6 3"' : ""}/>`,
    );
    for (const q of s.points)
      out.push(
        `<circle cx="${px(q.x).toFixed(1)}" cy="${py(q.y).toFixed(1)}" r="3" fill="${s.color}"><title>${esc(`${s.label} at ${q.x}: ${fmt(q.y)}`)}</title></circle>`,
      );
  }
  out.push(`<rect x="${p.left + 10}" y="${p.top + 10 + i * 17}" width="11" height="11" fill="${s.color}"/>`);
  out.push(`<text x="${p.left + 26}" y="${p.top + 20 + i * 17}">${esc(s.label)}</text>`);
  return out;
}

export function svgDocument(width: number, height: number, title: string, subtitle: string, body: string[]): string {
  return (
    [
      `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}" font-family="sans-serif" font-size="12">`,
      `<rect width="${width}" height="${height}" fill="white"/>`,
      `<text x="${width / 2}" y="24" text-anchor="middle" font-size="16">${esc(title)}</text>`,
      `<text x="${width / 2}" y="42" text-anchor="middle" fill="#555">${esc(subtitle)}</text>`,
      ...body,
      "</svg>",
    ].join("\n") + "\n"
  );
}
