#!/usr/bin/env bash
# Writes the API key's EnvironmentFile, root-only (0600): systemd reads it as root before dropping to
# the service user, and the key reaches SGLang as --api-key ${SGLANG_API_KEY}. The key arrives on
# standard input (hostScript's `stdin`), never in an argument or the environment, which any user of
# the host can read from the process list while the script runs.
# Usage: api-key-file.sh PATH <<<"$key"
set -euo pipefail

path="$1"
root="${GPUHOST_ROOT:-}"
key=""
IFS= read -r key || true

if [[ ! "$path" =~ ^/[A-Za-z0-9._+@/-]*$ ]]; then
  echo "api-key-file: refusing path '$path'" >&2
  exit 2
fi
# Restricted so the file needs no quoting rules of systemd's EnvironmentFile= parser.
if [[ ! "$key" =~ ^[A-Za-z0-9._~+/=-]+$ ]]; then
  echo "api-key-file: the key on standard input must be letters, digits and ._~+/=- only" >&2
  exit 2
fi
if [[ -z "$root" && $EUID -ne 0 ]]; then
  echo "api-key-file: must run as root (hostScript runs it through sudo -n for other users)" >&2
  exit 2
fi

target="$root$path"
mkdir -p "$(dirname "$target")"
umask 077
tmp="$(mktemp "$(dirname "$target")/.gpuhost-env.XXXXXX")"
trap 'rm -f "$tmp"' EXIT
printf 'SGLANG_API_KEY=%s\n' "$key" >"$tmp"
if [[ -f "$target" ]] && cmp -s "$tmp" "$target"; then
  echo "changed=false"
  exit 0
fi
chmod 0600 "$tmp"
mv "$tmp" "$target"
echo "changed=true"
