#!/usr/bin/env bash
# Puts the serving venv's CUDA wheels back to the hash lock: ToolkitState's repair of `venv.wheels.`
# drift (a wheel of another CUDA release put there by hand, components/drift/drift.ts). Every nvidia-*
# and cuda-* wheel pip recorded in the venv at another version than the lock's is installed again at
# the lock's version, by its sha256 (pip --require-hashes --no-deps); every one the lock does not list
# is uninstalled. Idempotent: a venv that matches changes nothing.
# Usage: venv-wheels.sh VENV [--index-url URL] [--extra-index-url URL]... -- NAME==VERSION SHA256[,SHA256]...
# Simulated host (GPUHOST_ROOT set): the venv holds pip's records only (python-env.sh installs nothing
# there); they are rewritten the same way.
set -euo pipefail

venv="$1"
shift
pip_index=()
while [[ $# -gt 0 && "$1" != "--" ]]; do
  case "$1" in
    --index-url | --extra-index-url)
      if [[ ! "${2:-}" =~ ^(https|file):// ]]; then
        echo "venv-wheels: refusing index '${2:-}': only https:// (or file:// on the host)" >&2
        exit 2
      fi
      pip_index+=("$1" "$2"); shift 2 ;;
    *) echo "venv-wheels: unknown option '$1'" >&2; exit 2 ;;
  esac
done
[[ $# -gt 0 ]] && shift
if [[ ! "$venv" =~ ^/[A-Za-z0-9._+@/-]*$ ]]; then
  echo "venv-wheels: refusing venv path '$venv'" >&2
  exit 2
fi
declare -A locked=() hashes=()
while (($# >= 2)); do
  if [[ ! "$1" =~ ^[a-z0-9][a-z0-9-]*==[0-9A-Za-z.+!]+$ || ! "$2" =~ ^[0-9a-f]{64}(,[0-9a-f]{64})*$ ]]; then
    echo "venv-wheels: refusing pin '$1' '$2'" >&2
    exit 2
  fi
  locked["${1%%==*}"]="${1#*==}"
  hashes["${1%%==*}"]="$2"
  shift 2
done

root="${GPUHOST_ROOT:-}"
site="$(compgen -G "${root}${venv}/lib/python3*/site-packages" | head -1 || true)"
if [[ -z "$site" ]]; then
  echo "changed=no"
  exit 0
fi
reinstall=() remove=()
for info in "$site"/nvidia_*.dist-info "$site"/cuda_*.dist-info; do
  [[ -d "$info" ]] || continue
  base="${info##*/}"
  base="${base%.dist-info}"
  name="${base%-*}"
  name="${name,,}"
  name="${name//[_.]/-}"
  if [[ -z "${locked[$name]:-}" ]]; then remove+=("$name")
  elif [[ "${locked[$name]}" != "${base##*-}" ]]; then reinstall+=("$name"); fi
done
if ((${#remove[@]} + ${#reinstall[@]} == 0)); then
  echo "changed=no"
  exit 0
fi

if [[ -n "$root" ]]; then
  for name in "${remove[@]}" "${reinstall[@]}"; do rm -rf "$site/${name//-/_}"-*.dist-info; done
  for name in "${reinstall[@]}"; do mkdir -p "$site/${name//-/_}-${locked[$name]}.dist-info"; done
else
  if [[ $EUID -ne 0 ]]; then
    echo "$(basename "$0"): must run as root (hostScript runs it through sudo -n for other users)" >&2
    exit 2
  fi
  if ((${#remove[@]} > 0)); then
    "$venv/bin/python3" -m pip uninstall --disable-pip-version-check --no-input -y "${remove[@]}"
  fi
  if ((${#reinstall[@]} > 0)); then
    req="$(mktemp)"
    trap 'rm -f "$req"' EXIT
    for name in "${reinstall[@]}"; do
      printf '%s==%s' "$name" "${locked[$name]}"
      IFS=, read -r -a digests <<<"${hashes[$name]}"
      printf ' --hash=sha256:%s' "${digests[@]}"
      printf '\n'
    done >"$req"
    "$venv/bin/python3" -m pip install --disable-pip-version-check --no-input "${pip_index[@]}" \
      --no-deps --require-hashes -r "$req"
  fi
fi
echo "changed=yes"
echo "removed=$(IFS=,; echo "${remove[*]}")"
echo "reinstalled=$(IFS=,; echo "${reinstall[*]}")"
