#!/usr/bin/env bash
# The Python environment of test/sglang: the pinned SGLang release and what its argument parser
# imports (parser-requirements.txt, --no-deps), built once per machine into the cache and reused
# while the pins and the interpreter are unchanged. Prints the venv's path on its last line of stdout.
# Measured: README "Development" (67 MB of wheels, 370 MB installed).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cache="${GPUHOST_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/gpuhost}"
python="${GPUHOST_SGLANG_PYTHON:-python3}"
if ! "$python" -c 'import venv, ensurepip' >/dev/null 2>&1; then
  echo "test/sglang needs $python with venv and ensurepip (Debian: apt-get install python3-venv)" >&2
  exit 1
fi
# Keyed by the pins and the interpreter: a new python3 gets a new venv.
key="$({ cat "$here/parser-requirements.txt"; "$python" -c 'import sys; print(sys.executable, sys.version)'; } | sha256sum | cut -c1-16)"
venv="$cache/sglang-parser/$key"

if [[ -f "$venv/.complete" ]]; then
  echo "$venv"
  exit 0
fi
mkdir -p "$(dirname "$venv")"
# One build at a time on a machine (test runs of several checkouts share the cache).
exec 9>"$(dirname "$venv")/.lock"
flock 9
if [[ -f "$venv/.complete" ]]; then
  echo "$venv"
  exit 0
fi
# Built in place (a venv's scripts name its path) and marked complete last: an interrupted build is
# thrown away by the next run.
rm -rf "$venv"
echo "sglang-parser: installing SGLang's parser into $venv (first run only)" >&2
"$python" -m venv "$venv" >&2
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check --no-deps --only-binary=:all: \
  -r "$here/parser-requirements.txt" >&2
touch "$venv/.complete"
echo "$venv"
