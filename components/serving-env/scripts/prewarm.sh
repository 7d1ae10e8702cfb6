#!/usr/bin/env bash
# Compiles FlashInfer's sampling kernels once, as the service user, into the keyed JIT workspace.
# Those kernels include <curand.h>; in the story their compile ran on the first real request and
# killed the server. Compiling here turns a missing header into a failed `pulumi up`.
# Usage: prewarm.sh VENV WORKSPACE USER CUDA_HOME
# Simulated host (GPUHOST_ROOT set): there is no GPU and no torch; the step reports itself skipped.
set -euo pipefail

venv="$1"
workspace="$2"
user="$3"
cuda_home="$4"

if [[ -n "${GPUHOST_ROOT:-}" ]]; then
  echo "prewarm=skipped (simulated host: no GPU, no torch)"
  exit 0
fi
for p in "$venv" "$workspace" "$cuda_home"; do
  if [[ ! "$p" =~ ^/[A-Za-z0-9._+@/-]*$ ]]; then
    echo "prewarm: refusing path '$p'" >&2
    exit 2
  fi
done
if [[ ! "$user" =~ ^[a-z_][a-z0-9_-]{0,31}$ ]]; then
  echo "prewarm: refusing user name '$user'" >&2
  exit 2
fi

if [[ $EUID -ne 0 ]]; then
  echo "prewarm: must run as root (hostScript runs it through sudo -n for other users)" >&2
  exit 2
fi

runuser -u "$user" -- env \
  CUDA_HOME="$cuda_home" CUDA_PATH="$cuda_home" \
  PATH="$venv/bin:$cuda_home/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin" \
  LD_LIBRARY_PATH="$cuda_home/lib64" FLASHINFER_WORKSPACE_BASE="$workspace" \
  "$venv/bin/python3" - <<'PY'
import torch
import flashinfer.sampling

probs = torch.softmax(torch.randn(4, 32000, device="cuda"), dim=-1)
flashinfer.sampling.top_k_top_p_sampling_from_probs(probs, top_k=20, top_p=0.9)
torch.cuda.synchronize()
print("prewarm=done")
PY
