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
while read -r name s1 s2 s3; do
  [[ "$s1 $s2 $s3" == "install ok installed" ]] && installed+=("$name")
done < <(dpkg-query -W -f='${Package} ${Status}\n' "$@" 2>/dev/null || true)
if ((${#installed[@]} > 0)); then apt-get remove -y -q -o Dpkg::Lock::Timeout=600 "${installed[@]}"; fi
if update-alternatives --query cuda >/dev/null 2>&1; then update-alternatives --remove cuda "$root"; fi
rm -f "${R}${list}"
