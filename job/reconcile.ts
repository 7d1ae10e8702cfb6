/**
 * The job's tokens beside the server's own count, read the way a benchmark level is reconciled
 * (gate/run/server-counters.ts: its /metrics before and after). A job is no closed level:
 * the server may count tokens the job never records (a request in flight at a stop is generated
 * again, a failed try, the one-token probes, another client), so this says the two figures and their
 * ratio rather than judging them.
 */
import type { CounterRead } from "../gate/base/samples";

/** One sentence: what the server counted for MODEL between BEFORE and AFTER, beside what the job recorded. */
export function reconciliation(before: CounterRead, after: CounterRead, model: string, jobTokens: number): string {
  if (!before.ok) return `the server's counters were not read (${before.reason})`;
  if (!after.ok) return `the server's counters were not read at the end (${after.reason})`;
  const b = before.snapshot;
  const a = after.snapshot;
  if (b.processStartSeconds !== null && a.processStartSeconds !== b.processStartSeconds)
    return "the server restarted during this run: its counters started again, so they are not compared";
  const counted = a.generatedTokens - b.generatedTokens;
  const share = counted > 0 ? ` (${((jobTokens / counted) * 100).toFixed(1)} % of them)` : "";
  return `the server counted ${counted.toLocaleString("en-US")} tokens generated for ${model} during this run; the job recorded ${jobTokens.toLocaleString("en-US")}${share}`;
}
