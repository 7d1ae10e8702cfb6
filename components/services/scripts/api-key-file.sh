#!/usr/bin/env bash
# Writes the API key file, root-only (0600), as SGLang config (`api-key: "..."`): the unit hands it to
# the service with LoadCredential= (systemd, as root, copies it into a folder only the service user
# can read) and SGLang reads it with --config, so the key is never in a process's argv. The key
# arrives on standard input (hostScript's `stdin`), never in an argument or the environment, which
# any user of the host can read from the process list while the script runs.
# Usage: api-key-file.sh PATH <<<"$key"
#        api-key-file.sh --check PATH [COPY] <<<"$key"   prints state=match|differs|missing, writes nothing
#        (the drift probe: the comparison happens here, so no hash of the key is recorded anywhere);
#        with COPY (systemd's copy of the credential, /run/credentials/UNIT/ID, taken when the unit
#        started) also running=match|differs|unknown: the key the running service has, which stays
#        the old one after the file is rewritten until the unit restarts; unknown: no copy (not running)
set -euo pipefail

check=no
if [[ "${1:-}" == "--check" ]]; then
  check=yes
  shift
fi
path="$1"
copy="${2:-}"
root="${GPUHOST_ROOT:-}"
key=""
IFS= read -r key || true

for p in "$path" ${copy:+"$copy"}; do
  if [[ ! "$p" =~ ^/[A-Za-z0-9._+@/-]*$ ]]; then
    echo "api-key-file: refusing path '$p'" >&2
    exit 2
  fi
done
# Restricted so the YAML double-quoted scalar needs no escaping.
if [[ ! "$key" =~ ^[A-Za-z0-9._~+/=-]+$ ]]; then
  echo "api-key-file: the key on standard input must be letters, digits and ._~+/=- only" >&2
  exit 2
fi
content() {
  printf '# written by gpuhost (api-key-file.sh): SGLang --config, read through LoadCredential=\napi-key: "%s"\n' "$key"
}
target="$root$path"
# The file as written: this content, mode 0600.
current() {
  [[ -f "$target" && "$(stat -c '%a' "$target")" == 600 ]] && cmp -s <(content) "$target"
}
if [[ "$check" == yes ]]; then
  if [[ ! -f "$target" ]]; then echo "state=missing"
  elif current; then echo "state=match"
  else echo "state=differs"; fi
  if [[ -n "$copy" ]]; then
    # systemd makes the copy read-only (0400): only the content is compared.
    if [[ ! -f "$root$copy" ]]; then echo "running=unknown"
    elif cmp -s <(content) "$root$copy"; then echo "running=match"
    else echo "running=differs"; fi
  fi
  exit 0
fi
if [[ -z "$root" && $EUID -ne 0 ]]; then
  echo "api-key-file: must run as root (hostScript runs it through sudo -n for other users)" >&2
  exit 2
fi

if current; then
  echo "changed=false"
  exit 0
fi
mkdir -p "$(dirname "$target")"
umask 077
tmp="$(mktemp "$(dirname "$target")/.gpuhost-env.XXXXXX")"
trap 'rm -f "$tmp"' EXIT
content >"$tmp"
chmod 0600 "$tmp"
mv "$tmp" "$target"
# Before the key moved to --config, gpuhost kept it as an EnvironmentFile here: no copy stays behind.
rm -f "$root/etc/gpuhost/sglang-api-key.env"
echo "changed=true"
