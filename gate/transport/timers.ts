/**
 * Timeouts that always fire. `AbortSignal.any([parent, AbortSignal.timeout(ms)])` can be garbage
 * collected before its timer fires (nodejs/node#57736): the timeout signal holds its dependants
 * only weakly, and an undici request in flight does not hold the composite signal either, so under
 * GC pressure the abort never comes and the request waits forever. Here the timer is a plain
 * setTimeout whose callback closes over the AbortController: Node's timer list holds it strongly
 * until it fires or is cleared, and every user clears it in a finally block.
 *
 * Node's timers also overflow: a delay above 2^31-1 ms fires after 1 ms. Every timer knob is
 * bounded by MAX_TIMER_SECONDS in the schemas, and armTimeout refuses a larger delay outright.
 */

export const MAX_TIMER_MS = 2 ** 31 - 1;
/** The largest whole number of seconds a Node timer can wait (about 24.8 days). */
export const MAX_TIMER_SECONDS = Math.floor(MAX_TIMER_MS / 1000);

export class TimeoutError extends Error {
  override readonly name = "TimeoutError";
}

export interface Timeout {
  readonly signal: AbortSignal;
  /** Stops the timer and detaches from the parents; call it in a finally block. */
  clear(): void;
}

function checkDelay(ms: number): number {
  if (!Number.isFinite(ms) || ms < 0) throw new RangeError(`a timeout must be a finite number >= 0 ms, got ${ms}`);
  if (ms > MAX_TIMER_MS)
    throw new RangeError(`a timeout of ${ms} ms exceeds Node's timer limit of ${MAX_TIMER_MS} ms (2^31-1)`);
  return Math.max(1, Math.ceil(ms));
}

/**
 * A signal that aborts when any parent aborts (with the parent's reason) or after `ms` (with a
 * TimeoutError carrying `message`). `ms` null means no timer: only the parents.
 */
export function armTimeout(
  parents: readonly (AbortSignal | undefined)[],
  ms: number | null,
  message: () => string = () => `no answer within ${((ms ?? 0) / 1000).toFixed(1)} s`,
): Timeout {
  const controller = new AbortController();
  const live = parents.filter((p): p is AbortSignal => p !== undefined);
  const onParent = (event: Event) => controller.abort((event.target as AbortSignal).reason);
  let timer: NodeJS.Timeout | null = null;
  const clear = () => {
    if (timer !== null) clearTimeout(timer);
    timer = null;
    for (const p of live) p.removeEventListener("abort", onParent);
  };
  const already = live.find((p) => p.aborted);
  if (already) {
    controller.abort(already.reason);
    return { signal: controller.signal, clear };
  }
  for (const p of live) p.addEventListener("abort", onParent, { once: true });
  if (ms !== null) {
    timer = setTimeout(() => {
      timer = null;
      controller.abort(new TimeoutError(message()));
    }, checkDelay(ms));
  }
  return { signal: controller.signal, clear };
}

/**
 * Why the signal aborted, to reject a promise with. AbortSignal.reason is typed any; the gate's
 * signals abort with Errors (a TimeoutError, the reasons the CLI and the process guard give, the
 * DOMException of a bare abort()). A caller's signal that aborts with anything else has that value
 * passed on unchanged.
 */
export function abortReason(signal: AbortSignal): Error {
  return signal.reason as Error;
}

/** Runs fn with a signal bounded by `ms` and the parents; the timer is cleared however fn ends. */
export async function withTimeout<T>(
  parents: readonly (AbortSignal | undefined)[],
  ms: number | null,
  message: () => string,
  fn: (signal: AbortSignal) => Promise<T>,
): Promise<T> {
  const t = armTimeout(parents, ms, message);
  try {
    return await fn(t.signal);
  } finally {
    t.clear();
  }
}

/**
 * Races a promise that takes no signal (a hook, a child process) against a timeout and the
 * parents: it rejects with a TimeoutError or the parent's reason, and the timer never outlives it.
 */
export function raceTimeout<T>(
  promise: Promise<T>,
  parents: readonly (AbortSignal | undefined)[],
  ms: number,
  message: () => string,
): Promise<T> {
  const t = armTimeout(parents, ms, message);
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(abortReason(t.signal));
    if (t.signal.aborted) return onAbort();
    t.signal.addEventListener("abort", onAbort, { once: true });
    promise.then(
      (v) => {
        t.clear();
        t.signal.removeEventListener("abort", onAbort);
        resolve(v);
      },
      (e) => {
        t.clear();
        t.signal.removeEventListener("abort", onAbort);
        // eslint-disable-next-line @typescript-eslint/prefer-promise-reject-errors -- passes on the raced promise's own rejection unchanged, whatever it is
        reject(e);
      },
    );
  });
}

/** Resolves after ms, or rejects with the signal's reason as soon as it aborts. */
export function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal.aborted) return reject(abortReason(signal));
    const onAbort = () => {
      clearTimeout(timer);
      reject(abortReason(signal));
    };
    const timer = setTimeout(() => {
      signal.removeEventListener("abort", onAbort);
      resolve();
    }, checkDelay(ms));
    signal.addEventListener("abort", onAbort, { once: true });
  });
}
