#!/usr/bin/env bash
# Reinstall packages whose files were changed on the host (a header replaced by hand, a 12.8 file
# copied over a 13.0 one). apt restores the content of a file that is present only with
# --reinstall, and CudaToolkit's install step only checks that required files exist, so this is
# ToolkitState's own repair for a changed file (its drift names the owning package).
# Re-runnable: an interrupted dpkg run is finished first; what dpkg alone cannot finish (a package
# half-unpacked, a dependency never unpacked) apt-get's -f completes in the same run.
# Usage: reinstall-packages.sh PACKAGE...
set -euo pipefail

if [[ $# -eq 0 ]]; then
  echo "reinstall-packages: no package given" >&2
  exit 2
fi
for pkg in "$@"; do
  if [[ ! $pkg =~ ^[a-z0-9][a-z0-9.+-]+$ ]]; then
    echo "reinstall-packages: refusing package name '$pkg'" >&2
    exit 2
  fi
done
if [[ -z ${GPUHOST_ROOT:-} && $EUID -ne 0 ]]; then
  echo "reinstall-packages: must run as root (execOnHost runs it through sudo -n for other users)" >&2
  exit 2
fi

export DEBIAN_FRONTEND=noninteractive
dpkg --configure -a || echo "reinstall-packages: dpkg could not finish an interrupted install; apt-get -f completes it" >&2
apt-get install -y -q -o Dpkg::Lock::Timeout=600 -o Dpkg::Options::=--force-confold --no-install-recommends -f --reinstall "$@"
echo "reinstalled=$*"
