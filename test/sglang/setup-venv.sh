#!/usr/bin/env bash
# The Python environment of test/sglang: the pinned SGLang release and what its argument parser
# imports (parser-requirements.txt, --no-deps), built once per machine into the cache and reused
# while that file is unchanged. Prints the venv's path on its last line of stdout.
# Measured: README "Development" (67 MB of wheels, 370 MB installed).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cache="${GPUHOST_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/gpuhost}"
python="${GPUHOST_SGLANG_PYTHON:-python3}"
key="$(sha256sum <"$here/parser-requirements.txt" | cut -c1-16)"
venv="$cache/sglang-parser/$key"

if [[ -f "$venv/.complete" ]]; then
  echo "$venv"
  exit 0
fi
if ! "$python" -c 'import venv, ensurepip' >/dev/null 2>&1; then
  echo "test/sglang needs $python with venv and ensurepip (Debian: apt-get install python3-venv)" >&2
  exit 1
fi
# Built in place (a venv's scripts name its path) and marked complete last: an interrupted build is
# thrown away by the next run.
rm -rf "$venv"
mkdir -p "$(dirname "$venv")"
"$python" -m venv "$venv" >&2
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check --no-deps --only-binary=:all: \
  -r "$here/parser-requirements.txt" >&2
touch "$venv/.complete"
echo "$venv"
