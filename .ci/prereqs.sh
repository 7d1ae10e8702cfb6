#!/usr/bin/env bash
# Debian packages the test suite checks against: shellcheck for every host script,
# systemd (systemd-analyze verify) for every rendered unit, openssh-server for the SSH tests, python3-venv
# for the router's venv (SMG from PyPI, .ci/smg.sh) and SGLang's own parser (test/sglang/setup-venv.sh).
# Installs only what is missing.
set -euo pipefail
needed=(shellcheck systemd openssh-client openssh-server python3-venv)
missing=()
for pkg in "${needed[@]}"; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q 'install ok installed' || missing+=("$pkg")
done
if [[ ${#missing[@]} -gt 0 ]]; then
  echo "prereqs: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
