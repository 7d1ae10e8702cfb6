/**
 * SMG's admin API as FleetVerification uses it (no Pulumi): the worker list, declarative
 * reconciliation (register what the stack says and the router lacks or has failed, remove what
 * the stack does not know), and the per-worker request counters on its Prometheus port.
 *
 * Why reconcile at all when the list is in the router's config: SMG marks a worker Failed after
 * repeated failed probes and never probes it again, so a host that restarted (a large model loads
 * for minutes) stays out until it is registered again.
 */
import { describeError, fetchOnce } from "../../gate/transport/http";
export interface RouterWorker {
  id: string;
  url: string;
  status: string;
  isHealthy: boolean;
}

/** The most one call to the router may take. */
const CALL_TIMEOUT_MS = 10_000;

/**
 * One call to the router's API or its metrics port, through the gate's own connections (openTcp's
 * connect): a connection that came back connected to itself (the router's port inside the ephemeral
 * range, nothing listening there yet) is refused like a closed port, never read as the router's
 * answer. The body is JSON when it parses, else its text.
 */
async function call(
  url: string,
  init: { method?: "GET" | "POST" | "DELETE"; body?: unknown; apiKey?: string },
  signal: AbortSignal | undefined,
  what: string,
): Promise<unknown> {
  const r = await fetchOnce(url, { ...init, timeoutMs: CALL_TIMEOUT_MS, signal }).catch((e: unknown) => {
    throw new Error(`${what} ${url}: ${describeError(e)}`, { cause: e });
  });
  if (r.status < 200 || r.status > 299) throw new Error(`${what}: HTTP ${r.status} ${r.text.slice(0, 300)}`);
  try {
    return JSON.parse(r.text) as unknown;
  } catch {
    return r.text;
  }
}

export async function listWorkers(router: string, apiKey?: string, signal?: AbortSignal): Promise<RouterWorker[]> {
  const body = (await call(`${router}/workers`, { apiKey }, signal, "GET /workers")) as {
    workers?: Array<{ id?: unknown; url?: unknown; status?: unknown; is_healthy?: unknown }>;
  };
  return (body.workers ?? []).map((w) => ({
    id: String(w.id),
    url: String(w.url),
    status: typeof w.status === "string" ? w.status : "",
    isHealthy: w.is_healthy === true,
  }));
}

/** One way the router's list differs from the stack's. */
export interface WorkerDifference {
  url: string;
  /** missing: the stack's worker is not in the router; unhealthy: it is, not healthy; unknown: the router's, not the stack's. */
  kind: "missing" | "unhealthy" | "unknown";
  /** The router's status of the worker (empty when missing). */
  status: string;
}

/** How the router's list differs from the stack's: the drift `gpuhost drift` and refresh name. */
export function workerDifferences(expected: readonly string[], actual: readonly RouterWorker[]): WorkerDifference[] {
  const out: WorkerDifference[] = [];
  for (const url of expected) {
    const w = actual.find((a) => a.url === url);
    if (!w) out.push({ url, kind: "missing", status: "" });
    else if (!w.isHealthy) out.push({ url, kind: "unhealthy", status: w.status || "unhealthy" });
  }
  for (const w of actual)
    if (!expected.includes(w.url)) out.push({ url: w.url, kind: "unknown", status: w.status || "unknown" });
  return out;
}

/** The router's state of a worker in words, e.g. "failed in the router". */
export function foundInRouter(d: WorkerDifference): string {
  if (d.kind === "missing") return "missing from the router";
  if (d.kind === "unhealthy") return `${d.status} in the router`;
  return `in the router (${d.status}), unknown to the stack`;
}

/** The differences as lines, e.g. "http://a: missing from the router". */
export function workerDrift(expected: readonly string[], actual: readonly RouterWorker[]): string[] {
  return workerDifferences(expected, actual).map((d) => `${d.url}: ${foundInRouter(d)}`);
}

/**
 * Brings the router's list to `expected` and waits until every expected worker is healthy, within
 * `deadlineMs`. Returns what it did (one line per action).
 */
export async function reconcileWorkers(
  router: string,
  expected: readonly string[],
  opts: { apiKey?: string; deadlineMs: number; signal?: AbortSignal; say?: (line: string) => void },
): Promise<string[]> {
  const until = Date.now() + opts.deadlineMs;
  const actions: string[] = [];
  const say = opts.say ?? (() => undefined);
  let last: RouterWorker[] = [];
  let lastError: string;
  const removing = new Set<string>();
  for (;;) {
    if (opts.signal?.aborted) throw new Error("interrupted while registering the workers");
    try {
      last = await listWorkers(router, opts.apiKey, opts.signal);
      if (workerDrift(expected, last).length === 0) return actions;
      for (const w of last) {
        const unknown = !expected.includes(w.url);
        const failed = !unknown && w.status.toLowerCase() === "failed";
        if ((unknown || failed) && !removing.has(w.id)) {
          await call(
            `${router}/workers/${encodeURIComponent(w.id)}`,
            { method: "DELETE", apiKey: opts.apiKey },
            opts.signal,
            "DELETE /workers",
          );
          removing.add(w.id);
          actions.push(`${w.url}: removed (${unknown ? "unknown to the stack" : "failed in the router"})`);
          say(actions[actions.length - 1]);
        }
      }
      for (const url of expected) {
        if (last.some((w) => w.url === url)) continue;
        await call(
          `${router}/workers`,
          { method: "POST", apiKey: opts.apiKey, body: { url, ...(opts.apiKey ? { api_key: opts.apiKey } : {}) } },
          opts.signal,
          "POST /workers",
        ).catch((e: Error) => {
          // A removal still draining holds the URL: the next round registers it.
          if (!/WORKER_ALREADY_EXISTS|409/.test(e.message)) throw e;
        });
        actions.push(`${url}: registered`);
        say(actions[actions.length - 1]);
      }
      lastError = "";
    } catch (e) {
      lastError = (e as Error).message;
    }
    if (Date.now() > until) {
      const drift = workerDrift(expected, last);
      throw new Error(
        `the router's workers were not all healthy within ${Math.round(opts.deadlineMs / 1000)} s: ${[...drift, lastError].filter(Boolean).join("; ")}`,
      );
    }
    await new Promise((r) => setTimeout(r, 1000));
  }
}

/** The router's own version string (`/get_loads` answers e.g. "smg-1.13.0"); undefined when it names none. */
export async function routerVersion(
  router: string,
  apiKey?: string,
  signal?: AbortSignal,
): Promise<string | undefined> {
  const body = (await call(`${router}/get_loads`, { apiKey }, signal, "GET /get_loads")) as {
    version?: unknown;
  };
  return typeof body?.version === "string" ? body.version : undefined;
}

/** One smg per-worker metric by worker URL (summed over its other labels), from the Prometheus text. */
export function perWorker(metrics: string, name: string): Record<string, number> {
  const out: Record<string, number> = {};
  for (const line of metrics.split("\n")) {
    const m = /^([a-z_]+)\{([^}]*)\}\s+([0-9.eE+-]+)/.exec(line);
    if (!m || m[1] !== name) continue;
    const worker = /(?:^|,)worker="([^"]*)"/.exec(m[2])?.[1];
    if (worker !== undefined) out[worker] = (out[worker] ?? 0) + Number(m[3]);
  }
  return out;
}

/** smg_worker_requests_total per worker URL (summed over models), from the Prometheus text. */
export function workerRequestCounts(metrics: string): Record<string, number> {
  return perWorker(metrics, "smg_worker_requests_total");
}

async function readMetrics(metricsUrl: string, signal?: AbortSignal): Promise<string> {
  const text = await call(metricsUrl, {}, signal, "GET /metrics");
  return typeof text === "string" ? text : "";
}

export async function readRequestCounts(metricsUrl: string, signal?: AbortSignal): Promise<Record<string, number>> {
  return workerRequestCounts(await readMetrics(metricsUrl, signal));
}

/**
 * The stack's workers the router found dead, each with why: missing or unhealthy in /workers (its
 * health probes, which lag by their interval), or its circuit breaker open or its last requests
 * failed (smg_worker_cb_state, smg_worker_cb_consecutive_failures: what the router's own requests
 * met, at once). The router retries a failed request on another worker, so these, not the client's
 * errors, say that a worker died under load. Worker URLs are as the router's machine reaches them,
 * so the router, not a probe from here, is asked.
 */
export async function workersLost(
  router: string,
  metricsUrl: string,
  workers: ReadonlyArray<{ name: string; url: string }>,
  apiKey?: string,
  signal?: AbortSignal,
): Promise<Array<{ name: string; url: string; why: string }>> {
  const [listed, metrics] = await Promise.all([listWorkers(router, apiKey, signal), readMetrics(metricsUrl, signal)]);
  const breaker = perWorker(metrics, "smg_worker_cb_state");
  const failures = perWorker(metrics, "smg_worker_cb_consecutive_failures");
  const differences = workerDifferences(
    workers.map((w) => w.url),
    listed,
  );
  const lost: Array<{ name: string; url: string; why: string }> = [];
  for (const w of workers) {
    const why: string[] = [];
    const d = differences.find((x) => x.url === w.url);
    if (d) why.push(foundInRouter(d));
    // 0 is closed; open and half-open both mean the router stopped trusting it.
    if ((breaker[w.url] ?? 0) !== 0) why.push("the router's circuit breaker for it is open");
    if ((failures[w.url] ?? 0) > 0) why.push(`the router's last ${failures[w.url]} requests to it failed`);
    if (why.length > 0) lost.push({ ...w, why: why.join(", ") });
  }
  return lost;
}
