#!/usr/bin/env bash
# Installs what the real-systemd test host (test/testhost) needs on a Debian CI machine:
# debootstrap builds the root filesystem, systemd-container boots it (systemd-nspawn),
# dpkg-dev indexes the stand-in apt repository (dpkg-scanpackages), apt-utils signs its Release
# (apt-ftparchive), gnupg makes the throwaway repository key, openssh-client talks to the host,
# zstd compresses the cached root filesystem and the CUDA .debs, python3-pip/wheel build the
# stand-in wheels and download NVIDIA's CUDA wheels, g++ is the host compiler NVIDIA's nvcc uses
# when `gpuhost doctor` compiles the proof program against the test host's files from here.
# Idempotent: it installs only what is missing, so a warm machine spends no time here.
set -euo pipefail

if [[ "$(id -u)" -ne 0 ]]; then
  echo "testhost-prereqs: must run as root (apt-get, debootstrap, systemd-nspawn need it)" >&2
  exit 1
fi

needed=(debootstrap systemd-container dpkg-dev apt-utils gnupg openssh-client zstd tar python3-pip g++)
missing=()
for pkg in "${needed[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q 'install ok installed'; then
    missing+=("$pkg")
  fi
done

if [[ ${#missing[@]} -eq 0 ]]; then
  echo "testhost-prereqs: all present (${needed[*]})"
  exit 0
fi

echo "testhost-prereqs: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}"
