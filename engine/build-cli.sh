#!/usr/bin/env bash
# `bash engine/build-cli.sh VERSION CACHE`: builds the Pulumi CLI VERSION from Go modules into
# CACHE/pulumi (engine/setup.sh runs it where no usable CLI is installed or cached).
set -euo pipefail
VERSION="$1"
CACHE="$2"
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
log() { printf '[gpuhost setup] %s\n' "$*" >&2; }

command -v go >/dev/null 2>&1 || {
  log "no Pulumi CLI v$VERSION on PATH and no Go toolchain to build one: install the Pulumi CLI or Go 1.26, then rerun"
  exit 1
}
log "building the Pulumi CLI v$VERSION from Go modules (first run only: about 4 minutes on 2 cores)"
mkdir -p "$CACHE"
# The checksum database is unreachable from these machines; engine/cli/go.sum pins every module's
# hash instead, and -mod=readonly refuses anything not already pinned there.
(cd "$ROOT/engine/cli" && GOFLAGS=-mod=readonly GOSUMDB=off GOTOOLCHAIN=local \
  go build -trimpath \
  -ldflags "-s -w -X github.com/pulumi/pulumi/sdk/v3/go/common/version.Version=v$VERSION" \
  -o "$CACHE/pulumi.partial.$$" github.com/pulumi/pulumi/pkg/v3/cmd/pulumi)
mv "$CACHE/pulumi.partial.$$" "$CACHE/pulumi"
