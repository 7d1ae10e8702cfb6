/**
 * One client thread of a spread run (client-threads.ts): the same sender, closed loop and open loop
 * as the main thread's (load.ts), on its own connection pool and event loop. It says it is ready,
 * then runs each share it is given, posting its samples in batches and, at the end of the share,
 * what it saw of itself (watchClient) and the largest max_tokens it asked for.
 */
import { parentPort, workerData } from "node:worker_threads";
import { makeAgent } from "../transport/http";
import { sleep } from "../transport/timers";
import { watchClient } from "../judge/certificate";
import type { ClientThreadSpec, ThreadMessage, ThreadRun } from "./client-threads";
import { closedLoop, makeSender, openLoop, type HostClock, type LoadRequest, type Send } from "./load";
import type { RequestSample } from "../base/samples";
import { requestAt } from "../base/workload";

/** Samples are posted at most this far apart (a progress line's worth), or when this many are waiting. */
const BATCH_MS = 50;
const BATCH_SAMPLES = 256;

const port = parentPort;
if (port === null) throw new Error("client-thread.ts runs as a worker thread (client-threads.ts starts it)");
const spec = workerData as ClientThreadSpec;
const clock: HostClock = { origin: spec.originEpochMs - performance.timeOrigin, timeScale: spec.timeScale };
const agent = makeAgent(spec.connections);
const post = (m: ThreadMessage) => port.postMessage(m);

let stop = new AbortController();

async function run(share: ThreadRun): Promise<void> {
  stop = new AbortController();
  const signal = stop.signal;
  const send = makeSender({
    endpoint: { url: spec.base, apiKey: spec.apiKey },
    base: spec.base,
    model: spec.model,
    agent,
    clock,
    signal,
    requestTimeoutSeconds: spec.requestTimeoutSeconds,
  });
  let maxTokens = 0;
  const request = (i: number): LoadRequest => {
    const r = requestAt(spec.requests, i);
    maxTokens = Math.max(maxTokens, r.maxTokens);
    return r;
  };
  const samples = batcher();
  const watched = watchClient();
  await sendShare(share, { request, send, clock, signal }, samples.record);
  const client = watched.stop();
  samples.flush();
  post({ kind: "done", client, maxTokens });
}

/** The samples as they come, posted in batches (BATCH_MS, BATCH_SAMPLES). */
function batcher(): { record: (s: RequestSample) => void; flush: () => void } {
  let batch: RequestSample[] = [];
  let last = performance.now();
  const flush = () => {
    if (batch.length > 0) post({ kind: "samples", samples: batch });
    batch = [];
    last = performance.now();
  };
  const record = (s: RequestSample) => {
    batch.push(s);
    if (batch.length >= BATCH_SAMPLES || performance.now() - last >= BATCH_MS) flush();
  };
  return { record, flush };
}

/** A share's slots (closed loop, from the common start) or its arrivals (open loop), each sample to RECORD. */
async function sendShare(
  share: ThreadRun,
  load: { request: (i: number) => LoadRequest; send: Send; clock: HostClock; signal: AbortSignal },
  record: (s: RequestSample) => void,
): Promise<void> {
  const start = share.startEpochMs - performance.timeOrigin;
  if (share.mode === "open") {
    const { arrivals, indices, maxInFlight } = share;
    return openLoop({ ...load, arrivals, indices, start, maxInFlight }, record);
  }
  const counter = new Int32Array(share.counter);
  try {
    await sleep(Math.max(0, start - performance.now()), load.signal);
  } catch {
    // stopped before the start: nothing sent
  }
  const next = () => Atomics.add(counter, 0, 1);
  await closedLoop({ ...load, level: share.slots, count: share.count, next }, record);
}

port.on("message", (m: ThreadRun | { kind: "abort"; reason: string }) => {
  // The main thread's reason (the server gone, the deadline, Ctrl-C): requests cut by it say so, as there.
  if (m.kind === "abort") return stop.abort(new Error(m.reason));
  run(m).catch((err: unknown) => post({ kind: "failed", error: err instanceof Error ? err.message : String(err) }));
});
post({ kind: "ready" });
