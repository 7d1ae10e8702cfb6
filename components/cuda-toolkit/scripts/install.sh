#!/usr/bin/env bash
# Install the FULL toolkit meta package (cuda-toolkit-13-0, never the nvcc-only subset) and pin
# /usr/local/cuda to it with update-alternatives.
#   install.sh <meta-package> <toolkit-root> <alternatives-priority> [<required-path>:<package> ...]
# Re-runnable from any point: a previous run cut off mid-install (a dropped SSH session) is
# repaired by `dpkg --configure -a`, and a required file deleted by hand is restored by
# reinstalling the package that provides it. A second run changes nothing; prints changed=yes|no.
set -euo pipefail

meta="$1" root="$2" priority="$3"
shift 3
R="${GPUHOST_ROOT:-}"
export DEBIAN_FRONTEND=noninteractive
apt_opts=(-y -q -o Dpkg::Lock::Timeout=600 -o Dpkg::Options::=--force-confold --no-install-recommends)
changed=no

# A run cut off mid-install leaves packages unpacked but unconfigured: `dpkg --configure -a` finishes
# them, unless one depends on a package the cut-off run never unpacked. Then dpkg alone cannot, and
# `apt-get install -f` fetches what is missing and configures the rest.
# A dpkg killed in the middle of unpacking one package leaves that package half-installed and
# flagged reinst-required: `dpkg --configure -a` skips it, and apt takes the version it records as
# present, so installing the meta package would configure its dependants against files that are not
# there (cuda-command-line-tools on a half-unpacked cuda-sanitizer). Those are reinstalled.
configured=yes
dpkg --configure -a || configured=no
mapfile -t half < <(dpkg-query -W -f='${db:Status-Abbrev}\t${Package}\n' 2>/dev/null |
  awk -F'\t' 'substr($1, 2, 1) == "H" || substr($1, 3, 1) == "R" { print $2 }' || true)
if [[ $configured == no || ${#half[@]} -gt 0 ]]; then
  echo "dpkg could not finish an interrupted install${half[*]:+ (half-installed: ${half[*]})}: completing it with apt-get install -f" >&2
  apt-get update -q -o Dpkg::Lock::Timeout=600
  fix=(-f)
  if ((${#half[@]} > 0)); then fix+=(--reinstall "${half[@]}"); fi
  apt-get install "${apt_opts[@]}" "${fix[@]}"
  changed=yes
fi

if [[ "$(dpkg-query -W -f='${Status}' "$meta" 2>/dev/null || true)" != "install ok installed" ]]; then
  apt-get update -q -o Dpkg::Lock::Timeout=600
  apt-get install "${apt_opts[@]}" "$meta"
  changed=yes
fi

# Files that must exist; a package whose file is gone is reinstalled.
reinstall=()
for pair in "$@"; do
  path="${pair%%:*}" pkg="${pair#*:}"
  if [[ ! -e "${R}${path}" ]]; then
    echo "missing ${path}: reinstalling ${pkg}" >&2
    reinstall+=("$pkg")
  fi
done
if ((${#reinstall[@]} > 0)); then
  mapfile -t reinstall < <(printf '%s\n' "${reinstall[@]}" | sort -u)
  apt-get install "${apt_opts[@]}" --reinstall "${reinstall[@]}"
  changed=yes
fi

# Pin /usr/local/cuda (through the `cuda` alternative) to this toolkit.
query="$(update-alternatives --query cuda 2>/dev/null || true)"
if ! grep -qx "Alternative: ${root}" <<<"$query"; then
  update-alternatives --install /usr/local/cuda cuda "$root" "$priority"
  changed=yes
  query="$(update-alternatives --query cuda)"
fi
if [[ "$(readlink -f "${R}/usr/local/cuda" || true)" != "$(readlink -f "${R}${root}")" ]] \
   || ! grep -qx 'Status: manual' <<<"$query"; then
  update-alternatives --set cuda "$root"
  changed=yes
fi
link="$(readlink -f "${R}/usr/local/cuda")"
echo "cuda_link=${link#"$R"}"
echo "changed=${changed}"
