#!/usr/bin/env bash
# Restart one service after its unit file was restored on the host: reload systemd (so it runs the
# restored file, not the edited one it may have loaded) and restart that unit only. The activation
# step that follows keeps the other services stopped, so exactly the active one runs.
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
echo "restarted=${name}"
