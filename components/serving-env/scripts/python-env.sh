#!/usr/bin/env bash
# Creates the serving stack's Python virtual environment with the pinned packages, checks that
# torch was built for the installed toolkit, and records the environment lock. Idempotent: when the
# recorded lock matches, nothing is installed again; the lock is written last, so an install that
# was interrupted (a dropped SSH session) is simply redone by the next run.
# Usage: python-env.sh VENV PYTHON TOOLKIT_VERSION LOCK [--index-url URL] [--extra-index-url URL]...
#          [--require-hashes] -- REQUIREMENT...
# --require-hashes: standard input is a requirements file with --hash=sha256 for every package, and pip
# installs exactly that file with --require-hashes (a wheel whose hash differs is refused). Indexes
# are https:// or file:// only.
#
# Simulated host (GPUHOST_ROOT set): nothing is downloaded. The simulated server is the SGLang
# simulator, which needs no Python; the venv folder holds only the recorded lock, marked
# platform=simulated, and torch's CUDA version is read from the pinned build's local label
# (+cu130 -> 13.0) instead of from an installed torch. That check runs on every platform first.
set -euo pipefail

venv="$1"
python="$2"
toolkit="$3"
lock="$4"
shift 4
pip_index=()
require_hashes=no
while [[ $# -gt 0 && "$1" != "--" ]]; do
  case "$1" in
    --index-url | --extra-index-url)
      if [[ ! "${2:-}" =~ ^(https|file):// ]]; then
        echo "python-env: refusing index '${2:-}': only https:// (or file:// on the host)" >&2
        exit 2
      fi
      pip_index+=("$1" "$2"); shift 2 ;;
    --require-hashes) require_hashes=yes; shift ;;
    *) echo "python-env: unknown option '$1'" >&2; exit 2 ;;
  esac
done
if [[ $# -eq 0 ]]; then echo "python-env: missing '--' before the requirements" >&2; exit 2; fi
shift
requirements=("$@")
root="${GPUHOST_ROOT:-}"

if [[ ! "$venv" =~ ^/[A-Za-z0-9._+@/-]*$ ]]; then
  echo "python-env: refusing venv path '$venv'" >&2
  exit 2
fi
if [[ ! "$lock" =~ ^sha256:[0-9a-f]{64}$ ]]; then
  echo "python-env: refusing lock '$lock'" >&2
  exit 2
fi

# torch's CUDA build, from its pin: torch==2.14.1+cu130 -> 13.0.
torch_pin=""
for r in "${requirements[@]}"; do
  case "$r" in torch==*) torch_pin="${r#torch==}" ;; esac
done
if [[ ! "$torch_pin" =~ \+cu([0-9]+)([0-9])$ ]]; then
  echo "python-env: torch must be pinned to a CUDA build (torch==X+cuNNN), got '${torch_pin:-none}'" >&2
  exit 3
fi
pinned_cuda="${BASH_REMATCH[1]}.${BASH_REMATCH[2]}"
if [[ "$pinned_cuda" != "$toolkit" ]]; then
  echo "python-env: torch $torch_pin is built for CUDA $pinned_cuda but the toolkit is $toolkit" >&2
  exit 3
fi

lockfile="$root$venv/gpuhost-env.lock"
record() {
  printf 'lock=%s\nplatform=%s\ntoolkit=%s\ntorch_cuda=%s\n' "$lock" "$1" "$toolkit" "$2"
  printf 'requirement=%s\n' "${requirements[@]}"
}

if [[ -f "$lockfile" ]] && grep -qx "lock=$lock" "$lockfile"; then
  echo "changed=false"
  grep -E '^(lock|platform|torch_cuda)=' "$lockfile"
  exit 0
fi

if [[ -n "$root" ]]; then
  mkdir -p "$root$venv"
  record simulated "$pinned_cuda" >"$lockfile.tmp"
  mv "$lockfile.tmp" "$lockfile"
  echo "changed=true"
  grep -E '^(lock|platform|torch_cuda)=' "$lockfile"
  exit 0
fi

if [[ $EUID -ne 0 ]]; then
  echo "$(basename "$0"): must run as root (hostScript runs it through sudo -n for other users)" >&2
  exit 2
fi

if [[ ! -x "$venv/bin/python3" ]]; then
  "$python" -m venv "$venv"
elif ! "$venv/bin/python3" -m pip --version >/dev/null 2>&1; then
  # A venv whose pip does not start: a run interrupted while venv's ensurepip (or pip upgrading
  # itself) wrote it. It would fail every later run, so it is made anew (the lock is written last:
  # nothing recorded is lost).
  echo "python-env: the venv's pip does not start (an interrupted install?): recreating $venv" >&2
  "$python" -m venv --clear "$venv"
fi
if [[ "$require_hashes" == yes ]]; then
  hash_lock="$(mktemp)"
  trap 'rm -f "$hash_lock"' EXIT
  cat >"$hash_lock"
  "$venv/bin/python3" -m pip install --disable-pip-version-check --no-input \
    "${pip_index[@]}" --require-hashes -r "$hash_lock"
else
  "$venv/bin/python3" -m pip install --disable-pip-version-check --no-input \
    "${pip_index[@]}" "${requirements[@]}"
fi

# The installed torch, not the pin, is what the server loads.
torch_cuda="$("$venv/bin/python3" -c 'import torch; print(torch.version.cuda or "none")')"
if [[ "$torch_cuda" != "$toolkit" ]]; then
  echo "python-env: the installed torch reports CUDA $torch_cuda, the toolkit is $toolkit" >&2
  exit 3
fi

record real "$torch_cuda" >"$lockfile.tmp"
mv "$lockfile.tmp" "$lockfile"
echo "changed=true"
grep -E '^(lock|platform|torch_cuda)=' "$lockfile"
