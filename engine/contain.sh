#!/usr/bin/env bash
# contain.sh CMD [ARGS...]: runs CMD in place of this shell (same PID) so that nothing it starts
# outlives it, however it ends: a normal exit, one Ctrl-C, or SIGKILL of CMD itself. `npm test` runs
# vitest this way (engine/run.sh), because the suite starts processes that leave their parent on
# purpose (the simulated host's unit supervisors are detached, as systemd's services are; SMG and
# sshd run with a scrubbed environment; systemd-nspawn boots a whole Debian host), and a runner
# killed by SIGKILL runs no cleanup of its own.
#
# How: a watchdog in a session of its own (so a terminal's Ctrl-C, sent to CMD's process group, does
# not reach it) waits for CMD's PID to go, then
#   - as root, where the cgroup-v2 hierarchy is writable: kills CMD's cgroup, made for this run and
#     entered before the exec. Every descendant stays in it, detached, setsid or env-scrubbed alike,
#     and a container's payload lives in a cgroup below it; the kernel's cgroup.kill takes them all;
#   - always: kills any process still carrying this run's GPUHOST_RUN_ID in its environment (all
#     that is left to a user without cgroups, and a second net);
#   - unmounts what is still mounted in the run's own temporary folder (a test host's root) and
#     removes the folder (TMPDIR points into it for the run: every mkdtemp of the suite lands there),
#     and the port reservations of processes that are gone.
# Port reservations stay in the folder every run shares (GPUHOST_PORT_RESERVATIONS, read by ports.ts),
# so two runs side by side still never hand out the same port.
set -euo pipefail

log() { printf '[gpuhost contain] %s\n' "$*" >&2; }

# kill_marked ID: SIGKILL every process (but this one) whose environment holds GPUHOST_RUN_ID=ID.
# One grep reads every environment (-z: an entry a line, -x: the whole entry): a tr and a grep per
# process took the watchdog past its 10 s bound on a loaded machine with a few hundred processes.
kill_marked() {
  local id="$1" env pid
  while IFS= read -r env; do
    pid="${env#/proc/}"
    pid="${pid%/environ}"
    [ "$pid" = "$$" ] && continue
    kill -KILL "$pid" 2>/dev/null || true
  done < <(grep -lszxF "GPUHOST_RUN_ID=$id" /proc/[0-9]*/environ || true)
}

# watch PID ID CGROUP RUN_TMP PORTS: the watchdog's body (see the header).
watch() {
  local main="$1" id="$2" cg="$3" run_tmp="$4" ports="$5" f holder
  trap '' INT TERM HUP
  while kill -0 "$main" 2>/dev/null; do sleep 0.5; done
  if [ -n "$cg" ] && [ -d "$cg" ]; then
    echo 1 >"$cg/cgroup.kill" 2>/dev/null || true
    for _ in $(seq 1 40); do
      [ -s "$cg/cgroup.procs" ] || break
      sleep 0.25
    done
  fi
  kill_marked "$id"
  # A container's processes can take a moment to be reaped; its cgroups go once they are empty.
  if [ -n "$cg" ] && [ -d "$cg" ]; then
    for _ in $(seq 1 40); do
      find "$cg" -depth -mindepth 1 -type d -exec rmdir {} + 2>/dev/null || true
      rmdir "$cg" 2>/dev/null && break
      sleep 0.25
    done
  fi
  # A test host's overlay root (test/testhost/harness.ts) that a killed run left mounted: detached
  # first, innermost first, so the removal below reaches its folder.
  while read -r _ mnt _; do
    case "$mnt" in "$run_tmp"/*) umount -l "$mnt" 2>/dev/null || true ;; esac
  done < <(tac /proc/self/mounts)
  # --one-file-system: a mount left inside that would not go is never followed into.
  rm -rf --one-file-system "$run_tmp" 2>/dev/null || true
  if [ -d "$ports" ]; then
    for f in "$ports"/*; do
      [ -f "$f" ] || continue
      holder="$(head -c 32 "$f" 2>/dev/null || true)"
      if [[ "$holder" =~ ^[0-9]+$ ]] && ! kill -0 "$holder" 2>/dev/null; then rm -f "$f"; fi
    done
  fi
}

if [ "${1:-}" = "--watch" ]; then
  shift
  watch "$@"
  exit 0
fi
[ $# -gt 0 ] || { echo "usage: bash engine/contain.sh CMD [ARGS...]" >&2; exit 2; }

base_tmp="${TMPDIR:-/tmp}"
GPUHOST_RUN_ID="run-$$-$(date +%s%N)"
export GPUHOST_RUN_ID
export GPUHOST_PORT_RESERVATIONS="${GPUHOST_PORT_RESERVATIONS:-$base_tmp/gpuhost-ports-$(id -u)}"
run_tmp="$(mktemp -d "$base_tmp/gpuhost-run.XXXXXX")"
# Others may enter (not list) it, as they may /tmp: a test that runs a copy as another user (runuser
# -u nobody) reaches its own folder inside by name.
chmod 711 "$run_tmp"
export TMPDIR="$run_tmp"

# A cgroup of this run's own on the cgroup-v2 hierarchy (unified, or hybrid's /sys/fs/cgroup/unified),
# where the kernel has cgroup.kill (5.14 and later). GPUHOST_CONTAIN_NO_CGROUP=1 tries without it.
cg=""
if [ "$(id -u)" = 0 ] && [ "${GPUHOST_CONTAIN_NO_CGROUP:-}" != 1 ]; then
  # Below this shell's own cgroup there ("0::/path" in /proc/self/cgroup), so a contained run inside
  # another (this script's own test, under `npm test`) stays inside the outer run's cgroup too.
  here="$(sed -n 's/^0:://p' /proc/self/cgroup)"
  for root in /sys/fs/cgroup/unified /sys/fs/cgroup; do
    dir="$root${here%/}/gpuhost-$GPUHOST_RUN_ID"
    if [ -f "$root/cgroup.procs" ] && mkdir "$dir" 2>/dev/null; then
      if [ -e "$dir/cgroup.kill" ]; then cg="$dir"; else rmdir "$dir"; fi
      break
    fi
  done
fi

# The watchdog first, outside the run's cgroup and in a session of its own; then this shell enters
# the cgroup and becomes CMD.
env -u GPUHOST_RUN_ID setsid bash "${BASH_SOURCE[0]}" --watch "$$" "$GPUHOST_RUN_ID" "$cg" "$run_tmp" "$GPUHOST_PORT_RESERVATIONS" \
  </dev/null >/dev/null 2>&1 &
if [ -n "$cg" ] && ! echo "$$" >"$cg/cgroup.procs" 2>/dev/null; then
  log "could not enter $cg: only processes carrying this run's marker are stopped at its end"
fi
exec "$@"
