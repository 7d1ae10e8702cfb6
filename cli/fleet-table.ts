// The fleet as a table for a terminal (demo, README): per worker its share of the router's requests
// and its own sustained figure, the fleet total through the router with its 95 % interval over the
// runs, scaling efficiency and the plan.
import { certificateText } from "../gate/measurement/certificate";
import type { FleetOutputs } from "../stack/outputs";

const num = (v: number | null | undefined, digits = 1): string =>
  typeof v === "number" && Number.isFinite(v) ? v.toFixed(digits) : "-";

/** "76600.3 ± 1234.5 (95 %, 3 runs)", or the mean alone where no interval was measured. */
export function withInterval(mean: number, interval: FleetOutputs["sustainedInterval"] | undefined): string {
  if (!interval) return num(mean);
  return `${num(mean)} ± ${num(interval.halfWidth)} (95 %, ${interval.runs} runs)`;
}

export function fleetTable(f: FleetOutputs): string {
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
  const widths = rows[0].map((_, i) => Math.max(...rows.map((r) => r[i].length)));
  const line = (r: string[]) => r.map((c, i) => (i === 0 ? c.padEnd(widths[i]) : c.padStart(widths[i]))).join("  ");
  const p = f.plan;
  return [
    `Fleet behind SMG ${f.smgVersion} at ${f.routerEndpoint}`,
    line(rows[0]),
    ...rows.slice(1, -1).map(line),
    widths.map((w) => "-".repeat(w)).join("  "),
    line(rows[rows.length - 1]),
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
