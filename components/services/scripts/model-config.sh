#!/usr/bin/env bash
# Prints the served model's Hugging Face config.json, base64 on one line, so the stack can say where
# the measured throughput stands against the host's roofline (physics/) from the model's own facts.
# Reads only. A local folder: FOLDER/config.json; a repository id (org/name): the newest snapshot in
# the service user's Hugging Face cache (HOME/.cache/huggingface/hub/models--org--name), where
# SGLang downloads it. Output: found=PATH and config=BASE64, or missing=WHERE LOOKED, or
# toolarge=PATH (over 1 MiB: not a config.json). Never fails for a model that is not there yet: the
# roofline then says it is not known, and why.
# Usage: model-config.sh MODEL_PATH SERVICE_HOME
set -euo pipefail
model="$1"
home="$2"
root="${GPUHOST_ROOT:-}"
limit=1048576

if [[ "$model" == /* ]]; then
  candidates=("$root$model/config.json")
  where="$model/config.json"
else
  cache="$home/.cache/huggingface/hub/models--${model//\//--}"
  where="$cache/snapshots/*/config.json"
  # Newest snapshot first; a glob that matches nothing stays as it is and is not a file.
  mapfile -t candidates < <(ls -1dt "$root$cache"/snapshots/*/config.json 2>/dev/null || true)
fi

for f in "${candidates[@]}"; do
  [[ -f "$f" ]] || continue
  size=$(wc -c <"$f")
  if ((size > limit)); then
    echo "toolarge=${f#"$root"}"
    exit 0
  fi
  echo "found=${f#"$root"}"
  echo "config=$(base64 -w0 <"$f")"
  exit 0
done
echo "missing=$where"
