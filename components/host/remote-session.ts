// A command sent over SSH must end with its session. OpenSSH's sshd stops nothing when the client goes
// away: without a PTY no SIGHUP is sent, so after `kill -9` of `pulumi up` (or a drift interrupted,
// a step timed out) the host script, apt or a probe blocked on something, runs on with PPID 1 for as
// long as it likes. No PTY can be asked for instead (it merges stderr into stdout and echoes the
// secrets given on stdin). So the command runs under a watch: sshd makes every session's command the
// leader of its own process group (setsid), whose parent is the session's sshd process; when that
// process is gone, the watch sends the group SIGTERM, then SIGKILL after a bound. No Pulumi import:
// execOnHost (dynamic providers) and the offline command provider share it.
import { shellQuote } from "./quote";

/** Seconds between SIGTERM and SIGKILL to a command whose session ended. */
export const SESSION_KILL_GRACE_SECONDS = 5;

// Run by bash (the scripts need it anyway), `exec`ed by the login shell so it keeps the group leader's
// PID ($$ = the group) and its parent (the session's sshd). The command runs in a subshell, so an
// `exit` in it ends only the subshell; the watch leaves with its own output closed, so it never holds
// the channel open, and is stopped once the command returns.
const WATCH = [
  "gpuhost_session=$PPID",
  `(while kill -0 "$gpuhost_session" 2>/dev/null; do sleep 1; done; trap "" TERM; kill -TERM -- -$$; sleep ${SESSION_KILL_GRACE_SECONDS}; kill -KILL -- -$$) </dev/null >/dev/null 2>&1 &`,
  "gpuhost_watch=$!",
  '(eval "$1")',
  "gpuhost_rc=$?",
  'kill "$gpuhost_watch" 2>/dev/null',
  'exit "$gpuhost_rc"',
].join("\n");

/** The remote command line that runs COMMAND and stops it, with all it started, when the SSH session ends. */
export function boundToSession(command: string): string {
  return `exec bash -c ${shellQuote(WATCH)} gpuhost-session ${shellQuote(command)}`;
}
