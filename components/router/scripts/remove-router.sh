#!/usr/bin/env bash
# Stops and removes gpuhost-router.service and its config (the venv stays: reinstalling is slow and
# it holds no state). Usage: remove-router.sh
set -euo pipefail
root="${GPUHOST_ROOT:-}"
unit=gpuhost-router.service
if [[ -z "$root" && $EUID -ne 0 ]]; then
  echo "$(basename "$0"): must run as root (hostScript runs it through sudo -n for other users)" >&2
  exit 2
fi
if [[ -f "$root/etc/systemd/system/$unit" ]]; then
  systemctl disable --now "$unit" || systemctl stop "$unit" || true
  rm -f "$root/etc/systemd/system/$unit"
  systemctl daemon-reload
  # A router that failed, or was killed at the end of its stop timeout on a loaded host, stays listed
  # as failed after its file is gone: the delete leaves no trace of it (as remove-unit.sh does).
  systemctl reset-failed "$unit" 2>/dev/null || true
fi
rm -f "$root/etc/gpuhost-router/router.json" "$root/var/lib/gpuhost/units/$unit.stamp"
