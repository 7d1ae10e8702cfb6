#!/usr/bin/env bash
# Writes gpuhost-router.service and the launcher's config (the workers the stack registers), enables
# the unit, and restarts it only when STAMP (hash of unit, config and the key's keyed hash) differs
# from the one of its last start, when the unit file on the host differed from the rendered one, or
# when it is not running: the worker list is the stack's, so a router restart (which forgets workers
# added at run time) starts from the right list. Run again, it is also the repair of the router's
# machine (FleetVerification, components/fleet-verification/router-host.ts).
# Usage: configure-router.sh UNIT_BASE64 CONFIG_BASE64 STAMP
set -euo pipefail

unit_b64="$1"
config_b64="$2"
stamp="$3"
root="${GPUHOST_ROOT:-}"
unit=gpuhost-router.service

if [[ ! "$stamp" =~ ^[0-9a-f]{64}$ ]]; then
  echo "configure-router: refusing stamp '$stamp'" >&2
  exit 2
fi
if [[ -z "$root" && $EUID -ne 0 ]]; then
  echo "$(basename "$0"): must run as root (hostScript runs it through sudo -n for other users)" >&2
  exit 2
fi

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
printf '%s' "$unit_b64" | base64 -d >"$tmp/unit"
printf '%s' "$config_b64" | base64 -d >"$tmp/config"

mkdir -p "$root/etc/systemd/system" "$root/etc/gpuhost-router"
# A unit that differs on disk (edited on the host) may be what the running router was started from:
# it is rewritten and the router restarted from the rendered one.
unit_rewritten=false
if ! cmp -s "$tmp/unit" "$root/etc/systemd/system/$unit"; then
  install -m 0644 "$tmp/unit" "$root/etc/systemd/system/$unit"
  systemctl daemon-reload
  unit_rewritten=true
fi
# Readable by the router's DynamicUser: it holds worker URLs and ports, no secret.
install -m 0644 "$tmp/config" "$root/etc/gpuhost-router/router.json"
systemctl enable "$unit"

stamps="$root/var/lib/gpuhost/units"
umask 077
mkdir -p "$stamps"
previous=""
if [[ -f "$stamps/$unit.stamp" ]]; then previous="$(cat "$stamps/$unit.stamp")"; fi
if [[ "$previous" != "$stamp" ]]; then
  systemctl reset-failed "$unit" 2>/dev/null || true
  systemctl restart "$unit"
  echo "restarted=true (unit, workers or key changed)"
elif [[ "$unit_rewritten" == true ]]; then
  systemctl reset-failed "$unit" 2>/dev/null || true
  systemctl restart "$unit"
  echo "restarted=true (its unit file differed on the host)"
elif ! systemctl is-active --quiet "$unit"; then
  systemctl reset-failed "$unit" 2>/dev/null || true
  systemctl restart "$unit"
  echo "restarted=true (was not running)"
else
  echo "restarted=false"
fi
printf '%s\n' "$stamp" >"$stamps/$unit.stamp"
