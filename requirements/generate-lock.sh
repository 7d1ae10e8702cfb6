#!/usr/bin/env bash
# Regenerates sglang-0.5.23.lock.txt: the hash lock of gpuhost's default serving pins (torch 2.14.1,
# sglang 0.5.23, flashinfer-python 0.7.2, ninja 1.13.2) and everything they pull in, for Linux x86_64
# and CPython 3.11 (Debian 12) and 3.12 (Ubuntu 24.04). pip resolves against the index pip is
# configured for and reads each file's sha256 from the index's listing (pip's --report; nothing is
# installed). Needs pip >= 23. For a labelled torch build from another index, set PIP_EXTRA_INDEX_URL
# and TORCH (e.g. TORCH=2.14.1+cu130).
# One CUDA release: every NVIDIA wheel versioned by the CUDA release is constrained (pip -c) to the
# toolkit's line, read from components/cuda-catalog/cuda.yaml (`serving`, `cudaWheels`); without it
# an unbounded requirement (humming-kernels[cu13]: nvidia-cuda-nvcc) takes the newest CUDA. Needs
# PyYAML. About 2 to 5 minutes per Python version (pip resolves and reads the index; nothing installed).
# Usage: bash requirements/generate-lock.sh   (then review the diff: it is what your hosts install)
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
python="${PYTHON:-python3}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
cuda_yaml="$here/../components/cuda-catalog/cuda.yaml"
"$python" "$here/lock_from_reports.py" constraints "$cuda_yaml" >"$work/cuda-constraints.txt"

# pip matches a wheel's platform tag exactly: name every manylinux level a host of glibc 2.34+ runs.
platforms=()
for minor in $(seq 34 -1 5); do platforms+=(--platform "manylinux_2_${minor}_x86_64"); done
platforms+=(--platform manylinux2014_x86_64 --platform manylinux2010_x86_64 --platform manylinux1_x86_64 --platform linux_x86_64)

reports=()
for version in 3.11 3.12; do
  "$python" -m pip install --quiet --disable-pip-version-check --dry-run --ignore-installed \
    --only-binary=:all: "${platforms[@]}" --python-version "$version" --implementation cp \
    --target "$work/target-$version" --report "$work/report-$version.json" \
    --constraint "$work/cuda-constraints.txt" \
    "torch==${TORCH:-2.14.1}" sglang==0.5.23 flashinfer-python==0.7.2 ninja==1.13.2
  reports+=("$work/report-$version.json")
done
"$python" "$here/lock_from_reports.py" lock "$here/lock-header.txt" "$cuda_yaml" "${reports[@]}" >"$work/lock.txt"
mv "$work/lock.txt" "$here/sglang-0.5.23.lock.txt"
echo "wrote $here/sglang-0.5.23.lock.txt ($(grep -c '^[a-z0-9]' "$here/sglang-0.5.23.lock.txt") packages)"
