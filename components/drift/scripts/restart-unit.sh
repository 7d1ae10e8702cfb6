#!/usr/bin/env bash
# Restart one service after its unit file was restored on the host: reload systemd (so it runs the
# restored file, not the edited one it may have loaded) and restart that unit only. The activation
# step that follows keeps the other services stopped, so exactly the active one runs.
# The restart is a new start of the service: like activate.sh it records a fresh activation id in
# the same file (and prints `activation=ID`), so VerifiedGeneration verifies it in the same update.
# Usage: restart-unit.sh UNIT_NAME
set -euo pipefail

name="$1"
if [[ ! $name =~ ^[A-Za-z0-9_.@:-]+\.service$ || $name == -* ]]; then
  echo "restart-unit: refusing unit name '$name'" >&2
  exit 2
fi
if [[ -z ${GPUHOST_ROOT:-} && $EUID -ne 0 ]]; then
  echo "restart-unit: must run as root (execOnHost runs it through sudo -n for other users)" >&2
  exit 2
fi

systemctl daemon-reload
systemctl restart "$name"
# activate.sh's record of the unit's starts (root-only, like the stamps beside it).
stamps="${GPUHOST_ROOT:-}/var/lib/gpuhost/units"
umask 077
mkdir -p "$stamps"
activation="$(date -u +%Y%m%dT%H%M%S.%NZ)-$$"
printf '%s\n' "$activation" >"$stamps/$name.activation.tmp"
mv "$stamps/$name.activation.tmp" "$stamps/$name.activation"
echo "restarted=${name}"
echo "activation=${activation}"
