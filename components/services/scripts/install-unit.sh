#!/usr/bin/env bash
# Installs one rendered unit file, only when its content differs, and reloads systemd then.
# Starting and restarting is activate.sh's job, so installing a unit never restarts anything.
# Usage: install-unit.sh UNIT_NAME CONTENT_BASE64
# (base64, so that the unit text reaches the host byte for byte through any quoting.)
set -euo pipefail

name="$1"
content_b64="$2"
root="${GPUHOST_ROOT:-}"

# The serving units, and the drift check's service and timer (components/drift-check).
if [[ ! "$name" =~ ^(sglang-[a-z0-9]+\.service|gpuhost-drift-check-[A-Za-z0-9_.-]+\.(service|timer))$ ]]; then
  echo "install-unit: refusing unit name '$name'" >&2
  exit 2
fi
if [[ -z "$root" && $EUID -ne 0 ]]; then
  echo "$(basename "$0"): must run as root (hostScript runs it through sudo -n for other users)" >&2
  exit 2
fi

dir="$root/etc/systemd/system"
target="$dir/$name"
tmp="$(mktemp)"
trap 'rm -f "$tmp"' EXIT
printf '%s' "$content_b64" | base64 -d >"$tmp"

if [[ -f "$target" ]] && cmp -s "$tmp" "$target"; then
  echo "changed=false"
  exit 0
fi
mkdir -p "$dir"
install -m 0644 "$tmp" "$target.gpuhost-new"
mv "$target.gpuhost-new" "$target"
systemctl daemon-reload
echo "changed=true"
