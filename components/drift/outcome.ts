// How a drift check ended, and the exit status each ending has, so that cron, a systemd timer or
// an alert can tell "the hosts drifted" from "the check could not run", and one failure from another.
// Pulumi CLI 3.226.1 and later (pulumi/docs exit-codes) separate them: 7 when
// `--expect-no-changes` saw changes, 6 stack not found, 3 auth, 8 cancelled, 9 timeout, 255 internal.
// Measured on 3.276.0 (the engine .gpuhost/engine runs): a missing stack exits 6 ("error: no stack
// named 'x' found"); a missing or wrong passphrase exits 1, not 3 ("get stack secrets manager:
// passphrase must be set ..." / "incorrect passphrase"), so its stderr names it; a preview-only
// refresh takes no stack lock (it exits 0 while another process holds the file backend's lock), so
// "locked" comes only from a backend that refuses a concurrent read, recognised by its message.
// So gpuhost looks for the lock itself before it runs the refresh (engine/pulumi.ts stackLocks: a
// file backend's lock files; lastUpdate: an update the service records as in progress), and skips
// the check while an update holds it; since the refresh itself takes no lock, an update may also
// start while it reads, so the lock and the history are looked at again after it, and a result an
// update overlapped is discarded (overlapped: pulumi PR #22385). A stack whose last update failed is paused: no check runs
// until a person acts (a later successful `pulumi up`, or `gpuhost drift --resume`), since every
// check would report the half-done update again, and a --repair would retry it.

/** Every way a check ends: a verdict (clean, drift) or a failure, each with its own exit status. */
export const DRIFT_OUTCOMES = {
  clean: { code: 0, meaning: "clean" },
  drift: { code: 1, meaning: "drift" },
  usage: { code: 2, meaning: "a bad command line, or no stack selected" },
  "not-checked": {
    code: 10,
    meaning: "a host, service or router could not be probed (its check was skipped); the others were checked",
  },
  engine: { code: 11, meaning: "the engine failed (an engine error, unreadable output, the engine missing)" },
  "no-stack": { code: 12, meaning: "no such stack (never brought up)" },
  auth: {
    code: 13,
    meaning: "the stack's secrets cannot be opened (no passphrase, a wrong one) or the backend refused the login",
  },
  locked: {
    code: 14,
    meaning: "skipped: an update holds the stack's lock (nothing was checked; the next check runs as usual)",
  },
  timeout: { code: 15, meaning: "the engine timed out" },
  textfile: { code: 16, meaning: "the --textfile metrics file could not be written" },
  paused: {
    code: 17,
    meaning:
      "paused: the stack's last update failed, so nothing is checked until a person acts (a successful `pulumi up`, or `gpuhost drift --resume`)",
  },
  overlapped: {
    code: 18,
    meaning: "skipped: an update ran during the check (its result is discarded; the next check runs as usual)",
  },
  interrupted: { code: 130, meaning: "interrupted (the engine and everything it started are stopped first)" },
} as const;

export type DriftOutcome = keyof typeof DRIFT_OUTCOMES;
/** The outcomes that are not a verdict on the hosts. */
export type DriftFailure = Exclude<DriftOutcome, "clean" | "drift">;

/** The outcomes that checked nothing on purpose: not a failure of the check (no success 0 in the metrics). */
export const HELD_OUTCOMES = ["locked", "paused", "overlapped"] as const satisfies readonly DriftFailure[];
export const isHeld = (outcome: DriftOutcome): outcome is (typeof HELD_OUTCOMES)[number] =>
  (HELD_OUTCOMES as readonly DriftOutcome[]).includes(outcome);

export const exitCodeOfOutcome = (outcome: DriftOutcome): number => DRIFT_OUTCOMES[outcome].code;

/** What the engine's stderr says, for the failures an engine before 3.226.1 (or 3.276.0's exit 1) leaves to it. */
const BY_MESSAGE: [RegExp, DriftFailure][] = [
  [/no stack named .* found/i, "no-stack"],
  [/passphrase must be set|incorrect passphrase|get stack secrets manager|failed to decrypt/i, "auth"],
  // the file backend's lock check and the service's answer to a concurrent update
  [/stack is currently locked|another update is currently in progress|\[409\] conflict/i, "locked"],
];

/** The engine's own exit statuses that name a failure by themselves (pulumi/docs exit-codes). */
const BY_CODE: Partial<Record<number, DriftFailure>> = { 3: "auth", 6: "no-stack", 8: "interrupted", 9: "timeout" };

/**
 * The failure the engine's exit status and stderr name, or undefined when they name none: then the
 * refresh's events decide (0 and 7 always; 1 is also what older engines exit for drift).
 */
export function engineFailure(code: number, stderr: string): DriftFailure | undefined {
  const byCode = BY_CODE[code];
  if (byCode) return byCode;
  if (code === 0 || code === 7) return undefined;
  return BY_MESSAGE.find(([re]) => re.test(stderr))?.[1];
}
