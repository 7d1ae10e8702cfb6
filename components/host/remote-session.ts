// A command sent over SSH must end with its session. OpenSSH's sshd stops nothing when the client goes
// away: without a PTY no SIGHUP is sent, so after `kill -9` of `pulumi up` (or a drift interrupted,
// a step timed out) the host script, apt or a probe blocked on something, runs on with PPID 1 for as
// long as it likes. No PTY can be asked for instead (it merges stderr into stdout and echoes the
// secrets given on stdin). So the command runs under a watch: sshd makes every session's command the
// leader of its own process group (setsid), whose parent is the session's sshd process; when that
// process is gone, or its connection has been silent past a bound (sessionSilence), the watch sends
// the group SIGTERM, then SIGKILL after a bound. No Pulumi import:
// renderInvocation (invocation.ts) puts it in every SSH command line gpuhost renders, hostScript's
// Commands and execOnHost's (dynamic providers) alike.
import { shellQuote } from "./quote";

/** Seconds between SIGTERM and SIGKILL to a command whose session ended. */
export const SESSION_KILL_GRACE_SECONDS = 5;

/** Reads `ss -tine`: exits 0 when a socket of SOCKS (" ino:N ...") has been silent for BOUND ms. */
const STALLED_AWK = [
  '/^[^ \\t]/ { mine = 0; for (i = 1; i <= NF; i++) if (index(socks, " " $i " ")) mine = 1; next }',
  "mine { rcv = -1; ack = -1; wnd = 1",
  '  for (i = 1; i <= NF; i++) { split($i, kv, ":"); if (kv[1] == "lastrcv") rcv = kv[2] + 0; else if (kv[1] == "lastack") ack = kv[2] + 0; else if (kv[1] == "snd_wnd") wnd = kv[2] + 0 }',
  "  if (rcv >= bound && (ack >= bound || wnd == 0)) found = 1 }",
  "END { exit !found }",
].join("\n");

// The command line carries the watch itself, so it holds whichever provider runs it: gpuhost's
// offline command provider, the upstream pulumi-command provider (a Go SSH session, no PTY either)
// and execOnHost alike. The login shell expands "$PPID" (the session's sshd) and `exec`s bash, which
// keeps its PID; for a non-root user that bash runs through `sudo -n`, so the watch is root and its
// signals reach the root command too (a watch running as the user could only signal sudo, which
// relays SIGTERM to its child alone, and nothing past SIGKILL). The group signalled is the watch's
// own, read from /proc (sudo, or sshd's setsid, made it; the command and all it starts belong to it).
// The command runs in a subshell, so an `exit` in it ends only the subshell; the watch leaves with
// its own output closed, so it never holds the channel open, and is stopped once the command returns.
//
// A stalled network (packets dropped, no FIN, no RST) ends no process: sshd notices only when its
// own TCP keepalive gives up (hours by default; ClientAliveInterval is the host's config, off by
// default). So the watch also ends the command when the session's TCP connection went silent: a
// client that sends SSH keepalives (gpuhost's own: ServerAliveInterval) says so by setting
// GPUHOST_SESSION_SILENCE_S in the login shell (sessionSilence), and the watch reads the connection's
// TCP state (`ss`, its socket found among sshd's descriptors) every second. Silent means: no data
// from the client for that long (keepalives are data) and either nothing acknowledged for that long
// (a dropped path) or the client's window closed (a peer that stopped reading). A client that sends
// no keepalives (upstream's) sets nothing, and its sessions keep the parent-gone watch alone; so does
// a host without `ss`.
const WATCH = [
  "gpuhost_session=$1 gpuhost_silence=$2",
  'gpuhost_stat=$(</proc/$$/stat); gpuhost_stat=${gpuhost_stat##*) }; read -r _ _ gpuhost_group _ <<<"$gpuhost_stat"',
  // sshd's sockets, as ss names them (" ino:N ..."): read by the watch in the background, so the
  // command does not wait for it; none when no silence bound was set.
  'gpuhost_find_sockets() { gpuhost_sockets=" "; [[ $gpuhost_silence =~ ^[1-9][0-9]*$ ]] || return; for gpuhost_fd in /proc/"$gpuhost_session"/fd/*; do gpuhost_link=$(readlink "$gpuhost_fd") && [[ $gpuhost_link == socket:* ]] && gpuhost_sockets+="ino:${gpuhost_link:8:-1} "; done; }',
  `gpuhost_stalled() { [[ $gpuhost_sockets != " " ]] && ss -tine 2>/dev/null | awk -v socks="$gpuhost_sockets" -v bound=$((gpuhost_silence * 1000)) ${shellQuote(STALLED_AWK)}; }`,
  `(gpuhost_find_sockets; while kill -0 "$gpuhost_session" 2>/dev/null && ! gpuhost_stalled; do sleep 1; done; trap "" TERM; kill -TERM -- "-$gpuhost_group"; sleep ${SESSION_KILL_GRACE_SECONDS}; kill -KILL -- "-$gpuhost_group") </dev/null >/dev/null 2>&1 &`,
  "gpuhost_watch=$!",
  '(eval "$3")',
  "gpuhost_rc=$?",
  'kill "$gpuhost_watch" 2>/dev/null',
  'exit "$gpuhost_rc"',
].join("\n");

/**
 * The remote command line that runs COMMAND (through `sudo -n` when SUDO) and stops it, with all it
 * started, when the SSH session ends or, for a client that set GPUHOST_SESSION_SILENCE_S, falls silent.
 */
export function boundToSession(command: string, sudo = false): string {
  return `exec ${sudo ? "sudo -n " : ""}bash -c ${shellQuote(WATCH)} gpuhost-session "$PPID" "\${GPUHOST_SESSION_SILENCE_S:-0}" ${shellQuote(command)}`;
}

/**
 * What a client that sends SSH keepalives every KEEPALIVE_SECONDS, giving up after COUNT unanswered,
 * puts before the command line it sends: the watch then ends the command once the session was silent
 * as long as the client itself waits before giving up (a shell assignment, read by the login shell
 * alone: a command line without the watch is unchanged by it).
 */
export function sessionSilence(keepaliveSeconds: number, count: number): string {
  return `GPUHOST_SESSION_SILENCE_S=${Math.max(1, Math.ceil(keepaliveSeconds * count))}; `;
}
