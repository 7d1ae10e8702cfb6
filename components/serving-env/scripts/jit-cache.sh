#!/usr/bin/env bash
# Creates FlashInfer's JIT workspace for one toolkit: BASE/KEY, owned by the service user.
# KEY is derived from the toolkit fingerprint, so a changed toolkit gets a new, empty workspace and
# kernels compiled against the old one can never be loaded (the story cleared ~/.cache/flashinfer
# by hand after the toolkit changed). Older workspaces are left for `gpuhost doctor` to report.
# Usage: jit-cache.sh BASE KEY USER
set -euo pipefail

base="$1"
key="$2"
user="$3"
root="${GPUHOST_ROOT:-}"

if [[ ! "$base" =~ ^/[A-Za-z0-9._+@/-]*$ || ! "$key" =~ ^[A-Za-z0-9._-]+$ ]]; then
  echo "jit-cache: refusing base '$base' or key '$key'" >&2
  exit 2
fi
if [[ ! "$user" =~ ^[a-z_][a-z0-9_-]{0,31}$ ]]; then
  echo "jit-cache: refusing user name '$user'" >&2
  exit 2
fi

workspace="$base/$key"
if [[ -n "$root" ]]; then
  mkdir -p "$root$workspace"
else
  if [[ $EUID -ne 0 ]]; then
    echo "jit-cache: must run as root (hostScript runs it through sudo -n for other users)" >&2
    exit 2
  fi
  install -d -m 0755 "$base"
  install -d -o "$user" -g "$user" -m 0750 "$workspace"
fi
echo "workspace=$workspace"
