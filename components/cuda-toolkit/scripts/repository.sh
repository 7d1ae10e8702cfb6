#!/usr/bin/env bash
# Point apt at NVIDIA's CUDA repository (or a mirror / the test host's local repository).
#   repository.sh <trust> <url> <distribution> <architecture> <keyring-url> [<keyring-sha256>]
# trust=keyring: install the cuda-keyring package (from <keyring-url>, checked against <keyring-sha256>
#   before dpkg -i; an https:// keyring without a pinned sha256 is refused, printing the one it got)
#   and sign the source with it;
# trust=trusted: a repository on the host (file://) marked [trusted=yes] (the simulated host).
# Only https:// and file:// URLs: over http:// anyone on the path could swap what runs as root.
# Idempotent: files are rewritten only when their content differs; prints changed=yes|no.
# Host paths are prefixed with GPUHOST_ROOT (empty on real hosts, a folder on the simulated one).
set -euo pipefail

trust="$1" url="$2" distribution="$3" architecture="$4" keyring_url="$5" keyring_sha256="${6:-}"
R="${GPUHOST_ROOT:-}"
keyring=/usr/share/keyrings/cuda-archive-keyring.gpg
list="/etc/apt/sources.list.d/cuda-${distribution}-${architecture}.list"
changed=no

for u in "$url" "$keyring_url"; do
  if [[ ! "$u" =~ ^(https|file):// ]]; then
    echo "repository.sh: refusing '$u': only https:// (or file:// on the host) repositories and keyrings" >&2
    exit 2
  fi
done

case "$trust" in
  keyring)
    if [[ "$(dpkg-query -W -f='${Status}' cuda-keyring 2>/dev/null || true)" != "install ok installed" ]]; then
      tmp="$(mktemp -d)"
      trap 'rm -rf "$tmp"' EXIT
      # --proto: no redirect may downgrade to http.
      if command -v curl >/dev/null; then curl -fsSL --proto '=https,file' -o "$tmp/cuda-keyring.deb" "$keyring_url"
      elif [[ "$keyring_url" == file://* ]]; then cp "${keyring_url#file://}" "$tmp/cuda-keyring.deb"
      else wget -q --https-only -O "$tmp/cuda-keyring.deb" "$keyring_url"; fi
      got="$(sha256sum "$tmp/cuda-keyring.deb" | cut -d' ' -f1)"
      if [[ -n "$keyring_sha256" && "$got" != "$keyring_sha256" ]]; then
        echo "repository.sh: the cuda-keyring .deb from $keyring_url has sha256 $got, but toolkit.repository.keyringSha256 pins $keyring_sha256: not installed" >&2
        exit 3
      fi
      if [[ -z "$keyring_sha256" && "$keyring_url" != file://* ]]; then
        echo "repository.sh: refusing to install the cuda-keyring .deb from $keyring_url without a pinned sha256. It downloaded with sha256 $got; after checking that against the vendor's, pin it: toolkit.repository.keyringSha256 = $got" >&2
        exit 3
      fi
      dpkg -i "$tmp/cuda-keyring.deb"
      changed=yes
    fi
    options="signed-by=${keyring}"
    ;;
  trusted)
    if [[ "$url" != file://* ]]; then
      echo "repository.sh: trusted=yes only for a file:// repository on the host, not '$url'" >&2
      exit 2
    fi
    options="trusted=yes"
    ;;
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
