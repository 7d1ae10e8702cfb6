#!/usr/bin/env bash
# On a machine with NVIDIA GPUs: gpuhost's toolkit check as CudaToolkit runs it on a host
# (components/cuda-toolkit/scripts/verify.sh: nvcc through CUDA_HOME, /usr/local/cuda, the GPUs'
# driver branch and compute capability, and the curand + cublas proof program compiled, linked and
# RUN), against the CUDA toolkit found there; and nvidia-smi's GPU, PCIe link and topology outputs
# recorded as they are, for the probe's parsers. Nothing is installed or changed.
#   bash ops/gpu-host-check.sh OUTDIR [CUDA_ROOT]
# CUDA_ROOT: default the first of /usr/local/cuda, /usr/local/cuda-*, the nvcc on PATH.
set -uo pipefail
out="${1:?usage: gpu-host-check.sh OUTDIR [CUDA_ROOT]}"
mkdir -p "$out"
here="$(cd "$(dirname "$0")/.." && pwd)"

{
  echo "## date"
  date -u
  echo "## nvidia-smi"
  timeout 60 nvidia-smi 2>&1
  echo "## gpus"
  timeout 60 nvidia-smi --format=csv \
    --query-gpu=index,name,driver_version,compute_cap,memory.total,pcie.link.gen.current,pcie.link.gen.max,pcie.link.width.current,pcie.link.width.max 2>&1
  echo "## topo"
  timeout 60 nvidia-smi topo -m 2>&1
  echo "## software"
  uname -r
  (command -v gcc && gcc --version | head -1) 2>&1
  (command -v node && node --version) 2>&1
  (command -v python3 && python3 -m pip list 2>/dev/null | grep -i -E '^(nvidia|torch|sglang|flashinfer)') 2>&1
} >"$out/nvidia-smi.txt"

# The PCIe fields the stack's verify step asks for (topology.ts PCIE_QUERY_FIELDS; a test holds them equal).
pcie_query="index,name,pcie.link.gen.current,pcie.link.gen.max,pcie.link.width.current,pcie.link.width.max"
root="${2:-}"
if [[ -z "$root" ]]; then
  for c in /usr/local/cuda /usr/local/cuda-*; do
    if [[ -x "$c/bin/nvcc" ]]; then
      root="$(readlink -f "$c")"
      break
    fi
  done
fi
if [[ -z "$root" ]] && command -v nvcc >/dev/null; then
  root="$(dirname "$(dirname "$(readlink -f "$(command -v nvcc)")")")"
fi

{
  echo "cuda_root=${root:-none}"
  if [[ -n "$root" ]]; then
    release="$("$root/bin/nvcc" --version | sed -n 's/.*release \([0-9][0-9.]*\),.*/\1/p')"
    echo "release=${release}"
    # The release found is the one checked: this records what the machine has, it pins nothing.
    timeout 600 bash "$here/components/cuda-toolkit/scripts/verify.sh" \
      --release "$release" --root "$root" --min-driver-branch 580 --proof 1 \
      --proof-b64 "$(base64 -w0 "$here/components/cuda-toolkit/proof/curand_cublas.cu")" \
      --pcie-query "$pcie_query" \
      --p2p-b64 "$(base64 -w0 "$here/components/cuda-toolkit/proof/p2p_bandwidth.cu")" \
      --require "$root/include/curand.h:libcurand-dev" \
      --require "$root/include/cublas_v2.h:libcublas-dev" 2>&1
    echo "verify_exit=$?"
  fi
} >"$out/verify.txt"
# The links as verify.sh printed them (base64, for topology.ts), decoded for the record.
for key in topology_pcie topology_matrix topology_p2p; do
  line="$(grep -m1 "^${key}=" "$out/verify.txt" || true)"
  [[ -z "$line" ]] || { echo "## ${key} (decoded)"; base64 -d <<<"${line#*=}"; } >>"$out/verify.txt"
done

cat "$out/nvidia-smi.txt" "$out/verify.txt"
