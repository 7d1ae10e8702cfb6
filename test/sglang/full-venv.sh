#!/usr/bin/env bash
# A full environment for server-args.test.ts (not run by `npm test`): SGLang 0.5.23 with PyPI's real
# torch 2.14.1 and its CUDA wheels, and what SGLang's resolution (ServerArgs.resolve_once) imports
# beyond the parser: 6.0 GB (3 min 23 s here with pip's cache warm; about 4 GB to download cold). Then:
#   GPUHOST_SGLANG_VENV="$(bash test/sglang/full-venv.sh)" npx vitest run test/sglang/server-args.test.ts
# Prints the venv's path on its last line of stdout.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cache="${GPUHOST_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/gpuhost}"
venv="$cache/sglang-full/0.5.23"
if [[ -f "$venv/.complete" ]]; then
  echo "$venv"
  exit 0
fi
rm -rf "$venv"
mkdir -p "$(dirname "$venv")"
python3 -m venv "$venv" >&2
pip=("$venv/bin/python" -m pip install --quiet --disable-pip-version-check --only-binary=:all:)
# The parser's own set, then torch with its dependencies (its CUDA wheels, triton) and transformers.
"${pip[@]}" --no-deps -r "$here/parser-requirements.txt" >&2
"${pip[@]}" torch==2.14.1 transformers==5.19.0 apache-tvm-ffi==0.1.11 IPython dill loguru gguf >&2
# Imported by SGLang's model configs; their own dependencies would replace the pinned torch.
"${pip[@]}" --no-deps torchvision==0.29.1 sentencepiece==0.2.1 compressed-tensors==0.18.0 >&2
touch "$venv/.complete"
echo "$venv"
