/**
 * `gpuhost job`'s run: the input's requests against one endpoint, CONCURRENCY at a time, each result
 * appended as it comes (batch-file.ts), each request sent until it has an answer to record
 * (request.ts), what the job gets compared live with the plan (forecast.ts).
 *
 * Exactly once means one recorded result per custom_id: a request in flight when the process is
 * killed or interrupted was never recorded, so the next run sends it again (the GPU work of such a
 * request is at-least-once). Memory is bounded by the concurrency: the input is pulled a line at a
 * time as a request slot frees up; what is done is one byte per input line (batch-file.ts), and the
 * custom_ids are never held (id-index.ts).
 */
import { baseUrl, connectionBound, describeError, fetchText, makeAgent } from "../gate/transport/http";
import { withTimeout } from "../gate/transport/timers";
import type { ModelList } from "../gate/transport/wire";
import {
  type BatchRequest,
  fileLines,
  JobFileError,
  parseInputLine,
  recoverResults,
  ResultFiles,
  ResultLedger,
  scanInput,
} from "./batch-file";
import type { PlanBasis } from "./forecast";
import {
  type Answer,
  generatesOnce,
  type RetryPolicy,
  sendRequest,
  type SendContext,
  ServerDownError,
  ServerWatch,
} from "./request";
import { readCounters } from "../gate/run/server-counters";
import { reconciliation } from "./reconcile";
import { JobTracker, type JobState } from "./tracker";

export interface JobOptions {
  input: string;
  output: string;
  errors: string;
  endpoint: string;
  apiKey: string | undefined;
  concurrency: number;
  policy: RetryPolicy;
  /** The job stops when no request succeeded for this long (ms). */
  outageMs: number;
  plan: PlanBasis;
  /** The models the requests may name (the stack's served model); absent: what the endpoint's /v1/models lists. */
  served?: string[];
  /** Simulated seconds per wall second of the server (1: real hardware); rates and ETAs are the host's. */
  timeScale: number;
  /** The window of the live tokens/s (ms of wall time). */
  windowMs: number;
  /** How often the progress line is written (ms); 0: never. */
  progressEveryMs: number;
  say: (line: string) => void;
  /** Each progress tick's state (the CLI's summary and textfile). */
  onTick?: (state: JobState) => void;
  now?: () => number;
}

export interface JobResult extends JobState {
  /** Why the job stopped before the end: interrupted, or the server down past the bound; null when complete. */
  stopped: string | null;
  /** This run's tokens beside the server's own count (reconcile.ts). */
  serverCounters: string;
}

/**
 * The input scanned, and what earlier runs recorded matched to its lines: nothing recorded twice,
 * nothing foreign. Hands on one byte per input line (which are done), not the ids' index.
 */
async function prepare(o: JobOptions, signal: AbortSignal) {
  const scan = await scanInput(o.input, signal);
  const ledger = new ResultLedger(o.input, scan);
  const out = await recoverResults(o.output, ledger);
  const err = await recoverResults(o.errors, ledger);
  for (const cut of [out.cut, err.cut]) if (cut) o.say(cut);
  return { out, err, requests: scan.requests, models: scan.models, recorded: ledger.recorded };
}

/** The models the endpoint serves (GET /v1/models), or an error naming the endpoint. */
export async function servedModels(
  agent: ReturnType<typeof makeAgent>,
  base: string,
  apiKey: string | undefined,
  signal: AbortSignal,
): Promise<string[]> {
  let reply;
  try {
    reply = await withTimeout(
      [signal],
      30_000,
      () => "no answer within 30 s",
      (s) => fetchText(agent, `${base}/v1/models`, { apiKey, signal: s }),
    );
  } catch (e) {
    if (signal.aborted) throw e;
    throw new Error(`${base}/v1/models did not answer (${describeError(e)}): is the stack's service up?`, {
      cause: e,
    });
  }
  if (reply.status !== 200) throw new Error(`${base}/v1/models answered HTTP ${reply.status}`);
  try {
    const list = JSON.parse(reply.text) as ModelList;
    return (list.data ?? []).map((m) => String(m?.id ?? "")).filter((id) => id !== "");
  } catch {
    throw new Error(`${base}/v1/models answered something that is not JSON`);
  }
}

/** Every model the input asks for is one the endpoint serves: refused before the first request otherwise. */
export function checkModels(asked: Map<string, number>, served: string[], base: string): void {
  const missing = [...asked].filter(([m]) => !served.includes(m));
  if (missing.length > 0)
    throw new JobFileError(
      `the input asks for ${missing.map(([m, n]) => `${JSON.stringify(m)} (${n} request${n === 1 ? "" : "s"})`).join(", ")}, which ${base} does not serve (it serves ${served.map((s) => JSON.stringify(s)).join(", ") || "nothing"}): set each body.model to the stack's served model`,
    );
}

/** The input's requests not yet recorded (RECORDED: per line, nonzero when done), one at a time. */
async function* pending(file: string, recorded: Uint8Array): AsyncGenerator<BatchRequest> {
  for await (const line of fileLines(file)) {
    if (recorded[line.number] !== 0 || line.text.trim() === "") continue;
    yield parseInputLine(file, line);
  }
}

export async function runJob(o: JobOptions, signal: AbortSignal): Promise<JobResult> {
  const now = o.now ?? (() => Date.now());
  const { out, err, requests, models, recorded } = await prepare(o, signal);
  const base = baseUrl(o.endpoint);
  const agent = makeAgent(connectionBound(o.concurrency));
  const stop = new AbortController();
  const onAbort = () => stop.abort(signal.reason);
  signal.addEventListener("abort", onAbort, { once: true });
  let files: ResultFiles | null = null;
  const tracker = new JobTracker(o, now, requests, out, err.count);
  const ticker = o.progressEveryMs > 0 ? setInterval(() => tracker.tick(), o.progressEveryMs) : null;
  try {
    checkModels(models, o.served ?? (await servedModels(agent, base, o.apiKey, signal)), base);
    if (tracker.remaining() > 0)
      o.say(
        `job: ${requests.toLocaleString("en-US")} requests, ${(out.count + err.count).toLocaleString("en-US")} already recorded, ${o.concurrency} at a time against ${base}`,
      );
    const ctx: SendContext = {
      agent,
      base,
      apiKey: o.apiKey,
      policy: o.policy,
      signal: stop.signal,
      watch: new ServerWatch((req, s) => generatesOnce(ctx, req, s), o.outageMs, o.say, now),
    };
    const model = [...models.keys()][0];
    const before = await readCounters(agent, base, model, o.apiKey, signal);
    const source = pending(o.input, recorded);
    // Opened once the input is known to run: a refused input leaves no empty result files behind.
    const opened = (files = new ResultFiles(o.output, o.errors));
    const record = (a: Answer) => tracker.recorded(a, opened.write(a.line, a.failed));
    const stopped = await pool(o.concurrency, source, stop, (req) => sendRequest(ctx, req).then(record), tracker);
    const state = tracker.state();
    const after = await readCounters(agent, base, model, o.apiKey, new AbortController().signal);
    return { ...state, stopped, serverCounters: reconciliation(before, after, model, state.tokens - out.tokens) };
  } finally {
    if (ticker) clearInterval(ticker);
    signal.removeEventListener("abort", onAbort);
    files?.close();
    void agent.destroy().catch(() => undefined);
  }
}

/**
 * CONCURRENCY workers pulling from SOURCE until it ends or STOP aborts; the first error that is not
 * the abort stops the others. Returns why the job stopped early, or null.
 */
async function pool(
  concurrency: number,
  source: AsyncGenerator<BatchRequest>,
  stop: AbortController,
  handle: (req: BatchRequest) => Promise<void>,
  tracker: JobTracker,
): Promise<string | null> {
  // Assigned in the workers, which flow analysis does not see.
  let failure = null as Error | null;
  const worker = async () => {
    while (!stop.signal.aborted) {
      const next = await source.next();
      if (next.done || stop.signal.aborted) return;
      tracker.inFlight++;
      try {
        await handle(next.value);
      } catch (e) {
        if (!stop.signal.aborted) {
          failure = e as Error;
          stop.abort(e);
        }
      } finally {
        tracker.inFlight--;
      }
    }
  };
  await Promise.all(Array.from({ length: concurrency }, worker));
  await source.return(undefined);
  tracker.tick();
  if (failure instanceof ServerDownError) return failure.message;
  if (failure !== null) throw failure;
  return stop.signal.aborted ? `interrupted (${describeError(stop.signal.reason)})` : null;
}
