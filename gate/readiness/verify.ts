/**
 * The readiness gate. A server counts as ready only after it has generated: TCP connect, the model
 * listed by /v1/models, a real chat completion, and a later generation with the unit still up. One
 * deadline, owned here, aborts every request; a failure names its phase, the last response or
 * error, the time spent and the service's last log lines.
 */
import type { Agent } from "undici";
import {
  baseUrl,
  describeError,
  errorKind,
  fatalNetworkError,
  fetchText,
  makeAgent,
  tcpConnect,
  truncate,
  type Endpoint,
} from "../transport/http";
import { probeGeneration, type ProbeResult } from "./probe";
import { VerifyPolicySchema, type VerifyPolicy, type VerifyPolicyInput } from "../base/schema";
import { armTimeout, raceTimeout, sleep, withTimeout, type Timeout } from "../transport/timers";
import type { ModelList } from "../transport/wire";
import { answersFailure, answersNotChecked, checkAnswers, type AnswerCertificate } from "./answers";

export type GatePhase = "connect" | "models" | "generate" | "stability" | "answers" | "ready";

export const PHASE_MEANING: Record<GatePhase, string> = {
  connect: "TCP connect to the serving port",
  models: "GET /v1/models lists the expected model",
  generate: "a real chat completion succeeds",
  stability: "a later generation succeeds and the service neither restarted nor failed",
  answers: "greedy answers to a fixed set of prompts with checkable answers reach the pass threshold",
  ready: "the model generates",
};

export interface ServiceState {
  activeState: string;
  restarts: number;
}

export interface GateHooks {
  /**
   * Progress: called when a phase starts and, while it waits, at most every
   * progressIntervalSeconds (detail says for how long, how many attempts, and why).
   */
  onPhase?: (phase: GatePhase, detail: string) => void;
  /** Stops the gate (Ctrl-C, a cancelled `pulumi up`): it ends not ready, naming the interrupt. */
  signal?: AbortSignal;
  /** The unit serviceState and serviceLogs read (e.g. sglang-eagle3.service): a verdict names it. */
  unit?: string;
  /** The unit's state over the host connection, e.g. `systemctl show -p NRestarts,ActiveState`. */
  serviceState?: () => Promise<ServiceState>;
  /** The unit's last log lines, e.g. `journalctl -u UNIT -n 50`; appended to a failure diagnosis. */
  serviceLogs?: () => Promise<string>;
}

export interface PhaseTiming {
  phase: GatePhase;
  /** Seconds from the gate's start to the phase's start. */
  startedAtSeconds: number;
  seconds: number;
  attempts: number;
}

export interface VerifyResult {
  ready: boolean;
  /** "ready" on success, otherwise the phase that failed. */
  phase: GatePhase;
  elapsedSeconds: number;
  diagnosis: string | null;
  model: string | null;
  phases: PhaseTiming[];
  /** The first successful generation. */
  probe: ProbeResult | null;
  lastResponse: string | null;
  lastError: string | null;
  serviceState: ServiceState | null;
  /** The answer check's certificate (verification.answers); "answers not checked" when skipped or not reached. */
  answers: AnswerCertificate;
}

class GateFailure extends Error {}
class DeadlineExceeded extends Error {}
/** Why the caller's signal stopped the gate, when its reason is not already an Error. */
class Interrupted extends Error {}

const SERVICE_HOOK_TIMEOUT_MS = 30_000;
/** After a connection error the unit is checked sooner (a crash shows as refused connections). */
const SERVICE_CHECK_AFTER_CONNECTION_ERROR_S = 1;
const LOGS_TIMEOUT_MS = 5_000;
/**
 * How many of the journal's last lines a unit that ended quotes in the gate's reason: systemd's own
 * lines ("Main process exited", "Deactivated successfully", "Consumed ... CPU time") come last, so
 * the process's last words are a few lines above them.
 */
const JOURNAL_QUOTE_LINES = 5;

/**
 * The lines of a unit's journal that say why its process ended: the process's last words and
 * systemd's "Main process exited" line after them. systemd writes more after that line ("Failed with
 * result", "Consumed ... CPU time", and, under Restart=, the next start's own output), which would
 * push the cause out of a plain tail; without such a line, the journal's last lines.
 */
export function journalQuote(logs: string): string[] {
  // journalctl's own markers ("-- Boot ...", "-- No entries --") are no log lines
  const lines = logs
    .split("\n")
    .map((l) => l.trim())
    .filter((l) => l.length > 0 && !l.startsWith("-- "));
  let end = lines.length;
  for (let i = lines.length - 1; i >= 0; i--)
    if (lines[i].includes("Main process exited")) {
      end = i + 1;
      break;
    }
  return lines.slice(Math.max(0, end - JOURNAL_QUOTE_LINES), end);
}

export async function verify(
  endpoint: Endpoint,
  policyInput: VerifyPolicyInput = {},
  hooks: GateHooks = {},
): Promise<VerifyResult> {
  const policy = VerifyPolicySchema.parse(policyInput);
  // A bad URL throws here (EndpointError), before any request: it is the caller's input, not a verdict.
  const base = baseUrl(endpoint.url);
  return new GateRun({ ...endpoint, url: base }, policy, hooks).run();
}

class GateRun {
  private readonly base: string;
  private readonly started = performance.now();
  private deadline!: Timeout;
  private readonly agent: Agent = makeAgent(4);
  private phase: GatePhase = "connect";
  private phaseOpen = false;
  private phaseStart = 0;
  private attempts = 0;
  private readonly phases: PhaseTiming[] = [];
  private model: string | null;
  private probe: ProbeResult | null = null;
  private answers: AnswerCertificate = answersNotChecked("the gate did not reach the answer check");
  private lastResponse: string | null = null;
  private lastError: string | null = null;
  private baselineRestarts: number | null = null;
  private serviceState: ServiceState | null = null;
  private lastServiceCheck = -Infinity;
  private lastProgress = 0;
  /** The port accepted a connection once: refusals after that mean the process went away. */
  private portSeenOpen = false;
  private refusedSince: number | null = null;
  /** The last connection error other than a refusal (a reset mid-request), for the verdict. */
  private lastDrop: string | null = null;
  /** The request being waited for, so a deadline that cuts it can say what never answered. */
  private inFlight: { what: string; since: number } | null = null;

  constructor(
    endpoint: Endpoint,
    private readonly policy: VerifyPolicy,
    private readonly hooks: GateHooks,
    private readonly apiKey = endpoint.apiKey,
  ) {
    this.base = baseUrl(endpoint.url);
    this.model = endpoint.model && endpoint.model.length > 0 ? endpoint.model : null;
  }

  private elapsed(): number {
    return (performance.now() - this.started) / 1000;
  }

  async run(): Promise<VerifyResult> {
    this.deadline = armTimeout([this.hooks.signal], this.policy.deadlineSeconds * 1000);
    const deadlineMessage = `the deadline of ${this.policy.deadlineSeconds} s passed`;
    try {
      if (this.hooks.serviceState) await this.checkService(0);
      this.enter("connect");
      await this.retry((signal) =>
        this.track(`TCP connect to ${this.base}`, () =>
          tcpConnect(this.base, this.policy.connectTimeoutSeconds * 1000, signal),
        ),
      );
      this.enter("models");
      await this.retry((signal) => this.modelsAttempt(signal));
      this.enter("generate");
      await this.retry((signal) => this.generateAttempt(signal));
      this.enter("stability");
      await this.stability();
      await this.answerCheck();
      this.enter("ready");
      return this.result(true, null);
    } catch (caught) {
      let err = caught;
      if (this.deadline.signal.aborted && err === this.deadline.signal.reason) {
        // The deadline timer aborts with a TimeoutError; the caller's signal with its own reason.
        if ((err as Error)?.name === "TimeoutError") err = new DeadlineExceeded(deadlineMessage);
        else if (!(err instanceof Error)) err = new Interrupted(`interrupted: ${String(err)}`);
        else {
          const message = err.message;
          err = new Interrupted(message.startsWith("interrupted") ? message : `interrupted: ${message}`);
        }
      }
      const known = err instanceof GateFailure || err instanceof DeadlineExceeded || err instanceof Interrupted;
      const reason = known ? (err as Error).message : describeError(err);
      if (!known) this.lastError = reason;
      this.closePhase();
      return this.result(false, await this.diagnose(reason));
    } finally {
      this.deadline.clear();
      void this.agent.destroy().catch(() => undefined);
    }
  }

  private enter(phase: GatePhase): void {
    this.closePhase();
    this.phase = phase;
    this.phaseStart = this.elapsed();
    this.attempts = 0;
    this.phaseOpen = phase !== "ready";
    this.hooks.onPhase?.(phase, PHASE_MEANING[phase]);
  }

  private closePhase(): void {
    if (!this.phaseOpen) return;
    this.phaseOpen = false;
    this.phases.push({
      phase: this.phase,
      startedAtSeconds: this.phaseStart,
      seconds: this.elapsed() - this.phaseStart,
      attempts: this.attempts,
    });
  }

  /**
   * Runs attempt until it resolves; it returns a string (why to wait) or throws a transient error
   * to be retried, or throws GateFailure to stop. Backoff with jitter, capped small so a server
   * that starts generating is noticed within a fraction of a second.
   */
  private async retry(attempt: (signal: AbortSignal) => Promise<string | void>): Promise<void> {
    let interval = this.policy.retryInitialIntervalMs;
    const phaseStart = this.elapsed();
    for (;;) {
      this.attempts++;
      let wait: string;
      let connectionError = false;
      try {
        const outcome = await attempt(this.deadline.signal);
        if (outcome === undefined) {
          this.refusedSince = null;
          return;
        }
        wait = outcome;
        this.refusedSince = null;
      } catch (err) {
        if (err instanceof GateFailure) throw err;
        if (this.deadline.signal.aborted) throw this.deadline.signal.reason;
        const fatal = fatalNetworkError(err, this.base);
        if (fatal !== null) throw new GateFailure(fatal);
        // Named with the request (and so its full URL): "TCP connect to http://h:p: connect ECONNREFUSED".
        wait = this.lastWhat === null ? describeError(err) : `${this.lastWhat}: ${describeError(err)}`;
        this.lastError = wait;
        connectionError = true;
        this.noteConnectionError(err);
      }
      const now = this.elapsed();
      if (now - this.lastProgress >= this.policy.progressIntervalSeconds) {
        this.lastProgress = now;
        this.hooks.onPhase?.(
          this.phase,
          `waiting ${(now - phaseStart).toFixed(0)} s, ${this.attempts} attempt(s); last: ${wait}`,
        );
      }
      // A network error (refused, reset) is the sign of a process that died: the unit is checked sooner.
      await this.checkService(
        connectionError ? SERVICE_CHECK_AFTER_CONNECTION_ERROR_S : this.policy.serviceCheckIntervalSeconds,
      );
      const jittered = interval * (0.5 + Math.random() * 0.5);
      await sleep(jittered, this.deadline.signal);
      interval = Math.min(this.policy.retryMaxIntervalMs, interval * 1.5);
    }
  }

  /**
   * Once the port accepted a connection, a server that refuses connections for serverGoneSeconds
   * has no listening process: it crashed (SGLang opens its port after loading and never closes it).
   * Waiting for the deadline would retry thousands of times for nothing.
   */
  private noteConnectionError(err: unknown): void {
    if (errorKind(err) !== "connection refused") {
      this.lastDrop = describeError(err);
      this.refusedSince = null;
      return;
    }
    if (!this.portSeenOpen) return;
    const now = this.elapsed();
    this.refusedSince ??= now;
    if (now - this.refusedSince < this.policy.serverGoneSeconds) return;
    const during =
      this.phase === "generate"
        ? "during its first generation"
        : this.phase === "stability"
          ? "after its first generation"
          : `in phase "${this.phase}"`;
    const drop = this.lastDrop !== null ? `the connection dropped (${this.lastDrop}) and ` : "";
    throw new GateFailure(
      `the server process went away ${during}: ${drop}${this.base} has refused connections for ${(now - this.refusedSince).toFixed(1)} s (it accepted them before)`,
    );
  }

  private lastWhat: string | null = null;

  private async track<T>(what: string, fn: () => Promise<T>): Promise<T> {
    this.lastWhat = what;
    this.inFlight = { what, since: this.elapsed() };
    try {
      const value = await fn();
      this.portSeenOpen = true;
      return value;
    } finally {
      // Kept when the deadline cut the request: diagnose() reports what never answered.
      if (!this.deadline.signal.aborted) this.inFlight = null;
    }
  }

  private async modelsAttempt(deadline: AbortSignal): Promise<string | void> {
    const url = `${this.base}/v1/models`;
    const seconds = this.policy.modelsTimeoutSeconds;
    const reply = await this.track(`GET ${url}`, () =>
      withTimeout(
        [deadline],
        seconds * 1000,
        () => `GET ${url}: no answer within ${seconds} s`,
        (signal) => fetchText(this.agent, url, { apiKey: this.apiKey, signal }),
      ),
    );
    this.lastResponse = `GET ${url}: HTTP ${reply.status} ${truncate(reply.text)}`;
    if (reply.status === 401 || reply.status === 403 || reply.status === 404) {
      throw new GateFailure(
        `GET ${url} answered HTTP ${reply.status}; waiting cannot fix that (API key? not an OpenAI-compatible server?)`,
      );
    }
    if (reply.status !== 200) return `GET ${url} answered HTTP ${reply.status}`;
    let ids: string[];
    try {
      const json = JSON.parse(reply.text) as ModelList | null;
      ids = (json?.data ?? []).map((m) => String(m?.id));
    } catch {
      // A server that is starting answers 503 or nothing; a 200 that is not JSON is something else.
      const html = /text\/html/i.test(reply.contentType) || /^\s*</.test(reply.text);
      throw new GateFailure(
        html
          ? `GET ${url} answered HTTP 200 with an HTML page, not the OpenAI API: a login page or a proxy answers at this address`
          : `GET ${url} answered HTTP 200 with a body that is not JSON (content-type ${JSON.stringify(reply.contentType)}): not an OpenAI-compatible server`,
      );
    }
    if (ids.length === 0) return `GET ${url} lists no model yet`;
    if (this.model === null) {
      this.model = ids[0];
      return;
    }
    if (!ids.includes(this.model)) {
      // SGLang builds the list from memory at launch; it will not change without a restart.
      throw new GateFailure(
        `GET ${url}: the server serves ${JSON.stringify(ids)}, not the expected model ${JSON.stringify(this.model)}`,
      );
    }
  }

  private invalidInARow = 0;

  private async generateAttempt(deadline: AbortSignal): Promise<string | void> {
    const url = `${this.base}/v1/chat/completions`;
    const outcome = await this.track(`POST ${url} (probe)`, () => this.probe1(deadline, false));
    if (outcome.ok) {
      this.probe = outcome.result;
      this.lastResponse = `POST ${url}: ${outcome.response}`;
      return;
    }
    if (deadline.aborted) throw deadline.reason;
    if (outcome.response !== null) this.lastResponse = `POST ${url}: ${outcome.response}`;
    // A probe that got no answer at all: the last response is no longer an earlier request's (GET /v1/models).
    else if (outcome.kind === "connection" && !this.lastResponse?.startsWith("POST"))
      this.lastResponse = `POST ${url}: no response (${outcome.summary})`;
    // Network errors go through retry(), which knows when refusals mean the process is gone.
    if (outcome.kind === "connection") {
      if (!outcome.retryable) throw new GateFailure(outcome.message);
      throw outcome.error;
    }
    if (!outcome.retryable) throw new GateFailure(outcome.message);
    if (outcome.kind === "invalid") {
      this.invalidInARow++;
      if (this.invalidInARow >= this.policy.maxInvalidResponses) {
        throw new GateFailure(`${outcome.message} (${this.invalidInARow} times in a row)`);
      }
    } else this.invalidInARow = 0;
    return outcome.message;
  }

  private probe1(deadline: AbortSignal, sampling: boolean) {
    const seconds = this.policy.probeTimeoutSeconds;
    return withTimeout(
      [deadline],
      seconds * 1000,
      () => `POST ${this.base}/v1/chat/completions: no answer within ${seconds} s`,
      (signal) =>
        probeGeneration(this.agent, this.base, this.model!, this.policy, { signal, apiKey: this.apiKey, sampling }),
    );
  }

  /** No retries here: a service that generated once and then fails is exactly what must not pass. */
  private async stability(): Promise<void> {
    for (let i = 0; i < this.policy.stabilityProbes; i++) {
      this.attempts++;
      if (this.policy.stabilityIntervalSeconds > 0)
        await sleep(this.policy.stabilityIntervalSeconds * 1000, this.deadline.signal);
      const url = `${this.base}/v1/chat/completions`;
      const outcome = await this.track(`POST ${url} (stability probe ${i + 1})`, () =>
        this.probe1(this.deadline.signal, true),
      );
      if (this.deadline.signal.aborted) throw this.deadline.signal.reason;
      if (outcome.response !== null) this.lastResponse = `POST ${url}: ${outcome.response}`;
      if (!outcome.ok) {
        if (outcome.kind === "connection") this.lastError = outcome.message;
        if (outcome.summary === "no usage") throw new GateFailure(outcome.message);
        throw new GateFailure(`the server generated once, then generation ${i + 2} failed: ${outcome.message}`);
      }
    }
    if (this.hooks.serviceState) {
      await this.checkService(0);
      const state = this.serviceState;
      if (state === null) throw new GateFailure("the service check could not read the unit's state");
      if (state.activeState !== "active")
        throw new GateFailure(`${this.unitName()} is ${state.activeState}, not active`);
    }
  }

  /**
   * The answers phase (gate/readiness/answers.ts): no retries, the server already generates; a
   * score under the threshold fails the gate. Skipped explicitly ("none"): the certificate says so.
   */
  private async answerCheck(): Promise<void> {
    if (this.policy.answers.file === "none") {
      this.answers = answersNotChecked('verification.answers.file is "none"');
      return;
    }
    this.enter("answers");
    this.attempts++;
    const endpoint = { base: this.base, model: this.model!, apiKey: this.apiKey };
    try {
      this.answers = await this.track(`the answer check (POST ${this.base}/v1/chat/completions)`, () =>
        checkAnswers(endpoint, this.policy, this.deadline.signal),
      );
    } catch (e) {
      if (this.deadline.signal.aborted) throw this.deadline.signal.reason;
      throw new GateFailure((e as Error).message);
    }
    const failure = answersFailure(this.answers);
    if (failure !== null) throw new GateFailure(failure);
    this.hooks.onPhase?.("answers", this.answers.note);
  }

  /** Fails fast on a unit that failed or restarted since the gate began (a crash during startup). */
  private async checkService(minIntervalSeconds: number): Promise<void> {
    const hook = this.hooks.serviceState;
    if (!hook) return;
    const now = this.elapsed();
    if (now - this.lastServiceCheck < minIntervalSeconds) return;
    this.lastServiceCheck = now;
    let state: ServiceState;
    try {
      state = await raceTimeout(
        hook(),
        [this.deadline.signal],
        SERVICE_HOOK_TIMEOUT_MS,
        () => "service check: no answer within 30 s",
      );
    } catch (err) {
      if (this.deadline.signal.aborted) throw this.deadline.signal.reason;
      this.lastError = `service check failed: ${describeError(err)}`;
      return;
    }
    this.serviceState = state;
    if (this.baselineRestarts === null) this.baselineRestarts = state.restarts;
    // systemd already knows: waiting for the port of a process that exited would cost the whole deadline.
    // The gate runs after the unit was started, so "inactive" too means its process ended: one that
    // exited 0 (a server that could not bind its port and returned) leaves no failed state behind.
    if (state.activeState === "failed" || state.activeState === "inactive")
      throw new GateFailure(`${this.unitEnded(state.activeState)}${await this.journalTail()}`);
    if (state.restarts > this.baselineRestarts) {
      throw new GateFailure(
        `${this.unitName()} restarted ${state.restarts - this.baselineRestarts} time(s) during verification: its process crashed${await this.journalTail()}`,
      );
    }
  }

  private unitEnded(activeState: "failed" | "inactive"): string {
    return activeState === "failed"
      ? `${this.unitName()} failed (its process exited with an error)`
      : `${this.unitName()} is inactive after it was started (its process ended without an error status, and nothing will open the port)`;
  }

  /** The journal's last lines, quoted into the reason itself: why the process ended, in one sentence. */
  private async journalTail(): Promise<string> {
    if (!this.hooks.serviceLogs) return "";
    try {
      const logs = await raceTimeout(this.hooks.serviceLogs(), [], LOGS_TIMEOUT_MS, () => "no answer within 5 s");
      const quoted = journalQuote(logs);
      return quoted.length === 0
        ? "; its journal is empty"
        : `; its journal ends: ${quoted.map((l) => `"${l}"`).join(" / ")}`;
    } catch (err) {
      return `; its journal could not be read (${describeError(err)})`;
    }
  }

  private unitName(): string {
    return this.hooks.unit ? `the service unit ${this.hooks.unit}` : "the service unit";
  }

  private async diagnose(reason: string): Promise<string> {
    const lines = [
      `readiness gate failed in phase "${this.phase}" (${PHASE_MEANING[this.phase]}) after ${this.elapsed().toFixed(1)} s: ${reason}`,
    ];
    if (this.inFlight !== null) {
      lines.push(
        `no answer: ${this.inFlight.what} was sent ${(this.elapsed() - this.inFlight.since).toFixed(1)} s before the gate stopped and never answered`,
      );
    }
    if (this.lastResponse !== null) lines.push(`last response: ${this.lastResponse}`);
    if (this.lastError !== null) lines.push(`last error: ${this.lastError}`);
    if (this.hooks.serviceState) {
      try {
        this.serviceState = await raceTimeout(
          this.hooks.serviceState(),
          [],
          LOGS_TIMEOUT_MS,
          () => "no answer within 5 s",
        );
      } catch (err) {
        lines.push(`service state unavailable: ${describeError(err)}`);
      }
    }
    if (this.serviceState !== null)
      lines.push(
        `service${this.hooks.unit ? ` ${this.hooks.unit}` : ""}: ActiveState=${this.serviceState.activeState} NRestarts=${this.serviceState.restarts}`,
      );
    if (this.hooks.serviceLogs) {
      try {
        const logs = await raceTimeout(this.hooks.serviceLogs(), [], LOGS_TIMEOUT_MS, () => "no answer within 5 s");
        lines.push(
          `--- last service log lines${this.hooks.unit ? ` of ${this.hooks.unit}` : ""} ---`,
          logs.replace(/\s+$/, ""),
        );
      } catch (err) {
        lines.push(`service logs unavailable: ${describeError(err)}`);
      }
    }
    return lines.join("\n");
  }

  private result(ready: boolean, diagnosis: string | null): VerifyResult {
    return {
      ready,
      phase: this.phase,
      elapsedSeconds: this.elapsed(),
      diagnosis,
      model: this.model,
      phases: this.phases,
      probe: this.probe,
      lastResponse: this.lastResponse,
      lastError: this.lastError,
      serviceState: this.serviceState,
      answers: this.answers,
    };
  }
}
