import * as fs from "node:fs";
import { SimClock } from "./clock";
import type { FaultName } from "./faults";
import type { Profile } from "./profile";
import { Scheduler, SimRequest } from "./scheduler";

/** Lifecycle of the simulated server process, in SGLang's terms. */
export type ServerStatus = "loading" | "warmup" | "ready" | "dead" | "closed";

export type FailureReason =
  | "overload-500"
  | "reset-mid-stream"
  | "loading-503"
  | "bad-request"
  | "too-large"
  | "queue-full"
  | "unauthorized"
  | "crashed";

export interface RequestRecord {
  id: string;
  endpoint: "chat" | "generate";
  stream: boolean;
  promptTokens: number;
  completionTokens: number;
  reasoningTokens: number;
  finishReason: string;
  /** Simulated seconds, as reported to the client. */
  queueSeconds: number;
  timeToFirstTokenSeconds: number;
  e2eLatencySeconds: number;
  specVerifyCount: number | null;
}

/** Histogram buckets as SGLang's metrics collector declares them (seconds). */
export const TTFT_BUCKETS = [0.1, 0.2, 0.4, 0.6, 0.8, 1, 2, 4, 6, 8, 10, 20, 40, 60, 80, 100, 200, 400];
export const E2E_BUCKETS = [
  0.1, 0.2, 0.4, 0.6, 0.8, 1, 2, 4, 6, 8, 10, 20, 40, 60, 80, 100, 200, 400, 600, 1200, 1800, 2400,
];

export class Histogram {
  readonly counts: number[];
  sum = 0;
  count = 0;
  constructor(readonly buckets: number[]) {
    this.counts = new Array<number>(buckets.length).fill(0);
  }
  observe(v: number): void {
    this.sum += v;
    this.count++;
    for (let i = 0; i < this.buckets.length; i++) if (v <= this.buckets[i]) this.counts[i]++;
  }
}

/** Exact accounting of what happened, for /sim/truth and /metrics. */
export class Truth {
  requestsReceived = 0;
  requestsCompleted = 0;
  requestsAborted = 0;
  readonly failed: Record<FailureReason, number> = {
    "overload-500": 0,
    "reset-mid-stream": 0,
    "loading-503": 0,
    "bad-request": 0,
    "too-large": 0,
    "queue-full": 0,
    unauthorized: 0,
    crashed: 0,
  };
  completedCompletionTokens = 0;
  completedReasoningTokens = 0;
  completedPromptTokens = 0;
  readonly ttft = new Histogram(TTFT_BUCKETS);
  readonly e2e = new Histogram(E2E_BUCKETS);
  /** The most recent completed requests, oldest first. */
  readonly records: RequestRecord[] = [];

  fail(reason: FailureReason): void {
    this.failed[reason]++;
  }

  complete(record: RequestRecord): void {
    this.requestsCompleted++;
    this.completedCompletionTokens += record.completionTokens;
    this.completedReasoningTokens += record.reasoningTokens;
    this.completedPromptTokens += record.promptTokens;
    this.ttft.observe(record.timeToFirstTokenSeconds);
    this.e2e.observe(record.e2eLatencySeconds);
    this.records.push(record);
    if (this.records.length > 20_000) this.records.splice(0, 10_000);
  }

  failedTotal(): number {
    return Object.values(this.failed).reduce((a, b) => a + b, 0);
  }
}

/** A bounded waiting queue: past it a server answers 503 at once instead of growing without end. */
export const DEFAULT_MAX_QUEUED_REQUESTS = 4096;

export interface SimStateOptions {
  profile: Profile;
  faults: Set<FaultName>;
  timeScale: number;
  apiKey: string | null;
  servedModelName: string;
  host: string;
  log: (line: string) => void;
  /** --max-queued-requests: waiting requests beyond this are answered 503 (default 4096). */
  maxQueuedRequests?: number;
  /**
   * A file naming faults (comma- or line-separated) switched on while the server runs, read again at
   * most every FAULTS_FILE_MS: a service first passes its gate and later drifts, as a host does when
   * something changes under a running unit. Absent or unreadable: none.
   */
  faultsFile?: string;
}

/** How long a read of the faults file holds (wall ms): a file read per request would cost the hot path. */
const FAULTS_FILE_MS = 200;

/** Everything the HTTP handlers share: configuration, clock, scheduler, status and the books. */
export class SimState {
  readonly profile: Profile;
  readonly faults: Set<FaultName>;
  readonly clock: SimClock;
  readonly scheduler: Scheduler;
  readonly truth = new Truth();
  readonly apiKey: string | null;
  readonly servedModelName: string;
  readonly host: string;
  readonly maxQueuedRequests: number;
  readonly faultsFile: string | null;
  private fileFaults: { readAtMs: number; names: Set<string> } = { readAtMs: -Infinity, names: new Set() };
  port = 0;
  status: ServerStatus = "loading";
  loadSeconds = 0;
  /** Client generations seen so far (1-based sequence numbers feed reset-mid-stream and JIT faults). */
  clientGenerations = 0;
  firstGenerationSeen = false;
  /** Ends the simulated process (set by the server: closes every socket, then calls onExit). */
  die: (exitCode: number) => void = () => {};
  private readonly waitingForLoad: Array<() => void> = [];
  private readonly logLine: (line: string) => void;

  constructor(opts: SimStateOptions) {
    this.profile = opts.profile;
    this.faults = opts.faults;
    this.clock = new SimClock(opts.timeScale);
    this.scheduler = new Scheduler(
      opts.profile,
      this.clock,
      (s, now) => this.maybeLogDecode(s, now),
      () => this.has("acceptance-collapse"),
    );
    this.faultsFile = opts.faultsFile ?? null;
    this.apiKey = opts.apiKey;
    this.servedModelName = opts.servedModelName;
    this.host = opts.host;
    this.maxQueuedRequests = opts.maxQueuedRequests ?? DEFAULT_MAX_QUEUED_REQUESTS;
    this.logLine = opts.log;
  }

  has(fault: FaultName): boolean {
    return this.faults.has(fault) || this.switchedOn().has(fault);
  }

  /** The faults the faults file names now (cached FAULTS_FILE_MS). */
  private switchedOn(): Set<string> {
    if (this.faultsFile === null) return this.fileFaults.names;
    const now = Date.now();
    if (now - this.fileFaults.readAtMs < FAULTS_FILE_MS) return this.fileFaults.names;
    let text = "";
    try {
      text = fs.readFileSync(this.faultsFile, "utf8");
    } catch {
      // No file: no fault switched on.
    }
    this.fileFaults = { readAtMs: now, names: new Set(text.split(/[\s,]+/).filter(Boolean)) };
    return this.fileFaults.names;
  }

  get timeScale(): number {
    return this.clock.timeScale;
  }

  /** A log line in SGLang's format: `[YYYY-MM-DD HH:MM:SS] message`. */
  log(message: string): void {
    const stamp = new Date().toISOString().replace("T", " ").slice(0, 19);
    this.logLine(`[${stamp}] ${message}`);
  }

  /** Raw stderr text (compiler output, tracebacks): no timestamp, as the real process prints it. */
  raw(line: string): void {
    this.logLine(line);
  }

  /** Generation requests that arrive while loading and must hang (models-before-ready) wait here. */
  whenLoaded(fn: () => void): void {
    if (this.status === "warmup" || this.status === "ready") fn();
    else this.waitingForLoad.push(fn);
  }

  loaded(): void {
    for (const fn of this.waitingForLoad.splice(0)) fn();
  }

  submit(req: SimRequest): void {
    this.scheduler.submit(req);
  }

  private lastDecodeLogWall = 0;
  private lastDecodeLogSim = -Infinity;

  /** SGLang prints a "Decode batch" line every few dozen steps; here at most once per wall second. */
  private maybeLogDecode(s: Scheduler, now: number): void {
    const wall = this.clock.wallSeconds();
    if (s.running.length === 0 || wall - this.lastDecodeLogWall < 1 || now - this.lastDecodeLogSim < 4) return;
    this.lastDecodeLogWall = wall;
    this.lastDecodeLogSim = now;
    const recent = s.recentRates(10);
    const accept =
      this.profile.speculative && recent.acceptLength !== null ? `accept len: ${recent.acceptLength.toFixed(2)}, ` : "";
    this.log(
      `Decode batch. #running-req: ${s.running.length}, ${accept}gen throughput (token/s): ${recent.tokensPerSecond.toFixed(2)}, #queue-req: ${s.queue.length}, `,
    );
  }
}
