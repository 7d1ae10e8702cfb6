/**
 * The job's counts as results are recorded, the live rate over the last minutes (host time), and
 * the progress line written from them.
 */
import { duration, forecast, RateWindow, type Forecast, type PlanBasis } from "./forecast";
import type { RecoveredResults } from "./batch-file";
import type { Answer } from "./request";

/** What the tracker reads of the job's options (run.ts JobOptions has them under the same names). */
export interface TrackerOptions {
  timeScale: number;
  windowMs: number;
  plan: PlanBasis;
  say: (line: string) => void;
  onTick?: (state: JobState) => void;
}

/** Where the job stands: the recorded counts, and the forecast from them. */
export interface JobState {
  total: number;
  succeeded: number;
  failed: number;
  /** Recorded by earlier runs of the same job (resumed). */
  resumed: number;
  tokens: number;
  outputBytes: number;
  inFlight: number;
  startedAt: number;
  forecast: Forecast;
}

export class JobTracker {
  inFlight = 0;
  private succeeded: number;
  private failed: number;
  private tokens: number;
  private outputBytes: number;
  private readonly resumed: number;
  private readonly startedAt: number;
  private readonly window: RateWindow;

  constructor(
    private readonly o: TrackerOptions,
    private readonly now: () => number,
    private readonly total: number,
    recovered: RecoveredResults,
    recoveredErrors: number,
  ) {
    this.succeeded = recovered.count;
    this.failed = recoveredErrors;
    this.tokens = recovered.tokens;
    this.outputBytes = recovered.bytes;
    this.resumed = this.succeeded + this.failed;
    this.startedAt = now();
    this.window = new RateWindow(o.windowMs, this.startedAt, this.tokens);
  }

  remaining(): number {
    return this.total - this.succeeded - this.failed;
  }

  recorded(a: Answer, bytes: number): void {
    if (a.failed) this.failed++;
    else {
      this.succeeded++;
      this.tokens += a.tokens;
      this.outputBytes += bytes;
    }
    this.window.add(this.now(), this.tokens);
  }

  state(): JobState {
    const now = this.now();
    const wallRate = this.window.rate(now);
    const counts = {
      total: this.total,
      succeeded: this.succeeded,
      failed: this.failed,
      tokens: this.tokens,
      outputBytes: this.outputBytes,
      // Host time: a simulated host at time scale N does N host seconds per wall second.
      tokensPerSecond: wallRate === null ? null : wallRate / this.o.timeScale,
    };
    return {
      ...counts,
      resumed: this.resumed,
      inFlight: this.inFlight,
      startedAt: this.startedAt,
      forecast: forecast(counts, this.o.plan, now),
    };
  }

  /** The progress line (and the tick's state to whoever listens). */
  tick(): void {
    const s = this.state();
    this.o.say(progressLine(s));
    this.o.onTick?.(s);
  }
}

/** "1,234/5,000 done (12 failed), 812 tok/s over the last 5 min, ETA 3 h 2 min; on plan ..." */
export function progressLine(s: JobState): string {
  const f = s.forecast;
  const rate =
    f.tokensPerSecond === null ? "no rate yet" : `${Math.round(f.tokensPerSecond).toLocaleString("en-US")} tok/s`;
  return [
    `${f.done.toLocaleString("en-US")}/${s.total.toLocaleString("en-US")} done${s.failed > 0 ? ` (${s.failed} failed)` : ""}`,
    `${rate}, ETA ${duration(f.etaSeconds)}`,
    f.planVerdict,
    ...(f.deadlineVerdict ? [f.deadlineVerdict] : []),
  ].join("; ");
}
