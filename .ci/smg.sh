#!/usr/bin/env bash
# The real SMG router for the fleet tests: a venv with smg installed from PyPI with --require-hashes
# (components/router/requirements.txt), built once per machine under the cache and reused while the
# requirements file is unchanged. Prints the venv's folder. Needs python3 with its venv module.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CACHE_ROOT="${GPUHOST_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/gpuhost}"
reqs="$ROOT/components/router/requirements.txt"
dest="$CACHE_ROOT/smg/$(sha256sum "$reqs" | cut -c1-16)"
mkdir -p "$CACHE_ROOT/smg"
# Two test runs starting at once build it once.
exec 9>"$CACHE_ROOT/smg/.lock"
flock 9
if [[ -x "$dest/venv/bin/python" && -f "$dest/ok" ]]; then
  echo "$dest/venv"
  exit 0
fi
if ! python3 -c 'import ensurepip, venv' 2>/dev/null; then
  echo "smg: python3 with its venv module is needed (Debian: apt-get install python3-venv)" >&2
  exit 1
fi
echo "smg: installing smg into $dest (first run only)" >&2
# A venv's scripts name its folder, so it is built where it stays; "ok" marks it finished.
rm -rf "$dest"
python3 -m venv "$dest/venv"
"$dest/venv/bin/pip" install --quiet --disable-pip-version-check --require-hashes --no-deps -r "$reqs" >&2
"$dest/venv/bin/python" -c 'import smg.smg_rs' >&2
touch "$dest/ok"
echo "$dest/venv"
