#!/usr/bin/env bash
# Read-only look at the router's machine for FleetVerification's refresh: what systemd runs as
# gpuhost-router.service and the launcher's config, by sha256, whether the unit is active, and the
# smg release in the router's venv. Prints key=value lines; changes nothing.
# Usage: probe-router.sh VENV
set -euo pipefail

venv="$1"
root="${GPUHOST_ROOT:-}"
unit=gpuhost-router.service

if [[ ! "$venv" =~ ^/[A-Za-z0-9._/-]+$ || "$venv" == *..* ]]; then
  echo "probe-router: refusing venv path '$venv'" >&2
  exit 2
fi

sha() {
  if [[ -f "$1" ]]; then sha256sum "$1" | cut -d' ' -f1; else echo missing; fi
}

echo "unit=$(sha "$root/etc/systemd/system/$unit")"
echo "config=$(sha "$root/etc/gpuhost-router/router.json")"
# is-active prints the state and exits non-zero for anything but active: the word is what counts.
echo "active=$(systemctl is-active "$unit" 2>/dev/null || true)"
if [[ -x "$root$venv/bin/smg" ]]; then
  echo "smg=$("$root$venv/bin/smg" --version 2>/dev/null | head -n1 | tr -d '\r' || true)"
else
  echo "smg=missing"
fi
