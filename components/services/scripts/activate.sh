#!/usr/bin/env bash
# Makes ACTIVE the one running service: stops and disables the others (they share the GPUs), enables
# ACTIVE, and restarts it only when its stamp (hash of the rendered unit, the environment lock and
# a keyed hash of the API key) differs from the one recorded at its last start, or when it is not running.
# A `pulumi up` that changes nothing therefore restarts nothing.
# Every (re)start records a new activation id on the host, printed as `activation=ID` on every run:
# VerifiedGeneration records the id it verified, so any start this script makes (a reverted rollout
# included, whose stamp equals an earlier verified one) is followed by the gate in the same update.
# Usage: activate.sh ACTIVE_UNIT STAMP [OTHER_UNIT...]
set -euo pipefail

active="$1"
stamp="$2"
shift 2
root="${GPUHOST_ROOT:-}"

for unit in "$active" "$@"; do
  if [[ ! "$unit" =~ ^sglang-[a-z0-9]+\.service$ ]]; then
    echo "activate: refusing unit name '$unit'" >&2
    exit 2
  fi
done
if [[ ! "$stamp" =~ ^[0-9a-f]{64}$ ]]; then
  echo "activate: refusing stamp '$stamp'" >&2
  exit 2
fi
if [[ -z "$root" && $EUID -ne 0 ]]; then
  echo "$(basename "$0"): must run as root (hostScript runs it through sudo -n for other users)" >&2
  exit 2
fi

for other in "$@"; do
  if [[ -f "$root/etc/systemd/system/$other" ]]; then
    systemctl stop "$other"
    systemctl disable "$other"
  fi
done

stamps="$root/var/lib/gpuhost/units"
stampfile="$stamps/$active.stamp"
# Root-only: the stamps are keyed hashes, but nobody else needs to read them.
umask 077
mkdir -p "$stamps"
chmod 0700 "$stamps"
systemctl enable "$active"

activationfile="$stamps/$active.activation"
# A fresh id: the UTC time to the nanosecond and this process, never one an earlier start had.
record_activation() {
  printf '%s-%s\n' "$(date -u +%Y%m%dT%H%M%S.%NZ)" "$$" >"$activationfile.tmp"
  chmod 0600 "$activationfile.tmp"
  mv "$activationfile.tmp" "$activationfile"
}

previous=""
if [[ -f "$stampfile" ]]; then previous="$(cat "$stampfile")"; fi
if [[ "$previous" != "$stamp" ]]; then
  systemctl restart "$active"
  record_activation
  echo "restarted=true (unit or environment changed)"
elif ! systemctl is-active --quiet "$active"; then
  # A unit that crashed into its start limit stays "failed" and refuses a plain start until the
  # failure is cleared: after the cause is repaired, the next `pulumi up` must be able to start it.
  systemctl reset-failed "$active"
  systemctl start "$active"
  record_activation
  echo "restarted=true (was not running)"
else
  echo "restarted=false"
fi
# A host activated before ids were recorded gets one now (verified once more, then stable).
[[ -f "$activationfile" ]] || record_activation
printf '%s\n' "$stamp" >"$stampfile.tmp"
chmod 0600 "$stampfile.tmp"
mv "$stampfile.tmp" "$stampfile"
echo "activation=$(cat "$activationfile")"
