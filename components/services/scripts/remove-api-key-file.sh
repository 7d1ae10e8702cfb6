#!/usr/bin/env bash
# Removes the API key's EnvironmentFile (when the key is unset or the stack is destroyed). Idempotent.
# Usage: remove-api-key-file.sh PATH
set -euo pipefail

path="$1"
root="${GPUHOST_ROOT:-}"

if [[ ! "$path" =~ ^/[A-Za-z0-9._+@/-]*$ ]]; then
  echo "remove-api-key-file: refusing path '$path'" >&2
  exit 2
fi
if [[ -f "$root$path" ]]; then
  rm -f "$root$path"
  echo "changed=true"
else
  echo "changed=false"
fi
