// `gpuhost drift --textfile DIR`: the check as Prometheus metrics for node_exporter's textfile
// collector, which reads DIR/*.prom on every scrape. The file is written whole to a temporary name in
// DIR (not *.prom, so the collector skips it) and renamed over the old one: a scrape sees the last
// check or this one, never half a file. A failed check writes it too (success 0 and its reason), so
// an alert on success == 0 fires; node_exporter's node_textfile_mtime_seconds tells a check that
// stopped running at all.
import { randomUUID } from "node:crypto";
import * as fs from "node:fs";
import * as path from "node:path";
import { Gauge, Registry } from "prom-client";
import type { RepairHold } from "./guard";
import { type DriftOutcome, isHeld } from "./outcome";
import { type DriftReport, subjectsOf } from "./report";
import type { HealthCheck } from "../../gate/health/health";

export interface CheckTiming {
  /** When the check ended (ms since the epoch). */
  endedAtMs: number;
  durationMs: number;
}

/** What --repair did in this check (absent without --repair). */
export interface RepairMetrics {
  /** Whether it ran the update, and its exit status then. */
  ran: boolean;
  updateExit?: number;
  /** Why it did not, when drift was found and it did not. */
  held?: RepairHold;
  /** Repairs run today (UTC), this one included, and the daily limit. */
  today: number;
  limit: number;
}

/** A gauge in REGISTERS; its series are written in the order the gauges were made. */
function gaugeIn(registers: Registry[], name: string, help: string, labelNames: string[] = ["stack"]): Gauge {
  return new Gauge({ name, help, labelNames, registers });
}

/** The exposition (Prometheus text format 0.0.4) of one check: prom-client's registry writes it. */
export async function driftExposition(
  report: DriftReport,
  outcome: DriftOutcome,
  timing: CheckTiming,
  repair?: RepairMetrics,
): Promise<string> {
  const registers = [new Registry()];
  const stack = report.stack ?? "";
  const check = checkGauges(registers);
  serviceHealth(report, registers);
  findingMetrics(check, report, stack);
  outcomeMetrics(check, stack, outcome);
  heldMetrics(registers, stack, outcome);
  if (repair) repairMetrics(registers, stack, repair);
  check.timestamp.set({ stack }, timing.endedAtMs / 1000);
  check.duration.set({ stack }, timing.durationMs / 1000);
  return registers[0].metrics();
}

type CheckGauges = Record<"drift" | "items" | "success" | "reason" | "timestamp" | "duration", Gauge>;

/** The series every check writes, made first so that they lead the file. */
function checkGauges(registers: Registry[]): CheckGauges {
  const gauge = (name: string, help: string, labelNames?: string[]) => gaugeIn(registers, name, help, labelNames);
  return {
    drift: gauge(
      "gpuhost_drift",
      "1 for each item that drifted (item: what the check compared, e.g. files.<path> or packages.<name>; group: a mixed fleet's group the item belongs to)",
      ["stack", "host", "item", "group"],
    ),
    items: gauge("gpuhost_drift_items", "How many items drifted on each host, service or router the check reached", [
      "stack",
      "host",
    ]),
    success: gauge("gpuhost_drift_check_success", "1 when the check gave a verdict (clean or drift), 0 when it failed"),
    reason: gauge(
      "gpuhost_drift_check_failure_reason",
      "1 for the reason the check failed (gpuhost drift's outcome: see its exit statuses)",
      ["stack", "reason"],
    ),
    timestamp: gauge("gpuhost_drift_check_timestamp_seconds", "When the check ended, in seconds since the epoch"),
    duration: gauge("gpuhost_drift_check_duration_seconds", "How long the check took"),
  };
}

/** Each drifted item of each host, service and router, and how many each has. */
function findingMetrics(check: CheckGauges, report: DriftReport, stack: string): void {
  for (const [host, finding] of subjectsOf(report)) {
    check.items.set({ stack, host }, finding.drift.length);
    for (const d of finding.drift) check.drift.set({ stack, host, item: d.field, ...groupLabel(d.field) }, 1);
  }
  // Resources of other types that a refresh would change: no host of their own, the URN is the item.
  if (report.otherChanges.length > 0) check.items.set({ stack, host: "" }, report.otherChanges.length);
  for (const c of report.otherChanges) check.drift.set({ stack, host: "", item: `${c.op} ${c.urn}` }, 1);
}

function outcomeMetrics(check: CheckGauges, stack: string, outcome: DriftOutcome): void {
  const ok = outcome === "clean" || outcome === "drift";
  // A check held on purpose (locked, paused) neither succeeded nor failed: no success series, so an
  // alert on success == 0 stays quiet while an update runs; its own series says why.
  if (!isHeld(outcome)) check.success.set({ stack }, ok ? 1 : 0);
  if (!ok && !isHeld(outcome)) check.reason.set({ stack, reason: outcome }, 1);
}

/** A mixed fleet's worker (groups.<group>.workers.<host>, fleet-verification routerDrift): its group as a label. */
function groupLabel(field: string): { group?: string } {
  const group = /^groups\.([^.]+)\.workers\./.exec(field)?.[1];
  return group === undefined ? {} : { group };
}

/** Each health figure of a service: its metric, what it means, and where the check's result has it. */
const HEALTH_FIGURES: [string, string, (h: HealthCheck) => number | null][] = [
  [
    "gpuhost_service_answer_matches",
    "1 when the greedy answer to the reference prompt is within answerMaxDifference of the verified one, 0 when it changed",
    (h) => (h.answerMatches === null ? null : h.answerMatches ? 1 : 0),
  ],
  [
    "gpuhost_service_answer_difference",
    "Word-level edit distance of the reference answer from the verified one (0 identical, 1 all different)",
    (h) => h.answerDifference,
  ],
  [
    "gpuhost_service_decode_tokens_per_second",
    "Single-stream decode tokens per second of the check's probe",
    (h) => h.decodeTokensPerSecond,
  ],
  [
    "gpuhost_service_decode_tokens_per_second_baseline",
    "Single-stream decode tokens per second at the last verified generation",
    (h) => h.decodeTokensPerSecondBaseline,
  ],
  [
    "gpuhost_service_acceptance_length",
    "Speculative acceptance length (tokens per verify step) the server reports",
    (h) => h.acceptanceLength,
  ],
  [
    "gpuhost_service_acceptance_length_baseline",
    "Speculative acceptance length at the last verified generation",
    (h) => h.acceptanceLengthBaseline,
  ],
  [
    "gpuhost_service_acceptance_floor",
    "Speculative acceptance length below which speculation counts as broken",
    (h) => h.acceptanceFloor,
  ],
];

/**
 * Point 4's figures per service (label service: its endpoint, as the report names it): what the
 * refresh measured of the model's own health and the baselines it compared with. A figure the check
 * could not measure is left out, not written as 0, so an alert on it cannot read "not checked" as a collapse.
 */
function serviceHealth(report: DriftReport, registers: Registry[]): void {
  const stack = report.stack ?? "";
  // No health measured (no service, or none generating): no empty families in the file.
  if (!(report.services ?? []).some((s) => s.health !== undefined)) return;
  const figures = HEALTH_FIGURES.map(
    ([name, help, of]) => [gaugeIn(registers, name, help, ["stack", "service"]), of] as const,
  );
  for (const s of report.services ?? []) {
    if (s.health === undefined) continue;
    for (const [g, of] of figures) {
      const v = of(s.health);
      if (v !== null && Number.isFinite(v)) g.set({ stack, service: s.endpoint }, v);
    }
  }
}

/**
 * A skipped check (an update holds the lock, or one ran during the check) or a paused one (the last update failed), as 1; each
 * series registered only when it has a sample, so a plain check's file is as before.
 */
function heldMetrics(registers: Registry[], stack: string, outcome: DriftOutcome): void {
  if (outcome === "locked" || outcome === "overlapped")
    new Gauge({
      name: "gpuhost_drift_check_skipped",
      help: "1 when the check was skipped: an update holds the stack's lock (reason: locked; nothing was checked), or skipped: an update ran during the check (reason: overlapped; its result was discarded)",
      labelNames: ["stack", "reason"],
      registers,
    }).set({ stack, reason: outcome }, 1);
  if (outcome === "paused")
    new Gauge({
      name: "gpuhost_drift_check_paused",
      help: "1 while checks are paused because the stack's last update failed (reason: failed-update) until a person acts: a successful pulumi up, or gpuhost drift --resume",
      labelNames: ["stack", "reason"],
      registers,
    }).set({ stack, reason: "failed-update" }, 1);
}

/** What --repair did: whether it ran the update and how that ended, or why not, and today's count. */
function repairMetrics(registers: Registry[], stack: string, repair: RepairMetrics): void {
  const gauge = (name: string, help: string, labelNames?: string[]) => gaugeIn(registers, name, help, labelNames);
  gauge("gpuhost_drift_repair_ran", "1 when this check ran the update (--repair) for the drift it found").set(
    { stack },
    repair.ran ? 1 : 0,
  );
  if (repair.ran)
    gauge("gpuhost_drift_repair_success", "1 when the repair's update succeeded, 0 when it failed").set(
      { stack },
      repair.updateExit === 0 ? 1 : 0,
    );
  if (repair.held)
    gauge(
      "gpuhost_drift_repair_held",
      "1 when drift was found and --repair did not run the update (reason: daily-limit; same-drift: it ran for this very drift before; dead-lock: a lock a dead process left, which the update would fail on)",
      ["stack", "reason"],
    ).set({ stack, reason: repair.held }, 1);
  gauge("gpuhost_drift_repairs_today", "Repairs --repair ran today (UTC)").set({ stack }, repair.today);
  gauge("gpuhost_drift_repair_limit", "The most repairs --repair runs a day (--max-repairs)").set(
    { stack },
    repair.limit,
  );
}

/** The file name for STACK: the collector reads *.prom; an org/project/stack name's slashes become _. */
export const textfileName = (stack: string | undefined): string =>
  `gpuhost-drift-${(stack ?? "unnamed").replace(/[^A-Za-z0-9_.-]/g, "_")}.prom`;

/**
 * Writes TEXT as DIR's file for STACK (NAME: another command's file, e.g. `gpuhost job`'s): a
 * temporary file in DIR, flushed, then renamed over it. Its path.
 */
export function writeTextfile(
  dir: string,
  stack: string | undefined,
  text: string,
  name = textfileName(stack),
): string {
  const target = path.join(dir, name);
  // In DIR itself, so the rename is atomic (same filesystem); a dot name not ending in .prom.
  const temp = path.join(dir, `.${name}.${process.pid}.${randomUUID()}.tmp`);
  try {
    const fd = fs.openSync(temp, "wx", 0o644);
    try {
      fs.writeSync(fd, text);
      // readable by node_exporter's own user whatever this process's umask
      fs.fchmodSync(fd, 0o644);
      fs.fsyncSync(fd);
    } finally {
      fs.closeSync(fd);
    }
    fs.renameSync(temp, target);
  } catch (e) {
    fs.rmSync(temp, { force: true });
    throw e;
  }
  return target;
}
