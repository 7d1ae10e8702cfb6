import type { SimClock } from "./clock";
import { decodeRates, prefillSeconds } from "./perf-model";
import type { Profile } from "./profile";
import type { ContentKind } from "./speculative";

/**
 * The batch scheduler: a FIFO queue, at most maxRunningRequests running, and one timer for all of
 * them. Each tick advances every running request by the simulated time since it last advanced,
 * at the per-request rate of the current batch size, and hands each request its new tokens in one
 * callback, so a stream gets one socket write per tick however many tokens it received.
 */

export const TICK_MS = 5;

export interface GenerationPlan {
  promptTokens: number;
  /** Tokens this request will produce (already capped by max_tokens and any fault). */
  limit: number;
  /** Health checks and the startup warmup: not client traffic, kept out of the client counters. */
  internal: boolean;
  /** What the prompt is (speculative acceptance depends on it); default chat. */
  content?: ContentKind;
}

export type Phase = "queued" | "prefill" | "decode" | "done" | "aborted";

export class SimRequest {
  phase: Phase = "queued";
  emitted = 0;
  steps = 0;
  arrivalSim = 0;
  admitSim = -1;
  firstTokenSim = -1;
  finishSim = -1;
  private lastSim = 0;
  private prefillLeft = 0;
  private tokenAcc = 0;
  private stepAcc = 0;

  constructor(
    readonly plan: GenerationPlan,
    /** New tokens, grouped by decode step: each entry is the token count of one step (one SSE chunk). */
    readonly onTokens: (req: SimRequest, steps: number[]) => void,
    readonly onDone: (req: SimRequest) => void,
  ) {}

  /** @internal used by the scheduler only */
  admit(profile: Profile, at: number): void {
    this.phase = "prefill";
    this.admitSim = at;
    this.lastSim = at;
    this.prefillLeft = prefillSeconds(profile, this.plan.promptTokens);
  }

  /** @internal advances to `now`; returns the step sizes produced. */
  advance(now: number, stalledUntil: number, stepsPerSecond: number, tokensPerSecond: number): number[] | null {
    let dt = now - Math.max(this.lastSim, stalledUntil);
    this.lastSim = now;
    if (dt <= 0) return null;
    if (this.phase === "prefill") {
      if (this.prefillLeft > dt) {
        this.prefillLeft -= dt;
        return null;
      }
      dt -= this.prefillLeft;
      this.prefillLeft = 0;
      this.phase = "decode";
      // The prefill's forward pass yields the first token.
      this.tokenAcc = 1;
      this.stepAcc = 1;
      // Recorded when the token is handed out (this tick), which is when a client can see it.
      this.firstTokenSim = now;
    }
    this.tokenAcc += tokensPerSecond * dt;
    this.stepAcc += stepsPerSecond * dt;
    const total = Math.min(Math.floor(this.tokenAcc), this.plan.limit);
    const n = total - this.emitted;
    if (n <= 0) return null;
    // Steps that produced these tokens; when the limit cuts a tick short, only its share of steps.
    const capped = total < Math.floor(this.tokenAcc);
    const stepsNow = capped ? Math.ceil((this.stepAcc * total) / this.tokenAcc) : Math.floor(this.stepAcc);
    // Tokens come out of whole verify steps: a tick shorter than a step hands out nothing yet (a
    // step counted per tick would make acceptance look like tokens per tick, 2.8 for a draft
    // that accepts 3.2). Each step yields at least one token; the last tokens end the request.
    if (stepsNow <= this.steps && !capped) return null;
    const k = Math.max(1, Math.min(n, stepsNow - this.steps));
    const sizes = new Array<number>(k);
    // Spread n tokens over k steps as evenly as integers allow.
    for (let i = 0; i < k; i++) sizes[i] = Math.floor(((i + 1) * n) / k) - Math.floor((i * n) / k);
    this.emitted = total;
    this.steps += k;
    return sizes;
  }
}

export interface SchedulerTotals {
  clientTokens: number;
  internalTokens: number;
  clientPromptTokens: number;
  steps: number;
  specTokens: number;
}

export class Scheduler {
  readonly queue: SimRequest[] = [];
  readonly running: SimRequest[] = [];
  readonly totals: SchedulerTotals = {
    clientTokens: 0,
    internalTokens: 0,
    clientPromptTokens: 0,
    steps: 0,
    specTokens: 0,
  };
  /** Simulated time of the last token produced for anyone: what SGLang's health check watches. */
  lastTokenSim = -1;
  private stalledUntil = -1;
  private timer: NodeJS.Timeout | null = null;
  private stopped = false;
  /** (sim time, tokens, steps) samples for windowed gauges. */
  private readonly samples: Array<[number, number, number]> = [];

  constructor(
    private readonly profile: Profile,
    private readonly clock: SimClock,
    private readonly onTick?: (s: Scheduler, now: number) => void,
    /** acceptance-collapse: every verify step yields one token (the draft's are all rejected). */
    private readonly acceptanceCollapsed: () => boolean = () => false,
  ) {}

  submit(req: SimRequest): void {
    if (this.stopped) return;
    const now = this.clock.now();
    req.arrivalSim = now;
    if (!req.plan.internal) this.totals.clientPromptTokens += req.plan.promptTokens;
    this.queue.push(req);
    this.admit(now);
    this.ensureTicking();
  }

  abort(req: SimRequest): void {
    if (req.phase === "done" || req.phase === "aborted") return;
    req.phase = "aborted";
    const q = this.queue.indexOf(req);
    if (q >= 0) this.queue.splice(q, 1);
    const r = this.running.indexOf(req);
    if (r >= 0) this.running.splice(r, 1);
  }

  /** Freeze all generation (a JIT compile holding the scheduler) for `simSeconds` from now. */
  stall(simSeconds: number): void {
    this.stalledUntil = Math.max(this.stalledUntil, this.clock.now() + simSeconds);
  }

  stop(): void {
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
  }

  /** Tokens and verify steps per simulated second over the last `windowSeconds`. */
  recentRates(windowSeconds: number): { tokensPerSecond: number; acceptLength: number | null } {
    // Like SGLang's gauges, the figure is of the last stretch of decoding, and holds while idle.
    const last = this.samples[this.samples.length - 1];
    const first = last ? this.samples.find((s) => s[0] >= last[0] - windowSeconds) : undefined;
    if (!last || !first || last === first || last[0] <= first[0])
      return { tokensPerSecond: 0, acceptLength: this.lifetimeAcceptLength() };
    const steps = last[2] - first[2];
    return {
      tokensPerSecond: (last[1] - first[1]) / (last[0] - first[0]),
      acceptLength: steps > 0 ? (last[1] - first[1]) / steps : this.lifetimeAcceptLength(),
    };
  }

  lifetimeAcceptLength(): number | null {
    return this.totals.steps > 0 ? this.totals.specTokens / this.totals.steps : null;
  }

  private admit(now: number): void {
    while (this.queue.length > 0 && this.running.length < this.profile.decode.maxRunningRequests) {
      const req = this.queue.shift()!;
      req.admit(this.profile, now);
      this.running.push(req);
    }
  }

  private ensureTicking(): void {
    if (this.timer || this.stopped) return;
    this.timer = setTimeout(() => this.tick(), TICK_MS);
  }

  private tick(): void {
    this.timer = null;
    if (this.stopped) return;
    const now = this.clock.now();
    const batch = this.running.length;
    const shared = decodeRates(this.profile, batch);
    const collapsed = Boolean(this.profile.speculative) && this.acceptanceCollapsed();
    const finished: SimRequest[] = [];
    let produced = 0;
    let steps = 0;
    for (const req of this.running) {
      // Speculative acceptance and verify cost depend on each request's content and prompt length.
      const drafted = this.profile.speculative
        ? decodeRates(this.profile, batch, { content: req.plan.content ?? "chat", promptTokens: req.plan.promptTokens })
        : shared;
      // Collapsed: the verify steps still cost what they cost, each yields one token.
      const rates = collapsed ? { ...drafted, tokensPerSecond: drafted.stepsPerSecond } : drafted;
      const sizes = req.advance(now, this.stalledUntil, rates.stepsPerSecond, rates.tokensPerSecond);
      if (sizes) {
        let n = 0;
        for (const s of sizes) n += s;
        produced += n;
        steps += sizes.length;
        if (req.plan.internal) this.totals.internalTokens += n;
        else this.totals.clientTokens += n;
        this.lastTokenSim = now;
        req.onTokens(req, sizes);
      }
      if (req.emitted >= req.plan.limit && req.phase === "decode") finished.push(req);
      else if (req.plan.limit === 0 && req.phase === "decode") finished.push(req);
    }
    this.totals.steps += steps;
    this.totals.specTokens += produced;
    if (produced > 0) this.sample(now);
    for (const req of finished) {
      this.running.splice(this.running.indexOf(req), 1);
      req.phase = "done";
      req.finishSim = now;
      req.onDone(req);
    }
    this.admit(now);
    this.onTick?.(this, now);
    if (this.running.length > 0 || this.queue.length > 0) this.ensureTicking();
  }

  private sample(now: number): void {
    this.samples.push([now, this.totals.clientTokens + this.totals.internalTokens, this.totals.steps]);
    // Keep roughly the last minute of simulated time; drop in bulk to keep the shift cheap.
    if (this.samples.length > 4096 && this.samples[0][0] < now - 60) this.samples.splice(0, 2048);
  }
}
