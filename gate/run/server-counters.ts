/**
 * The server's own count of what it served, read from its Prometheus /metrics: the other side of
 * every figure the client counts. A benchmark level is reconciled (certificate.ts) by reading the
 * counters before and after it and comparing their growth with what the client counted.
 *
 * The exposition format is parsed by parse-prometheus-text-format (a port of the Prometheus Python
 * client's parser), not by a regex of ours. The metric names of each server are in one table below.
 */
import parsePrometheusTextFormat from "parse-prometheus-text-format";
import type { Agent } from "undici";
import { baseUrl, describeError, fetchText, makeAgent } from "../transport/http";
import { withTimeout } from "../transport/timers";
import { SERVER_COUNTERS, type CounterRead, type CounterSnapshot, type ServerDialect } from "../base/samples";

interface ParsedFamily {
  name: string;
  metrics: { value?: string; labels?: Record<string, string> }[];
}

const MODEL_LABEL = "model_name";

/**
 * The counters of MODEL in an exposition text. Series labelled with another model_name are kept
 * apart (generatedByModel); unlabelled series count for the model measured (one-model servers).
 */
export function parseCounters(text: string, model: string): CounterRead {
  let families: ParsedFamily[];
  try {
    families = parsePrometheusTextFormat(text);
  } catch (err) {
    return { ok: false, reason: `its /metrics is not the Prometheus text format (${describeError(err)})` };
  }
  // One family per name: series of a name the exposition splits (no TYPE line, or lines apart) count together.
  const byName = new Map<string, ParsedFamily>();
  for (const f of families)
    byName.set(f.name, { name: f.name, metrics: [...(byName.get(f.name)?.metrics ?? []), ...f.metrics] });
  const dialect = (Object.keys(SERVER_COUNTERS) as ServerDialect[]).find((d) =>
    byName.has(SERVER_COUNTERS[d].generated),
  );
  if (dialect === undefined)
    return {
      ok: false,
      reason: `its /metrics has none of ${Object.values(SERVER_COUNTERS)
        .map((n) => n.generated)
        .join(", ")}`,
    };
  const names = SERVER_COUNTERS[dialect];
  const generatedByModel: Record<string, number> = {};
  for (const m of byName.get(names.generated)?.metrics ?? []) {
    const owner = m.labels?.[MODEL_LABEL] ?? model;
    generatedByModel[owner] = (generatedByModel[owner] ?? 0) + Number(m.value);
  }
  const sum = (name: string | null): number | null => {
    if (name === null) return null;
    const family = byName.get(name);
    if (!family) return null;
    const mine = family.metrics.filter((m) => (m.labels?.[MODEL_LABEL] ?? model) === model);
    return mine.reduce((a, m) => a + Number(m.value), 0);
  };
  const generatedTokens = generatedByModel[model] ?? 0;
  const held = names.held.map(sum).filter((v): v is number => v !== null);
  const start = byName.get("process_start_time_seconds")?.metrics[0]?.value;
  const snapshot: CounterSnapshot = {
    dialect,
    generatedTokens,
    promptTokens: sum(names.prompt),
    requests: sum(names.requests),
    generatedByModel,
    processStartSeconds: start === undefined ? null : Number(start),
    heldRequests: held.length === 0 ? null : held.reduce((a, v) => a + v, 0),
  };
  const values = [
    snapshot.generatedTokens,
    snapshot.promptTokens ?? 0,
    snapshot.requests ?? 0,
    snapshot.heldRequests ?? 0,
  ];
  if (values.some((v) => !Number.isFinite(v))) return { ok: false, reason: "its /metrics counters are not numbers" };
  return { ok: true, snapshot };
}

/** Reads the counters of MODEL from BASE/metrics, bounded by TIMEOUT_MS; never throws. */
export async function readCounters(
  agent: Agent,
  base: string,
  model: string,
  apiKey: string | undefined,
  signal: AbortSignal,
  timeoutMs = 5_000,
): Promise<CounterRead> {
  try {
    const reply = await withTimeout(
      [signal],
      timeoutMs,
      () => `no answer within ${timeoutMs / 1000} s`,
      (s) => fetchText(agent, `${base}/metrics`, { apiKey, signal: s }),
    );
    if (reply.status !== 200) return { ok: false, reason: `GET /metrics answered HTTP ${reply.status}` };
    return parseCounters(reply.text, model);
  } catch (err) {
    return { ok: false, reason: `GET /metrics: ${describeError(err)}` };
  }
}

/**
 * The counters of a fleet: each worker's, summed. A router balances the requests over its workers
 * and keeps no token counts of its own, so what the fleet served is what its workers counted. A
 * worker whose counters cannot be read leaves the fleet not reconciled, named.
 */
export async function fleetCounters(
  workers: string[],
  model: string,
  apiKey: string | undefined,
  signal: AbortSignal,
): Promise<CounterRead> {
  const agent = makeAgent(Math.max(1, workers.length));
  let reads: CounterRead[];
  try {
    reads = await Promise.all(workers.map((w) => readCounters(agent, baseUrl(w), model, apiKey, signal)));
  } finally {
    void agent.destroy().catch(() => undefined);
  }
  return summedCounters(workers, reads);
}

/** WORKERS' reads (in the same order), summed: the fleet's; a read that failed leaves it not reconciled, named. */
export function summedCounters(workers: string[], reads: CounterRead[]): CounterRead {
  const failed = reads.flatMap((r, i) => (r.ok ? [] : [`${workers[i]}: ${r.reason}`]));
  if (failed.length > 0) return { ok: false, reason: `a worker's counters could not be read (${failed.join("; ")})` };
  const snapshots = reads.map((r) => (r as { ok: true; snapshot: CounterSnapshot }).snapshot);
  const add = (pick: (s: CounterSnapshot) => number | null) =>
    snapshots.some((s) => pick(s) === null) ? null : snapshots.reduce((a, s) => a + (pick(s) ?? 0), 0);
  const generatedByModel: Record<string, number> = {};
  for (const s of snapshots)
    for (const [m, v] of Object.entries(s.generatedByModel)) generatedByModel[m] = (generatedByModel[m] ?? 0) + v;
  return {
    ok: true,
    snapshot: {
      dialect: snapshots[0].dialect,
      generatedTokens: add((s) => s.generatedTokens) ?? 0,
      promptTokens: add((s) => s.promptTokens),
      requests: add((s) => s.requests),
      generatedByModel,
      // Several processes: a restart shows as counters going back, not as one start time.
      processStartSeconds: null,
      // Not the fleet's load: the requests in the router's hands, on their way to a worker or
      // streaming back, are held by no worker, so the workers' sum reads low under a router that is
      // busy (on a loaded 2-core machine, 9.3 of 12 in flight); the load check keeps the client's side.
      heldRequests: null,
    },
  };
}
