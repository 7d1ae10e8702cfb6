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
  fetchText,
  makeAgent,
  signalWithTimeout,
  sleep,
  tcpConnect,
  truncate,
  type Endpoint,
} from "./http";
import { probeGeneration, type ProbeResult } from "./probe";
import { VerifyPolicySchema, type VerifyPolicy, type VerifyPolicyInput } from "./schema";

export type GatePhase = "connect" | "models" | "generate" | "stability" | "ready";

export const PHASE_MEANING: Record<GatePhase, string> = {
  connect: "TCP connect to the serving port",
  models: "GET /v1/models lists the expected model",
  generate: "a real chat completion succeeds",
  stability: "a later generation succeeds and the service neither restarted nor failed",
  ready: "the model generates",
};

export interface ServiceState {
  activeState: string;
  restarts: number;
}

export interface GateHooks {
  /** Progress: called when a phase starts and on each retry (detail says why it waits). */
  onPhase?: (phase: GatePhase, detail: string) => void;
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
}

class GateFailure extends Error {}
class DeadlineExceeded extends Error {}

const SERVICE_HOOK_TIMEOUT_MS = 30_000;
/** After a connection error the unit is checked sooner (a crash shows as refused connections). */
const SERVICE_CHECK_AFTER_CONNECTION_ERROR_S = 1;
const LOGS_TIMEOUT_MS = 5_000;

export async function verify(
  endpoint: Endpoint,
  policyInput: VerifyPolicyInput = {},
  hooks: GateHooks = {},
): Promise<VerifyResult> {
  const policy = VerifyPolicySchema.parse(policyInput);
  return new GateRun(endpoint, policy, hooks).run();
}

class GateRun {
  private readonly base: string;
  private readonly started = performance.now();
  private readonly deadline = new AbortController();
  private readonly agent: Agent = makeAgent(4);
  private phase: GatePhase = "connect";
  private phaseOpen = false;
  private phaseStart = 0;
  private attempts = 0;
  private readonly phases: PhaseTiming[] = [];
  private model: string | null;
  private probe: ProbeResult | null = null;
  private lastResponse: string | null = null;
  private lastError: string | null = null;
  private baselineRestarts: number | null = null;
  private serviceState: ServiceState | null = null;
  private lastServiceCheck = -Infinity;
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
    const timer = setTimeout(
      () => this.deadline.abort(new DeadlineExceeded(`the deadline of ${this.policy.deadlineSeconds} s passed`)),
      this.policy.deadlineSeconds * 1000,
    );
    try {
      if (this.hooks.serviceState) await this.checkService(0);
      this.enter("connect");
      await this.retry((signal) =>
        this.track("TCP connect", () => tcpConnect(this.base, this.policy.connectTimeoutSeconds * 1000, signal)),
      );
      this.enter("models");
      await this.retry((signal) => this.modelsAttempt(signal));
      this.enter("generate");
      await this.retry((signal) => this.generateAttempt(signal));
      this.enter("stability");
      await this.stability();
      this.enter("ready");
      return this.result(true, null);
    } catch (err) {
      const reason = err instanceof GateFailure || err instanceof DeadlineExceeded ? err.message : describeError(err);
      if (!(err instanceof GateFailure) && !(err instanceof DeadlineExceeded)) this.lastError = reason;
      this.closePhase();
      return this.result(false, await this.diagnose(reason));
    } finally {
      clearTimeout(timer);
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
    for (;;) {
      this.attempts++;
      let wait: string;
      try {
        const outcome = await attempt(this.deadline.signal);
        if (outcome === undefined) return;
        wait = outcome;
      } catch (err) {
        if (err instanceof GateFailure) throw err;
        if (this.deadline.signal.aborted) throw this.deadline.signal.reason;
        wait = describeError(err);
        this.lastError = wait;
      }
      this.hooks.onPhase?.(this.phase, `attempt ${this.attempts}: ${wait}`);
      // wait === lastError: a network error (refused, reset), the sign of a process that died.
      await this.checkService(
        wait === this.lastError ? SERVICE_CHECK_AFTER_CONNECTION_ERROR_S : this.policy.serviceCheckIntervalSeconds,
      );
      const jittered = interval * (0.5 + Math.random() * 0.5);
      await sleep(jittered, this.deadline.signal);
      interval = Math.min(this.policy.retryMaxIntervalMs, interval * 1.5);
    }
  }

  private async track<T>(what: string, fn: () => Promise<T>): Promise<T> {
    this.inFlight = { what, since: this.elapsed() };
    try {
      return await fn();
    } finally {
      // Kept when the deadline cut the request: diagnose() reports what never answered.
      if (!this.deadline.signal.aborted) this.inFlight = null;
    }
  }

  private async modelsAttempt(deadline: AbortSignal): Promise<string | void> {
    const reply = await this.track("GET /v1/models", () =>
      fetchText(this.agent, `${this.base}/v1/models`, {
        apiKey: this.apiKey,
        signal: signalWithTimeout(deadline, this.policy.modelsTimeoutSeconds * 1000),
      }),
    );
    this.lastResponse = `GET /v1/models: HTTP ${reply.status} ${truncate(reply.text)}`;
    if (reply.status === 401 || reply.status === 403 || reply.status === 404) {
      throw new GateFailure(
        `GET /v1/models answered HTTP ${reply.status}; waiting cannot fix that (API key? not an OpenAI-compatible server?)`,
      );
    }
    if (reply.status !== 200) return `GET /v1/models answered HTTP ${reply.status}`;
    let ids: string[];
    try {
      const json = JSON.parse(reply.text);
      ids = (json?.data ?? []).map((m: { id?: unknown }) => String(m?.id));
    } catch {
      return "GET /v1/models answered a body that is not JSON";
    }
    if (ids.length === 0) return "GET /v1/models lists no model yet";
    if (this.model === null) {
      this.model = ids[0];
      return;
    }
    if (!ids.includes(this.model)) {
      // SGLang builds the list from memory at launch; it will not change without a restart.
      throw new GateFailure(
        `the server serves ${JSON.stringify(ids)}, not the expected model ${JSON.stringify(this.model)}`,
      );
    }
  }

  private invalidInARow = 0;

  private async generateAttempt(deadline: AbortSignal): Promise<string | void> {
    const outcome = await this.track("POST /v1/chat/completions (probe)", () =>
      probeGeneration(this.agent, this.base, this.model!, this.policy, {
        signal: signalWithTimeout(deadline, this.policy.probeTimeoutSeconds * 1000),
        apiKey: this.apiKey,
        sampling: false,
      }),
    );
    if (outcome.ok) {
      this.probe = outcome.result;
      this.lastResponse = `POST /v1/chat/completions: ${outcome.response}`;
      return;
    }
    if (deadline.aborted) throw deadline.reason;
    if (outcome.response !== null) this.lastResponse = `POST /v1/chat/completions: ${outcome.response}`;
    if (outcome.kind === "connection") {
      this.lastError = outcome.message;
      return outcome.message;
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

  /** No retries here: a service that generated once and then fails is exactly what must not pass. */
  private async stability(): Promise<void> {
    for (let i = 0; i < this.policy.stabilityProbes; i++) {
      this.attempts++;
      if (this.policy.stabilityIntervalSeconds > 0)
        await sleep(this.policy.stabilityIntervalSeconds * 1000, this.deadline.signal);
      const outcome = await this.track(`POST /v1/chat/completions (stability probe ${i + 1})`, () =>
        probeGeneration(this.agent, this.base, this.model!, this.policy, {
          signal: signalWithTimeout(this.deadline.signal, this.policy.probeTimeoutSeconds * 1000),
          apiKey: this.apiKey,
          sampling: true,
        }),
      );
      if (this.deadline.signal.aborted) throw this.deadline.signal.reason;
      if (outcome.response !== null) this.lastResponse = `POST /v1/chat/completions: ${outcome.response}`;
      if (!outcome.ok) {
        if (outcome.kind === "connection") this.lastError = outcome.message;
        throw new GateFailure(`the server generated once, then generation ${i + 2} failed: ${outcome.message}`);
      }
    }
    if (this.hooks.serviceState) {
      await this.checkService(0);
      const state = this.serviceState;
      if (state === null) throw new GateFailure("the service check could not read the unit's state");
      if (state.activeState !== "active") throw new GateFailure(`the unit is ${state.activeState}, not active`);
    }
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
      state = await withTimeout(hook(), SERVICE_HOOK_TIMEOUT_MS, this.deadline.signal);
    } catch (err) {
      if (this.deadline.signal.aborted) throw this.deadline.signal.reason;
      this.lastError = `service check failed: ${describeError(err)}`;
      return;
    }
    this.serviceState = state;
    if (this.baselineRestarts === null) this.baselineRestarts = state.restarts;
    if (state.activeState === "failed")
      throw new GateFailure("the service unit failed (its process exited with an error)");
    if (state.restarts > this.baselineRestarts) {
      throw new GateFailure(
        `the service restarted ${state.restarts - this.baselineRestarts} time(s) during verification: its process crashed`,
      );
    }
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
        this.serviceState = await withTimeout(this.hooks.serviceState(), LOGS_TIMEOUT_MS, new AbortController().signal);
      } catch (err) {
        lines.push(`service state unavailable: ${describeError(err)}`);
      }
    }
    if (this.serviceState !== null)
      lines.push(`service: ActiveState=${this.serviceState.activeState} NRestarts=${this.serviceState.restarts}`);
    if (this.hooks.serviceLogs) {
      try {
        const logs = await withTimeout(this.hooks.serviceLogs(), LOGS_TIMEOUT_MS, new AbortController().signal);
        lines.push("--- last service log lines ---", logs.replace(/\s+$/, ""));
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
    };
  }
}

function withTimeout<T>(promise: Promise<T>, ms: number, signal: AbortSignal): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`no answer within ${ms / 1000} s`)), ms);
    const onAbort = () => reject(signal.reason);
    signal.addEventListener("abort", onAbort, { once: true });
    promise.then(
      (v) => {
        clearTimeout(timer);
        signal.removeEventListener("abort", onAbort);
        resolve(v);
      },
      (e) => {
        clearTimeout(timer);
        signal.removeEventListener("abort", onAbort);
        reject(e);
      },
    );
  });
}
