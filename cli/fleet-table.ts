// The fleet as a table for a terminal (demo, README): per worker its share of the router's requests
// and its own sustained figure, the fleet total through the router with its 95 % interval over the
// runs, scaling efficiency and the plan.
import { certificateText } from "../gate/judge/certificate";
import type { FleetOutputs } from "../stack/outputs";
import type { MixedFleetOutput } from "../components/fleet-verification/groups";

const num = (v: number | null | undefined, digits = 1): string =>
  typeof v === "number" && Number.isFinite(v) ? v.toFixed(digits) : "-";

/** "76600.3 ± 1234.5 (95 %, 3 runs)", or the mean alone where no interval was measured. */
export function withInterval(mean: number, interval: FleetOutputs["sustainedInterval"] | undefined): string {
  if (!interval) return num(mean);
  return `${num(mean)} ± ${num(interval.halfWidth)} (95 %, ${interval.runs} runs)`;
}

/** Columns padded: the first to the left, the rest to the right; RULE: a line of dashes before the last row (a total). */
function columns(rows: string[][], rule = false): string[] {
  const widths = rows[0].map((_, i) => Math.max(...rows.map((r) => r[i].length)));
  const lines = rows.map((r) => r.map((c, i) => (i === 0 ? c.padEnd(widths[i]) : c.padStart(widths[i]))).join("  "));
  if (rule) lines.splice(lines.length - 1, 0, widths.map((w) => "-".repeat(w)).join("  "));
  return lines;
}

/**
 * A mixed fleet: per class what was measured through the router beside what the hosts' own curves
 * predicted for the configured groups, whether its objective held, the fewest hosts the plan finds
 * and the homogeneous fleets beside it.
 */
/** The service a group's hosts ran when measured; the configured one where they did not say (older state). */
function ranOf(g: MixedFleetOutput["interactive" | "batch"]): string {
  return g.activeService ?? g.service;
}

export function mixedTable(m: MixedFleetOutput): string {
  const s = (v: number | null | undefined) => (typeof v === "number" ? `${v.toFixed(2)} s` : "-");
  const ms = (v: number | null | undefined) => (typeof v === "number" ? `${(v * 1000).toFixed(1)} ms` : "-");
  const tok = (v: number | null | undefined) => (typeof v === "number" ? Math.round(v).toLocaleString("en-US") : "-");
  const pi = m.predicted.interactive;
  const pb = m.predicted.batch;
  const i = m.interactive.measured;
  const b = m.batch.measured;
  const rows = [
    ["class", "service", "hosts", "in flight", "TTFT p95 (plan)", "ITL p95/token (plan)", "tok/s (plan)", "objective"],
    [
      `interactive ${m.interactive.model}`,
      ranOf(m.interactive),
      String(m.interactive.workers.length),
      String(i.concurrency),
      `${s(i.ttftP95Seconds)} (${s(pi?.ttftP95Seconds)})`,
      `${ms(i.itlPerTokenP95Seconds)} (${ms(pi?.itlPerTokenP95Seconds)})`,
      tok(i.outputTokensPerSecond),
      `${m.interactive.meets ? "met" : "MISSED"} (<= ${m.interactive.objective.ttftP95Seconds} s, ${ms(m.interactive.objective.itlP95Seconds)})`,
    ],
    [
      `batch ${m.batch.model}`,
      ranOf(m.batch),
      String(m.batch.workers.length),
      String(b.concurrency),
      s(b.ttftP95Seconds),
      ms(b.itlPerTokenP95Seconds),
      `${tok(b.outputTokensPerSecond)} (${tok(pb?.tokensPerSecond)})`,
      `${m.batch.meets ? "met" : "MISSED"} (>= ${tok(m.batch.neededTokensPerSecond)} tok/s)`,
    ],
  ];
  return [
    `Mixed fleet, both classes at once through the router (${m.windowSeconds.toFixed(0)} host seconds; plan: the hosts' own curves):`,
    ...columns(rows).map((l) => `  ${l}`),
    `  served: ${[m.interactive, m.batch]
      .map(
        (g) =>
          `${g.model} on ${
            Object.entries(g.measured.servedBy)
              .filter(([, t]) => t > 0)
              .map(([h]) => h)
              .join(", ") || "none"
          }`,
      )
      .join("; ")}`,
    ...[m.interactive, m.batch]
      .filter((g) => g.leftOut.length > 0)
      .map((g) => `  left out of ${g.model}: ${g.leftOut.join(", ")}`),
    // State from before certificates has none: said as not gathered, never as certified.
    `  certificates: ${[m.interactive, m.batch].map((g) => `${g.model} ${certificateText(g.measured.certificate)}`).join("; ")}`,
    ...(m.warnings ?? []).map((w) => `  warning: ${w}`),
    `  predicted: ${m.predicted.verdict}`,
    `  measured: ${m.verdict}`,
    `  plan: ${m.plan.verdict}`,
  ].join("\n");
}

export function fleetTable(f: FleetOutputs): string {
  if (f.mixed) return fleetHeadAndMixed(f, f.mixed);
  const rows: string[][] = [["worker", "requests", "share", "own sustained tok/s"]];
  for (const w of f.registered)
    rows.push([
      w.name,
      String(w.requests),
      w.share === null ? "-" : `${(w.share * 100).toFixed(0)} %`,
      num(w.hostSustainedOutputTokensPerSecond),
    ]);
  rows.push([
    "fleet (through SMG)",
    String(f.registered.reduce((s, w) => s + w.requests, 0)),
    "100 %",
    withInterval(f.sustainedOutputTokensPerSecond, f.sustainedInterval),
  ]);
  const p = f.plan;
  return [
    `Fleet behind SMG ${f.smgVersion} at ${f.routerEndpoint}`,
    ...columns(rows, true),
    ...f.leftOut.map((l) => `left out: ${l.name} (${l.reason})`),
    // Each level's certificate (reconciled with the workers' summed counters); state from before has none.
    ...(f.sweep.some((l) => l.certificate !== undefined)
      ? [
          `levels: ${f.sweep
            .map(
              (l) =>
                `${l.offeredRequestsPerSecond == null ? `C=${l.concurrency}` : `${l.offeredRequestsPerSecond} req/s offered`} ${certificateText(l.certificate)}`,
            )
            .join("; ")}`,
        ]
      : []),
    `scaling efficiency: ${f.scalingEfficiency === null ? "-" : `${(f.scalingEfficiency * 100).toFixed(0)} %`} (fleet ${num(f.sustainedOutputTokensPerSecond)} over the hosts' own ${num(f.hostsSustainedOutputTokensPerSecond)} tok/s)`,
    `plan: ${p.totalOutputTokens.toLocaleString("en-US")} output tokens take ${num(p.daysForJob)} days on these ${p.hosts} hosts; the ${p.deadlineDays}-day deadline needs ${p.hostsForDeadline ?? "-"} (${p.hostsMissing === null ? "-" : p.hostsMissing === 0 ? "none missing" : `${p.hostsMissing} missing`})`,
    ...f.drift.map((d) => `drift: ${d.field}: expected ${d.expected ?? "(absent)"}, found ${d.found ?? "(absent)"}`),
  ].join("\n");
}

/** A mixed fleet's table: its workers' shares, then the classes (it has no sweep of its own). */
function fleetHeadAndMixed(f: FleetOutputs, m: MixedFleetOutput): string {
  const rows = [["worker", "requests", "share"]];
  for (const w of f.registered)
    rows.push([w.name, String(w.requests), w.share === null ? "-" : `${(w.share * 100).toFixed(0)} %`]);
  return [
    `Fleet behind SMG ${f.smgVersion} at ${f.routerEndpoint}`,
    ...columns(rows),
    ...f.leftOut.map((l) => `left out: ${l.name} (${l.reason})`),
    mixedTable(m),
    ...f.drift.map((d) => `drift: ${d.field}: expected ${d.expected ?? "(absent)"}, found ${d.found ?? "(absent)"}`),
  ].join("\n");
}
