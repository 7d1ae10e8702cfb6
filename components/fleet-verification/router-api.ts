/**
 * SMG's admin API as FleetVerification uses it (no Pulumi): the worker list, declarative
 * reconciliation (register what the stack says and the router lacks or has failed, remove what
 * the stack does not know), and the per-worker request counters on its Prometheus port.
 *
 * Why reconcile at all when the list is in the router's config: SMG marks a worker Failed after
 * repeated failed probes and never probes it again, so a host that restarted (a large model loads
 * for minutes) stays out until it is registered again.
 */
export interface RouterWorker {
  id: string;
  url: string;
  status: string;
  isHealthy: boolean;
}

const headers = (apiKey?: string): Record<string, string> => ({
  "content-type": "application/json",
  ...(apiKey ? { authorization: `Bearer ${apiKey}` } : {}),
});

async function call(url: string, init: RequestInit, signal: AbortSignal | undefined, what: string): Promise<unknown> {
  const timeout = AbortSignal.timeout(10_000);
  const r = await fetch(url, { ...init, signal: signal ? AbortSignal.any([signal, timeout]) : timeout });
  const text = await r.text();
  if (!r.ok) throw new Error(`${what}: HTTP ${r.status} ${text.slice(0, 300)}`);
  try {
    return JSON.parse(text) as unknown;
  } catch {
    return text;
  }
}

export async function listWorkers(router: string, apiKey?: string, signal?: AbortSignal): Promise<RouterWorker[]> {
  const body = (await call(`${router}/workers`, { headers: headers(apiKey) }, signal, "GET /workers")) as {
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
            { method: "DELETE", headers: headers(opts.apiKey) },
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
          {
            method: "POST",
            headers: headers(opts.apiKey),
            body: JSON.stringify({ url, ...(opts.apiKey ? { api_key: opts.apiKey } : {}) }),
          },
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
  const body = (await call(`${router}/get_loads`, { headers: headers(apiKey) }, signal, "GET /get_loads")) as {
    version?: unknown;
  };
  return typeof body?.version === "string" ? body.version : undefined;
}

/** smg_worker_requests_total per worker URL (summed over models), from the Prometheus text. */
export function workerRequestCounts(metrics: string): Record<string, number> {
  const out: Record<string, number> = {};
  for (const line of metrics.split("\n")) {
    const m = /^smg_worker_requests_total\{([^}]*)\}\s+([0-9.eE+-]+)/.exec(line);
    if (!m) continue;
    const worker = /(?:^|,)worker="([^"]*)"/.exec(m[1])?.[1];
    if (worker !== undefined) out[worker] = (out[worker] ?? 0) + Number(m[2]);
  }
  return out;
}

export async function readRequestCounts(metricsUrl: string, signal?: AbortSignal): Promise<Record<string, number>> {
  const text = (await call(metricsUrl, {}, signal, "GET /metrics")) as string;
  return workerRequestCounts(typeof text === "string" ? text : "");
}
