#!/usr/bin/env bash
# Installs SMG (SGLang's router) into its own venv, pinned and hash-locked (pip --require-hashes:
# a wheel that does not hash to a line of the requirements is refused), and the launcher beside it.
# Reinstalls only when the requirements changed, the venv holds another smg than they pin, or it
# does not import smg.
# Usage: install-router.sh VENV REQUIREMENTS_BASE64 LAUNCHER_BASE64 [--index-url URL] [--extra-index-url URL]...
set -euo pipefail

venv="$1"
reqs_b64="$2"
launcher_b64="$3"
shift 3
root="${GPUHOST_ROOT:-}"

# Only pip's two index options (the router schema checked the URLs): nothing else reaches pip.
pip_index=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --index-url | --extra-index-url)
      if [[ $# -lt 2 || ! "$2" =~ ^(https|file)://[^[:space:]\'\"]+$ ]]; then
        echo "install-router: refusing $1 '${2:-}'" >&2
        exit 2
      fi
      pip_index+=("$1" "$2")
      shift 2
      ;;
    *)
      echo "install-router: unknown argument '$1'" >&2
      exit 2
      ;;
  esac
done

if [[ ! "$venv" =~ ^/[A-Za-z0-9._/-]+$ || "$venv" == *..* ]]; then
  echo "install-router: refusing venv path '$venv'" >&2
  exit 2
fi
if [[ -z "$root" && $EUID -ne 0 ]]; then
  echo "$(basename "$0"): must run as root (hostScript runs it through sudo -n for other users)" >&2
  exit 2
fi
if ! python3 -c 'import ensurepip, venv' 2>/dev/null; then
  echo "install-router: python3 with its venv module is needed on the router's machine (Debian: apt-get install python3-venv)" >&2
  exit 1
fi

home="$root$(dirname "$venv")"
target="$root$venv"
mkdir -p "$home"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
printf '%s' "$reqs_b64" | base64 -d >"$tmp/requirements.txt"
printf '%s' "$launcher_b64" | base64 -d >"$tmp/launcher.py"

# The release the requirements pin, and the one the venv holds (another pip install there changes it).
want="$(sed -n 's/^smg==\([^ \\]*\).*/\1/p' "$tmp/requirements.txt" | head -n1)"
have="$("$target/bin/python" -c 'import importlib.metadata as m; print(m.version("smg"))' 2>/dev/null || true)"

changed=false
if ! cmp -s "$tmp/requirements.txt" "$home/requirements.txt" || [[ "$have" != "$want" ]] ||
  ! "$target/bin/python" -c 'import smg.smg_rs' 2>/dev/null; then
  rm -rf "$target" "$home/requirements.txt"
  python3 -m venv "$target"
  "$target/bin/pip" install --quiet --disable-pip-version-check --no-input --require-hashes --no-deps \
    "${pip_index[@]}" -r "$tmp/requirements.txt" >&2
  "$target/bin/python" -c 'import smg.smg_rs'
  install -m 0644 "$tmp/requirements.txt" "$home/requirements.txt"
  changed=true
fi
if ! cmp -s "$tmp/launcher.py" "$home/launcher.py"; then
  install -m 0644 "$tmp/launcher.py" "$home/launcher.py"
  changed=true
fi
echo "smgVersion=$("$target/bin/smg" --version 2>/dev/null | head -n1 | tr -d '\r')"
echo "changed=$changed"
