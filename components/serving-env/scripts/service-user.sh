#!/usr/bin/env bash
# Creates the system user the SGLang services run as, unless it exists. Idempotent.
# Usage: service-user.sh USER HOME
# Simulated host (GPUHOST_ROOT set): the account is a line in the simulated root's /etc/passwd,
# since creating real accounts needs root and the simulated services run as the invoking user.
set -euo pipefail

user="$1"
home="$2"
root="${GPUHOST_ROOT:-}"

if [[ ! "$user" =~ ^[a-z_][a-z0-9_-]{0,31}$ ]]; then
  echo "service-user: refusing user name '$user' (lowercase letters, digits, '_' or '-' only)" >&2
  exit 2
fi
if [[ ! "$home" =~ ^/[A-Za-z0-9._+@/-]*$ ]]; then
  echo "service-user: refusing home '$home' (absolute path of letters, digits and ._+@-/ only)" >&2
  exit 2
fi

if [[ -n "$root" ]]; then
  mkdir -p "$root/etc" "$root$home"
  touch "$root/etc/passwd"
  if ! grep -q "^${user}:" "$root/etc/passwd"; then
    printf '%s:x:999:999:gpuhost service user:%s:/usr/sbin/nologin\n' "$user" "$home" >>"$root/etc/passwd"
    echo "changed=true"
  else
    echo "changed=false"
  fi
  exit 0
fi

if [[ $EUID -ne 0 ]]; then
  echo "$(basename "$0"): must run as root (hostScript runs it through sudo -n for other users)" >&2
  exit 2
fi

changed=false
if ! getent passwd "$user" >/dev/null; then
  useradd --system --user-group --home-dir "$home" --shell /usr/sbin/nologin "$user"
  changed=true
fi
install -d -o "$user" -g "$user" -m 0750 "$home"
echo "changed=$changed"
