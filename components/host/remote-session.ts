// A command sent over SSH must end with its session. OpenSSH's sshd stops nothing when the client goes
// away: without a PTY no SIGHUP is sent, so after `kill -9` of `pulumi up` (or a drift interrupted,
// a step timed out) the host script, apt or a probe blocked on something, runs on with PPID 1 for as
// long as it likes. No PTY can be asked for instead (it merges stderr into stdout and echoes the
// secrets given on stdin). So the command runs under a watch: sshd makes every session's command the
// leader of its own process group (setsid), whose parent is the session's sshd process; when that
// process is gone, the watch sends the group SIGTERM, then SIGKILL after a bound. No Pulumi import:
// renderInvocation (invocation.ts) puts it in every SSH command line gpuhost renders, hostScript's
// Commands and execOnHost's (dynamic providers) alike.
import { shellQuote } from "./quote";

/** Seconds between SIGTERM and SIGKILL to a command whose session ended. */
export const SESSION_KILL_GRACE_SECONDS = 5;

// The command line carries the watch itself, so it holds whichever provider runs it: gpuhost's
// offline command provider, the upstream pulumi-command provider (a Go SSH session, no PTY either)
// and execOnHost alike. The login shell expands "$PPID" (the session's sshd) and `exec`s bash, which
// keeps its PID; for a non-root user that bash runs through `sudo -n`, so the watch is root and its
// signals reach the root command too (a watch running as the user could only signal sudo, which
// relays SIGTERM to its child alone, and nothing past SIGKILL). The group signalled is the watch's
// own, read from /proc (sudo, or sshd's setsid, made it; the command and all it starts belong to it).
// The command runs in a subshell, so an `exit` in it ends only the subshell; the watch leaves with
// its own output closed, so it never holds the channel open, and is stopped once the command returns.
const WATCH = [
  "gpuhost_session=$1",
  'gpuhost_stat=$(</proc/$$/stat); gpuhost_stat=${gpuhost_stat##*) }; read -r _ _ gpuhost_group _ <<<"$gpuhost_stat"',
  `(while kill -0 "$gpuhost_session" 2>/dev/null; do sleep 1; done; trap "" TERM; kill -TERM -- "-$gpuhost_group"; sleep ${SESSION_KILL_GRACE_SECONDS}; kill -KILL -- "-$gpuhost_group") </dev/null >/dev/null 2>&1 &`,
  "gpuhost_watch=$!",
  '(eval "$2")',
  "gpuhost_rc=$?",
  'kill "$gpuhost_watch" 2>/dev/null',
  'exit "$gpuhost_rc"',
].join("\n");

/**
 * The remote command line that runs COMMAND (through `sudo -n` when SUDO) and stops it, with all it
 * started, when the SSH session ends.
 */
export function boundToSession(command: string, sudo = false): string {
  return `exec ${sudo ? "sudo -n " : ""}bash -c ${shellQuote(WATCH)} gpuhost-session "$PPID" ${shellQuote(command)}`;
}
