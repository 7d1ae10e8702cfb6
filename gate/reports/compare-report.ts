/**
 * A comparison as a person reads it: the per-service table, the crossovers, the recommendation and
 * the capacity plan per service, as text; and a JSON document without the raw samples (they stay
 * in the cache file). The CSV is csv.ts's, the chart chart.ts's.
 */
import { certificateText } from "../judge/certificate";
import { SERVICE_LABEL, type Comparison } from "../plan/compare";
import type { CompareResult } from "../plan/compare-run";
import { levelPhrase } from "../judge/levels";
import { duration } from "./duration";
import { timeNote } from "./outputs";

const num = (v: number, digits = 0) =>
  v.toLocaleString("en-US", { maximumFractionDigits: digits, minimumFractionDigits: digits });

/**
 * The comparison as text. With `rooflineAt` (the host's roofline at a concurrency, physics/), each
 * closed-loop level also says the share of the roofline its throughput reaches.
 */
export function compareText(r: CompareResult, rooflineAt?: (concurrency: number) => number): string {
  const lines: string[] = [timeNote(r.timeScale), ""];
  for (const o of r.outcomes) {
    const head = `${SERVICE_LABEL[o.service]}${o.measured ? "" : " (unchanged, from the last comparison)"}`;
    const accept =
      o.acceptanceLength !== null ? `, acceptance ${o.acceptanceLength.toFixed(2)} tokens/step at 1 stream` : "";
    lines.push(`${head}${accept}`);
    if (o.failure) {
      lines.push(`  left out: ${o.failure}`, "");
      continue;
    }
    if (o.sweep.some((l) => l.mode === "open"))
      lines.push("  (levels are request rates offered per second; achieved: requests the server began per second)");
    lines.push(
      `  level   tok/s (95% CI)        goodput   TTFT p95   TTFA p95   ITL p50/tok  E2E p50    accept  ${rooflineAt ? "roofline  " : ""}errors`,
    );
    for (const l of o.sweep) {
      const ci = l.throughput.halfWidth === null ? "" : ` ± ${num(l.throughput.halfWidth)}`;
      const budget = l.withinErrorBudget === false ? " FAILED (error budget)" : "";
      const behind =
        l.mode === "open"
          ? ` achieved ${l.achievedRequestsPerSecond?.toFixed(2) ?? "n/a"}${l.keptUp === false ? " (saturated)" : ""}`
          : "";
      lines.push(
        `  ${String(l.level).padEnd(7)} ${`${num(l.throughput.mean)}${ci}`.padEnd(21)} ${num(l.goodput.mean).padEnd(9)} ${duration(l.ttftP95Seconds).padEnd(10)} ${duration(l.ttfaP95Seconds).padEnd(10)} ${duration(l.itlPerTokenP50Seconds).padEnd(12)} ${duration(l.e2eP50Seconds).padEnd(10)} ${(l.acceptanceLength?.toFixed(2) ?? "-").padEnd(7)} ${rooflineAt ? `${l.mode === "open" ? "-" : `${((100 * l.throughput.mean) / rooflineAt(l.level)).toFixed(0)} %`}`.padEnd(9) + " " : ""}${l.errors}/${l.requests}${budget}${behind}  ${certificateText(l.certificate)}`,
      );
    }
    lines.push("");
  }
  if (r.comparison) lines.push(...comparisonLines(r.comparison));
  else lines.push("No service could be measured: nothing to recommend.");
  lines.push(`Active now: ${SERVICE_LABEL[r.activeAfter]}.`);
  return lines.join("\n") + "\n";
}

export function comparisonLines(c: Comparison): string[] {
  const out: string[] = [];
  for (const x of c.crossovers) {
    const label = SERVICE_LABEL[x.service];
    if (x.firstLevelNotBetter !== null)
      out.push(
        `Crossover: ${label} stops beating autoregressive at ${levelPhrase(c.mode, x.firstLevelNotBetter)} (estimated ${x.estimatedLevel!.toFixed(0)}).`,
      );
    else
      out.push(
        `Crossover: ${label} ${x.winsAtLowest ? "beats" : "never beats"} autoregressive at every level measured.`,
      );
  }
  const job = c.job;
  out.push(
    "",
    `Plan for ${num(job.completions)} completions x ${num(job.outputTokensPerCompletion)} tokens (${num(job.completions * job.outputTokensPerCompletion)} tokens), deadline ${job.deadlineDays} days:`,
    "  service          sustained tok/s  at   days on 1 host  hosts for deadline  $ per M tokens",
  );
  for (const p of c.plans) {
    out.push(
      `  ${SERVICE_LABEL[p.service].padEnd(16)} ${num(p.sustainedOutputTokensPerSecond).padEnd(16)} ${String(p.atLevel ?? "-").padEnd(4)} ${(p.daysOnOneHost?.toFixed(1) ?? "never").padEnd(15)} ${String(p.hostsForDeadline ?? "n/a").padEnd(19)} ${p.costPerMillionTokens === null ? "-" : p.costPerMillionTokens.toFixed(2)}`,
    );
  }
  for (const p of c.plans) if (p.knee) out.push(`  ${SERVICE_LABEL[p.service]}: ${p.knee.verdict}`);
  for (const p of c.plans)
    if (p.answers !== null)
      out.push(
        `  ${SERVICE_LABEL[p.service]} answers: ${p.answers}${p.notRecommended ? `; NOT RECOMMENDED: ${p.notRecommended}` : ""}`,
      );
  out.push("", c.sentence);
  return out;
}

/** The result without raw samples. */
export function compareJson(r: CompareResult): unknown {
  return {
    timeNote: timeNote(r.timeScale),
    timeScale: r.timeScale,
    activeAfter: r.activeAfter,
    measuredNow: r.measuredNow,
    comparison: r.comparison,
    services: r.outcomes.map((o) => ({
      ...o,
      sweep: o.sweep.map(({ runs, ...l }) => ({ ...l, runs: runs.map(({ samples: _samples, ...run }) => run) })),
    })),
  };
}
