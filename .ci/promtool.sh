#!/usr/bin/env bash
# Prometheus's own promtool, for the tests that check gpuhost's metrics file (`promtool check
# metrics`) and its alert rules (`promtool check rules`, `promtool test rules`): built from its Go
# module (github.com/prometheus/prometheus/cmd/promtool, pinned below) with the Go toolchain, once
# per machine into $GPUHOST_CACHE/promtool-<version>-nosd/ (default ~/.cache/gpuhost), reused after.
# Prints the binary's path on stdout; progress on stderr. Needs Go (`go` on PATH, or
# /usr/local/go/bin/go) and the Go module proxy; the first build takes minutes, later runs under a
# second. Two concurrent runs build once (flock). `promtool --version` prints no version: go install
# sets none. Built with the build tag remove_all_sd (Prometheus >= 3.10: no bundled service-discovery
# provider, so neither the cloud SDKs nor client-go are downloaded and compiled): the tests use
# `check rules`, `test rules` and `check metrics`, none of which discovers targets. Measured on a
# 2-core machine, Go 1.26, downloads included: 260 s so (building beside llama.cpp, load 5-7), against
# 33 min with every provider (load ~20).
set -euo pipefail
PROMTOOL_VERSION="v0.316.0"
CACHE_ROOT="${GPUHOST_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/gpuhost}"
dest="$CACHE_ROOT/promtool-$PROMTOOL_VERSION-nosd"
mkdir -p "$CACHE_ROOT"
exec 9>"$CACHE_ROOT/.promtool.lock"
flock 9
if [[ -x "$dest/promtool" ]]; then
  echo "$dest/promtool"
  exit 0
fi
go="$(command -v go || true)"
[[ -z "$go" && -x /usr/local/go/bin/go ]] && go=/usr/local/go/bin/go
if [[ -z "$go" ]]; then
  echo "promtool: Go is needed to build it (https://go.dev/doc/install, or Debian's golang-go if recent enough), or set GPUHOST_SKIP_PROMTOOL=1 to skip its tests knowingly" >&2
  exit 1
fi
echo "promtool: building $PROMTOOL_VERSION into $dest (first run only; minutes)" >&2
start=$SECONDS
# GOBIN in a folder beside the cache, renamed in when the build succeeded: never half a binary.
build="$CACHE_ROOT/.promtool-build-$$"
trap 'rm -rf "$build"' EXIT
GOFLAGS=-mod=mod GOBIN="$build" "$go" install -tags remove_all_sd "github.com/prometheus/prometheus/cmd/promtool@$PROMTOOL_VERSION" >&2
"$build/promtool" --version >&2
rm -rf "$dest"
mkdir -p "$dest"
mv "$build/promtool" "$dest/promtool"
echo "promtool: built in $((SECONDS - start)) s" >&2
echo "$dest/promtool"
