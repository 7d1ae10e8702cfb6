#!/usr/bin/env bash
# Point apt at NVIDIA's CUDA repository (or a mirror / the test host's local repository).
#   repository.sh <trust> <url> <distribution> <architecture> <keyring-url>
# trust=keyring: install the cuda-keyring package (from <keyring-url>) and sign the source with it;
# trust=trusted: a local repository marked [trusted=yes] (the simulated and test hosts).
# Idempotent: files are rewritten only when their content differs; prints changed=yes|no.
# Host paths are prefixed with GPUHOST_ROOT (empty on real hosts, a folder on the simulated one).
set -euo pipefail

trust="$1" url="$2" distribution="$3" architecture="$4" keyring_url="$5"
R="${GPUHOST_ROOT:-}"
keyring=/usr/share/keyrings/cuda-archive-keyring.gpg
list="/etc/apt/sources.list.d/cuda-${distribution}-${architecture}.list"
changed=no

case "$trust" in
  keyring)
    if [[ "$(dpkg-query -W -f='${Status}' cuda-keyring 2>/dev/null || true)" != "install ok installed" ]]; then
      tmp="$(mktemp -d)"
      trap 'rm -rf "$tmp"' EXIT
      if command -v curl >/dev/null; then curl -fsSL -o "$tmp/cuda-keyring.deb" "$keyring_url"
      else wget -q -O "$tmp/cuda-keyring.deb" "$keyring_url"; fi
      dpkg -i "$tmp/cuda-keyring.deb"
      changed=yes
    fi
    options="signed-by=${keyring}"
    ;;
  trusted) options="trusted=yes" ;;
  *) echo "repository.sh: trust must be keyring or trusted, not '$trust'" >&2; exit 2 ;;
esac

want="deb [${options}] ${url} /"
if [[ "$(cat "${R}${list}" 2>/dev/null || true)" != "$want" ]]; then
  mkdir -p "${R}/etc/apt/sources.list.d"
  printf '%s\n' "$want" >"${R}${list}.new"
  mv "${R}${list}.new" "${R}${list}"
  changed=yes
fi
echo "sources_list=${list}"
echo "changed=${changed}"
