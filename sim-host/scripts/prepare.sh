#!/usr/bin/env bash
# Preparation step of a simulated host (GPUHOST_ROOT set, the shims first on PATH): the skeleton
# folders a Debian host has and the apt repository laid out from the CUDA catalogue. Idempotent.
# $1: the compiled sim-host/prepare.js (npm run build), run with the same node as the shims.
set -euo pipefail
if [[ ! -f "$1" ]]; then
  echo "gpuhost simulated host: $1 is missing; compile the project first (npm run build)" >&2
  exit 2
fi
exec node "$1"
