#!/usr/bin/env bash
# Undo CudaToolkit (only when removeOnDestroy is set): remove the toolkit's packages, its
# /usr/local/cuda alternative and the apt source. Idempotent.
#   uninstall.sh <toolkit-root> <sources-list> <package>...
set -euo pipefail

root="$1" list="$2"
shift 2
R="${GPUHOST_ROOT:-}"
export DEBIAN_FRONTEND=noninteractive
installed=()
for pkg in "$@"; do
  if [[ "$(dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null || true)" == "install ok installed" ]]; then installed+=("$pkg"); fi
done
if ((${#installed[@]} > 0)); then apt-get remove -y -q -o Dpkg::Lock::Timeout=600 "${installed[@]}"; fi
if update-alternatives --query cuda >/dev/null 2>&1; then update-alternatives --remove cuda "$root"; fi
rm -f "${R}${list}"
