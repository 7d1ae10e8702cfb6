#!/usr/bin/env bash
# Restarts gpuhost-router.service (after FleetVerification reinstalled smg in its venv: the running
# router still has the old release loaded). Usage: restart-router.sh
set -euo pipefail
root="${GPUHOST_ROOT:-}"
unit=gpuhost-router.service
if [[ -z "$root" && $EUID -ne 0 ]]; then
  echo "$(basename "$0"): must run as root (hostScript runs it through sudo -n for other users)" >&2
  exit 2
fi
systemctl reset-failed "$unit" 2>/dev/null || true
systemctl restart "$unit"
echo "restarted=true (smg reinstalled)"
