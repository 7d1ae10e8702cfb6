#!/usr/bin/env bash
# Stops, disables and removes one unit and its restart stamp. Idempotent: a missing unit is fine.
# Usage: remove-unit.sh UNIT_NAME
set -euo pipefail

name="$1"
root="${GPUHOST_ROOT:-}"

# The serving units, and the drift check's service and timer (components/drift-check).
if [[ ! "$name" =~ ^(sglang-[a-z0-9]+\.service|gpuhost-drift-check-[A-Za-z0-9_.-]+\.(service|timer))$ ]]; then
  echo "remove-unit: refusing unit name '$name'" >&2
  exit 2
fi
if [[ -z "$root" && $EUID -ne 0 ]]; then
  echo "$(basename "$0"): must run as root (hostScript runs it through sudo -n for other users)" >&2
  exit 2
fi

target="$root/etc/systemd/system/$name"
if [[ -f "$target" ]]; then
  systemctl stop "$name" || true
  systemctl disable "$name" || true
  rm -f "$target" "$root/var/lib/gpuhost/units/$name.stamp"
  systemctl daemon-reload
  systemctl reset-failed "$name" 2>/dev/null || true
  echo "changed=true"
else
  echo "changed=false"
fi
