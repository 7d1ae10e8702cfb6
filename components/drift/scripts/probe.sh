#!/usr/bin/env bash
# Probe what the CUDA toolkit on this host really is, and print it as ONE JSON document on stdout.
#
# Read-only: it changes nothing. It is sent whole in one exec (one SSH round trip), so it has no
# dependencies beyond bash, coreutils, readlink and the tools it probes; no jq on the host.
# Every host path is prefixed with "${GPUHOST_ROOT:-}", so the same script probes the simulated
# host (a folder standing for /) and a real one (empty prefix).
#
# Usage: probe.sh --cuda-home DIR [--path PATH] [--package-suffix 13-0] [--jit-base DIR]
#                 [--file PATH]... [--unit PATH]... [--venv DIR]
#   --cuda-home       CUDA_HOME as the units set it; nvcc is looked up in DIR/bin
#   --path            PATH as the units set it (default: this shell's PATH) for `which nvcc`
#   --package-suffix  version suffix of the packages to list: cuda-*-SUFFIX and lib*-SUFFIX
#                     (lib*-dev-SUFFIX and the runtime libraries they depend on)
#   --jit-base        FLASHINFER_WORKSPACE_BASE's parent: its sub-directory names are the JIT cache keys
#   --file            a file the toolkit must provide (from the toolkit description); repeatable
#   --unit            a rendered systemd unit file; repeatable
#   --venv            the serving venv: its NVIDIA CUDA wheels (pip's dist-info folders) are listed
set -euo pipefail
export LC_ALL=C

ROOT=${GPUHOST_ROOT:-}
ROOT=${ROOT%/}
cuda_home=""
unit_path=${PATH}
package_suffix="13-0"
jit_base=""
venv=""
files=()
units=()

while [[ $# -gt 0 ]]; do
  case $1 in
    --cuda-home) cuda_home=$2; shift 2 ;;
    --path) unit_path=$2; shift 2 ;;
    --package-suffix) package_suffix=$2; shift 2 ;;
    --jit-base) jit_base=$2; shift 2 ;;
    --file) files+=("$2"); shift 2 ;;
    --unit) units+=("$2"); shift 2 ;;
    --venv) venv=$2; shift 2 ;;
    *) echo "probe.sh: unknown argument: $1" >&2; exit 64 ;;
  esac
done
if [[ -z $cuda_home ]]; then
  echo "probe.sh: --cuda-home is required" >&2
  exit 64
fi

errors=()

# JSON string of $1 in REPLY (no subshell: the probe must stay fast).
json_str() {
  local s=$1
  s=${s//\\/\\\\}
  s=${s//\"/\\\"}
  s=${s//$'\n'/\\n}
  s=${s//$'\r'/\\r}
  s=${s//$'\t'/\\t}
  s=${s//[$'\001'-$'\037']/}
  REPLY="\"$s\""
}

# JSON string of $1, or null when empty, in REPLY.
json_str_or_null() {
  if [[ -z $1 ]]; then REPLY=null; else json_str "$1"; fi
}

# Resolve a host path component by component, following symlinks inside ROOT (a link in the
# simulated folder may point at "/etc/alternatives/cuda", which means ROOT/etc/alternatives/cuda).
# REPLY: the resolved host path (without ROOT); components need not exist.
resolve() {
  local rest=${1#/} cur="" comp target hops=0
  while [[ -n $rest ]]; do
    comp=${rest%%/*}
    if [[ $rest == */* ]]; then rest=${rest#*/}; else rest=""; fi
    case $comp in
      "" | .) continue ;;
      ..) cur=${cur%/*}; continue ;;
    esac
    if [[ -L "$ROOT$cur/$comp" ]]; then
      hops=$((hops + 1))
      if ((hops > 40)); then REPLY=""; return 0; fi
      target=$(readlink -- "$ROOT$cur/$comp")
      if [[ -n $ROOT && $target == "$ROOT"/* ]]; then target=${target#"$ROOT"}; fi
      if [[ $target == /* ]]; then cur=""; fi
      target=${target#/}
      rest="${target}${rest:+/$rest}"
    else
      cur="$cur/$comp"
    fi
  done
  REPLY=${cur:-/}
}

# "release 13.0, V13.0.88" -> 13.0 in REPLY; empty when nvcc is missing or does not run.
nvcc_release() {
  local out exe
  resolve "$1"
  exe=$REPLY
  REPLY=""
  if [[ -n $exe && -x "$ROOT$exe" && ! -d "$ROOT$exe" ]]; then
    if out=$("$ROOT$exe" --version 2>&1); then
      if [[ $out =~ release\ ([0-9]+\.[0-9]+) ]]; then REPLY=${BASH_REMATCH[1]}; fi
    else
      errors+=("$1 --version failed")
    fi
  fi
}

# nvcc as FlashInfer finds it first: CUDA_HOME/bin/nvcc.
home_nvcc="${cuda_home%/}/bin/nvcc"
nvcc_release "$home_nvcc"
home_version=$REPLY
resolve "$home_nvcc"
if [[ -z $REPLY || ! -e "$ROOT$REPLY" ]]; then home_nvcc=""; fi

# nvcc as `which nvcc` finds it with the PATH the units set.
path_nvcc=""
IFS=: read -r -a path_dirs <<<"$unit_path"
for dir in "${path_dirs[@]}"; do
  [[ -n $dir ]] || continue
  resolve "${dir%/}/nvcc"
  if [[ -n $REPLY && -x "$ROOT$REPLY" && ! -d "$ROOT$REPLY" ]]; then
    path_nvcc="${dir%/}/nvcc"
    break
  fi
done
path_version=""
if [[ -n $path_nvcc ]]; then
  nvcc_release "$path_nvcc"
  path_version=$REPLY
fi

# /usr/local/cuda: update-alternatives' link chain, fully resolved.
cuda_link=""
if [[ -L "$ROOT/usr/local/cuda" || -e "$ROOT/usr/local/cuda" ]]; then
  resolve /usr/local/cuda
  cuda_link=$REPLY
fi

# Installed packages of this toolkit version: one dpkg-query for all of them.
packages_json=""
pkg_out=$(dpkg-query -W -f='${Package}\t${Version}\t${Status}\n' \
  "cuda-*-${package_suffix}" "lib*-${package_suffix}" 2>/dev/null || true)
while IFS=$'\t' read -r pkg version status; do
  [[ -n $pkg ]] || continue
  # "deinstall ok config-files" is a removed package that left its conffiles behind.
  [[ $status == *" installed" ]] || continue
  json_str "$pkg"; key=$REPLY
  json_str "$version"
  packages_json+="${packages_json:+,}$key:$REPLY"
done <<<"$pkg_out"

# SHA-256 of stdin, as hex. OpenSSL's uses the CPU's SHA extensions where it has them: a quarter of
# sha256sum's CPU (0.34 against 1.33 s for a 420 MB library), and every refresh hashes the toolkit's
# libraries, hundreds of MB each. The same digest: sha256sum where openssl is missing or answers
# anything but the digest of nothing.
if [[ $(openssl dgst -sha256 -r </dev/null 2>/dev/null) == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855 "* ]]; then
  sha256_stdin() { openssl dgst -sha256 -r; }
else
  sha256_stdin() { sha256sum; }
fi

# Hash every required file and every unit file. Content is fed on stdin, so no file name is
# ever parsed back from the hasher's output (sha256sum escapes names holding backslashes or newlines).
declare -A sha=()
declare -A resolved=()
for f in "${files[@]}" "${units[@]}"; do
  resolve "$f"
  resolved[$f]=$REPLY
  if [[ -n $REPLY && -f "$ROOT$REPLY" && -z ${sha[$ROOT$REPLY]:-} ]]; then
    if read -r hash _ < <(sha256_stdin <"$ROOT$REPLY" 2>/dev/null); then sha[$ROOT$REPLY]=$hash; fi
  fi
done
file_hash() { # REPLY: JSON of the sha256 of host path $1, null when absent
  local r=${resolved[$1]:-}
  if [[ -n $r && -n ${sha[$ROOT$r]:-} ]]; then REPLY="\"${sha[$ROOT$r]}\""; else REPLY=null; fi
}

files_json=""
for f in "${files[@]}"; do
  json_str "$f"; key=$REPLY
  file_hash "$f"
  files_json+="${files_json:+,}$key:$REPLY"
done

# GPUs: only where nvidia-smi exists (CPU-only and simulated hosts have none).
gpu_json='{"nvidiaSmi":false,"driverVersion":null,"computeCapabilities":[]}'
if command -v nvidia-smi >/dev/null 2>&1; then
  driver=""
  caps_json=""
  if smi_out=$(nvidia-smi --query-gpu=driver_version,compute_cap --format=csv,noheader 2>&1); then
    while IFS=, read -r drv cap; do
      drv=${drv// /}
      cap=${cap// /}
      [[ -n $drv ]] || continue
      driver=$drv
      json_str "$cap"
      caps_json+="${caps_json:+,}$REPLY"
    done <<<"$smi_out"
  else
    errors+=("nvidia-smi failed: ${smi_out%%$'\n'*}")
  fi
  json_str_or_null "$driver"
  gpu_json="{\"nvidiaSmi\":true,\"driverVersion\":$REPLY,\"computeCapabilities\":[$caps_json]}"
fi

# FlashInfer JIT cache: the key is the directory name under the configured base.
jit_json='{"base":null,"keys":[]}'
if [[ -n $jit_base ]]; then
  keys_json=""
  resolve "$jit_base"
  if [[ -d "$ROOT$REPLY" ]]; then
    for entry in "$ROOT$REPLY"/*; do
      [[ -d $entry ]] || continue
      json_str "${entry##*/}"
      keys_json+="${keys_json:+,}$REPLY"
    done
  fi
  json_str "$jit_base"
  jit_json="{\"base\":$REPLY,\"keys\":[$keys_json]}"
fi

# The venv's NVIDIA CUDA wheels, as pip records them (name-version.dist-info): a `pip install` by hand
# that put another CUDA release's wheel there is drift (drift.ts judges it against the toolkit).
wheels_json=""
if [[ -n $venv ]]; then
  resolve "$venv"
  for info in "$ROOT$REPLY"/lib/python3*/site-packages/nvidia_*.dist-info "$ROOT$REPLY"/lib/python3*/site-packages/cuda_*.dist-info; do
    [[ -d $info ]] || continue
    base=${info##*/}
    base=${base%.dist-info}
    json_str "${base%-*}"; key=$REPLY
    json_str "${base##*-}"
    wheels_json+="${wheels_json:+,}$key:$REPLY"
  done
fi

# systemctl's answer to $1 (is-enabled, is-active) for each further argument, in order, in the
# array `answers`. One call asks for all units: each systemctl start costs (on the simulated host, a
# Node process), and the probe runs on every refresh. Both print a line a unit, except is-enabled for
# a unit file that is gone (nothing, or the call stops there): when the count of lines is not the
# count of units, each unit is asked alone. Their exit status is not the answer (non-zero for
# "disabled"/"inactive"); their output is.
systemctl_each() {
  local sub=$1 n a
  shift
  answers=()
  (($#)) || return 0
  mapfile -t answers < <(systemctl "$sub" "$@" 2>/dev/null || true)
  if ((${#answers[@]} != $#)); then
    answers=()
    for n in "$@"; do
      a=$(systemctl "$sub" "$n" 2>/dev/null || true)
      answers+=("${a%%$'\n'*}")
    done
  fi
}

# Units: content hash, and what systemd says about each.
names=()
for u in "${units[@]}"; do names+=("${u##*/}"); done
systemctl_each is-enabled "${names[@]}"
enabled_of=("${answers[@]}")
systemctl_each is-active "${names[@]}"
active_of=("${answers[@]}")
units_json=""
i=0
for u in "${units[@]}"; do
  name=${u##*/}
  enabled=${enabled_of[i]}
  active=${active_of[i]}
  i=$((i + 1))
  json_str "$u"; key=$REPLY
  file_hash "$u"; hash=$REPLY
  json_str "$name"; name_json=$REPLY
  json_str "$enabled"; enabled_json=$REPLY
  json_str "$active"; active_json=$REPLY
  units_json+="${units_json:+,}$key:{\"name\":$name_json,\"sha256\":$hash,\"enabled\":$enabled_json,\"active\":$active_json}"
done

errors_json=""
for e in "${errors[@]}"; do
  json_str "$e"
  errors_json+="${errors_json:+,}$REPLY"
done

json_str "$cuda_home"; cuda_home_json=$REPLY
json_str_or_null "$home_nvcc"; home_nvcc_json=$REPLY
json_str_or_null "$home_version"; home_version_json=$REPLY
json_str_or_null "$path_nvcc"; path_nvcc_json=$REPLY
json_str_or_null "$path_version"; path_version_json=$REPLY
json_str_or_null "$cuda_link"; cuda_link_json=$REPLY

printf '{"probeFormat":1,"cudaHome":{"dir":%s,"nvcc":%s,"version":%s},"pathNvcc":{"nvcc":%s,"version":%s},"cudaLink":%s,"packages":{%s},"files":{%s},"gpu":%s,"jit":%s,"units":{%s},"venvWheels":{%s},"errors":[%s]}\n' \
  "$cuda_home_json" "$home_nvcc_json" "$home_version_json" "$path_nvcc_json" "$path_version_json" \
  "$cuda_link_json" "$packages_json" "$files_json" "$gpu_json" "$jit_json" "$units_json" "$wheels_json" "$errors_json"
