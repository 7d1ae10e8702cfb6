// What `gpuhost drift` remembers between checks, and the two decisions it takes from it: whether a
// stack whose last update failed stays paused (no check until a person acts), and whether --repair
// may run the update for the drift found now (at most N a day, never twice for the same drift).
// One small JSON file per stack, in the user's state folder ($XDG_STATE_HOME/gpuhost, else
// ~/.local/state/gpuhost): it must outlive the textfile folder's contents and work without
// --textfile, and it holds nothing secret (item names, a count, an update's start time).
import { randomUUID } from "node:crypto";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { z } from "zod";
import { type DriftReport, subjectsOf } from "./report";

/** One entry of `pulumi stack history --json`, as far as gpuhost reads it (engine/pulumi.ts reads it;
 * it is declared here, below the engine, because the drift guard judges it). */
export interface UpdateRecord {
  /** update, refresh, destroy, import, ... */
  kind: string;
  /** succeeded, failed, in-progress */
  result: string;
  /** The update's number (the file backend of 3.276.0 writes 0 for every one: startTime tells them apart). */
  version?: number;
  startTime?: string;
  endTime?: string;
}

export const DriftStateSchema = z
  .object({
    /** The UTC day (YYYY-MM-DD) `repairs` counts. */
    day: z.string().regex(/^\d{4}-\d{2}-\d{2}$/),
    /** How many repairs ran that day. */
    repairs: z.number().int().nonnegative(),
    /** The drift (driftItems) the last repair ran for: the same drift is never repaired again. */
    lastRepaired: z.array(z.string()).optional(),
    /** The failed update (updateKey) a person acknowledged with --resume: it no longer pauses the check. */
    acknowledged: z.string().optional(),
  })
  .strict();
export type DriftState = z.infer<typeof DriftStateSchema>;

/** The UTC day of MS (ms since the epoch), as DriftState.day. */
export const utcDay = (ms: number): string => new Date(ms).toISOString().slice(0, 10);

/** The folder of the state files: $XDG_STATE_HOME/gpuhost, else ~/.local/state/gpuhost. */
export function stateDir(env: NodeJS.ProcessEnv = process.env): string {
  const base = env.XDG_STATE_HOME || path.join(os.homedir(), ".local", "state");
  return path.join(base, "gpuhost");
}

/** STACK's state file (an org/project/stack name's slashes become _, as the textfile's name). */
export const stateFile = (stack: string, dir: string = stateDir()): string =>
  path.join(dir, `drift-${stack.replace(/[^A-Za-z0-9_.-]/g, "_")}.json`);

/** The state in FILE; a fresh one (today, no repairs) when there is none. Throws one sentence on a bad file. */
export function readDriftState(file: string, nowMs: number): DriftState {
  let text: string;
  try {
    text = fs.readFileSync(file, "utf8");
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === "ENOENT") return { day: utcDay(nowMs), repairs: 0 };
    throw e;
  }
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    parsed = undefined;
  }
  const r = DriftStateSchema.safeParse(parsed);
  if (!r.success)
    throw new Error(`${file} is not a gpuhost drift state file: remove it (it is rewritten on the next check)`);
  return r.data;
}

/** Writes STATE to FILE whole (a temporary file renamed over it), creating its folder owner-only. */
export function writeDriftState(file: string, state: DriftState): void {
  fs.mkdirSync(path.dirname(file), { recursive: true, mode: 0o700 });
  const temp = `${file}.${process.pid}.${randomUUID()}.tmp`;
  try {
    fs.writeFileSync(temp, `${JSON.stringify(state, null, 2)}\n`, { mode: 0o600 });
    fs.renameSync(temp, file);
  } catch (e) {
    fs.rmSync(temp, { force: true });
    throw e;
  }
}

/** What a failed update is known by: the file backend numbers every update 0, so its start time too. */
export const updateKey = (u: UpdateRecord): string => `${u.version ?? "?"}@${u.startTime ?? "?"}`;

/** Whether LAST (the stack's last update) pauses the check: it failed, and no one acknowledged it. */
export const pausedBy = (last: UpdateRecord | undefined, state: DriftState): boolean =>
  last?.result === "failed" && state.acknowledged !== updateKey(last);

/** The drift of REPORT as one sorted list of "<host> <item>" (the metrics' host and item labels). */
export function driftItems(report: DriftReport): string[] {
  const items = [...subjectsOf(report)].flatMap(([host, f]) => f.drift.map((d) => `${host} ${d.field}`));
  return [...items, ...report.otherChanges.map((c) => ` ${c.op} ${c.urn}`)].sort();
}

/** Why --repair did not run the update: the day's repairs are used up, or it ran for this drift already. */
/**
 * Why --repair did not run the update: today's repairs used up, this very drift repaired before, or
 * a lock a dead process left on the stack (the update would only fail on it, using up a repair).
 */
export type RepairHold = "daily-limit" | "same-drift" | "dead-lock";

/** Whether --repair may run the update for ITEMS today (NOWMS) with at most LIMIT a day: undefined when it may. */
export function repairHold(
  state: DriftState,
  items: readonly string[],
  nowMs: number,
  limit: number,
): RepairHold | undefined {
  const last = state.lastRepaired;
  // Before the limit: a repair that did not hold is not retried tomorrow either, until the drift changes.
  if (last !== undefined && last.length === items.length && last.every((x, i) => x === items[i])) return "same-drift";
  return repairsToday(state, nowMs) >= limit ? "daily-limit" : undefined;
}

/** STATE after a repair for ITEMS at NOWMS: one more today, and the drift it ran for. */
export function afterRepair(state: DriftState, items: readonly string[], nowMs: number): DriftState {
  return { ...state, day: utcDay(nowMs), repairs: repairsToday(state, nowMs) + 1, lastRepaired: [...items] };
}

/** How many repairs ran today (NOWMS) by STATE. */
export const repairsToday = (state: DriftState, nowMs: number): number =>
  state.day === utcDay(nowMs) ? state.repairs : 0;
