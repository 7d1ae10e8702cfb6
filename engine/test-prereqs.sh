#!/usr/bin/env bash
# What `npm test` needs beyond node_modules, set up before any test runs, so a fresh machine never
# fails test files one by one for a missing tool: shellcheck, systemd-analyze and OpenSSH for the
# script, unit and SSH tests (.ci/prereqs.sh), debootstrap and systemd-nspawn for the real Debian
# test host (.ci/testhost-prereqs.sh). Those two scripts are the ones CI runs; as root they install
# only what is missing (nothing, and under a second, on a machine that has it all). Without root the
# test host cannot boot at all, so this stops at once and says what to run, unless
# GPUHOST_SKIP_TESTHOST=1 says to skip the root-only suites knowingly.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

# The real inference server of test/real-server (llama.cpp's llama-server and a small model, built
# once per machine: docs/real-server.md; under a second after that), unless
# GPUHOST_SKIP_REAL_SERVER=1 skips that suite knowingly.
real_server() {
  if [ "${GPUHOST_SKIP_REAL_SERVER:-}" != "1" ]; then bash "$ROOT/.ci/real-server-prereqs.sh" >/dev/null; fi
}

# Prometheus's promtool for test/drift's checks of the metrics file and the alert rules (built from
# its Go module once per machine, minutes; under a second after), unless GPUHOST_SKIP_PROMTOOL=1
# skips those tests knowingly.
promtool() {
  if [ "${GPUHOST_SKIP_PROMTOOL:-}" != "1" ]; then bash "$ROOT/.ci/promtool.sh" >/dev/null; fi
}

# SGLang's own argument parser for test/sglang (minutes the first time, under a second after): set
# up here rather than inside the suite, where it held a test worker for minutes.
sglang_parser() { bash "$ROOT/test/sglang/setup-venv.sh" >/dev/null; }

if [ "${GPUHOST_SKIP_TESTHOST:-}" = "1" ]; then
  missing=()
  for tool in shellcheck systemd-analyze ssh; do command -v "$tool" >/dev/null 2>&1 || missing+=("$tool"); done
  if [ ${#missing[@]} -gt 0 ]; then
    echo "npm test needs ${missing[*]}: run \`sudo bash .ci/prereqs.sh\` once, then npm test again." >&2
    exit 1
  fi
  # The real SMG router of the fleet tests, once per machine (under a minute; cached after).
  bash "$ROOT/.ci/smg.sh" >/dev/null
  sglang_parser
  real_server
  promtool
  exit 0
fi

if [ "$(id -u)" -ne 0 ]; then
  echo "npm test boots a Debian test host with systemd-nspawn and needs root: run \`sudo npm test\` (it installs its Debian prerequisites), or \`GPUHOST_SKIP_TESTHOST=1 npm test\` to skip the root-only suites knowingly." >&2
  exit 1
fi
if ! command -v apt-get >/dev/null 2>&1; then
  echo "npm test installs its prerequisites with apt-get (Debian/Ubuntu); on this system install shellcheck, systemd-container, debootstrap, openssh-server, dpkg-dev, apt-utils, gnupg and zstd, or run \`GPUHOST_SKIP_TESTHOST=1 npm test\`." >&2
  exit 1
fi
bash "$ROOT/.ci/prereqs.sh"
bash "$ROOT/.ci/testhost-prereqs.sh" >/dev/null
# The real SMG router of the fleet tests, once per machine (under a minute; cached after).
bash "$ROOT/.ci/smg.sh" >/dev/null
sglang_parser
real_server
promtool
