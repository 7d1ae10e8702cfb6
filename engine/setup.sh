#!/usr/bin/env bash
# Sets up everything the README's commands need, idempotently, and fast when nothing changed:
#   - node_modules (npm ci) when missing or older than package-lock.json;
#   - the Pulumi CLI at the pinned version: a `pulumi` on PATH when it is that version or newer,
#     else a cached build, else a build from Go modules (engine/cli/go.mod pins it);
#   - the plugins the engine starts, as launchers beside the CLI in .gpuhost/engine/bin:
#     pulumi-language-nodejs, pulumi-resource-pulumi-nodejs (dynamic providers) and
#     pulumi-resource-command (see engine/README.md for why the last one is ours).
# Everything lands in .gpuhost/ (gitignored). Built CLIs are also cached outside the checkout
# (GPUHOST_ENGINE_CACHE, default ~/.cache/gpuhost/engine) so a fresh clone on the same machine
# (CI) does not rebuild.
set -euo pipefail

PULUMI_VERSION="3.276.0"
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BIN="$ROOT/.gpuhost/engine/bin"
CACHE="${GPUHOST_ENGINE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/gpuhost/engine}/v$PULUMI_VERSION"

log() { printf '[gpuhost setup] %s\n' "$*" >&2; }

# --- node_modules -------------------------------------------------------------------------------
if [ ! -d "$ROOT/node_modules/@pulumi/pulumi" ] || [ "$ROOT/package-lock.json" -nt "$ROOT/node_modules/.package-lock.json" ]; then
  log "installing npm dependencies (npm ci)"
  (cd "$ROOT" && npm ci --no-audit --no-fund --loglevel=error)
fi

# --- the CLI --------------------------------------------------------------------------------------
# version_ok BIN: true when BIN reports PULUMI_VERSION or newer.
version_ok() {
  local have
  have="$("$1" version 2>/dev/null | sed 's/^v//')" || return 1
  [ -n "$have" ] || return 1
  [ "$(printf '%s\n%s\n' "$PULUMI_VERSION" "$have" | sort -V | head -n1)" = "$PULUMI_VERSION" ]
}

mkdir -p "$BIN"
if [ -x "$BIN/pulumi" ] && version_ok "$BIN/pulumi"; then
  : # already set up
elif command -v pulumi >/dev/null 2>&1 && [ "$(command -v pulumi)" != "$BIN/pulumi" ] && version_ok "$(command -v pulumi)"; then
  log "using $(command -v pulumi) ($(pulumi version))"
  ln -sf "$(command -v pulumi)" "$BIN/pulumi"
elif [ -x "$CACHE/pulumi" ] && version_ok "$CACHE/pulumi"; then
  log "using cached build $CACHE/pulumi"
  cp "$CACHE/pulumi" "$BIN/pulumi"
else
  command -v go >/dev/null 2>&1 || { log "no pulumi >= $PULUMI_VERSION on PATH and no Go toolchain to build one"; exit 1; }
  log "building the Pulumi CLI v$PULUMI_VERSION from Go modules (first run only: about 4 to 15 minutes)"
  mkdir -p "$CACHE"
  # The checksum database is unreachable from these machines; engine/cli/go.sum pins every module's
  # hash instead, and -mod=readonly refuses anything not already pinned there.
  (cd "$ROOT/engine/cli" && GOFLAGS=-mod=readonly GOSUMDB=off GOTOOLCHAIN=local \
    go build -trimpath \
      -ldflags "-s -w -X github.com/pulumi/pulumi/sdk/v3/go/common/version.Version=v$PULUMI_VERSION" \
      -o "$CACHE/pulumi.partial" github.com/pulumi/pulumi/pkg/v3/cmd/pulumi)
  mv "$CACHE/pulumi.partial" "$CACHE/pulumi"
  cp "$CACHE/pulumi" "$BIN/pulumi"
fi

# --- plugin launchers -----------------------------------------------------------------------------
# write_launcher DIR NAME TARGET: an executable DIR/NAME that runs TARGET with node. The engine looks
# for bundled plugins beside the CLI, and .gpuhost/engine/bin is first on PATH for every engine run.
write_launcher() {
  local dir="$1" name="$2" target="$3" tmp
  tmp="$(mktemp "$dir/.$name.XXXXXX")"
  cat >"$tmp" <<EOF
#!/bin/sh
# Written by engine/setup.sh. $name for the Pulumi engine.
exec node "$target" "\$@"
EOF
  chmod 0755 "$tmp"
  mv "$tmp" "$dir/$name"
}
write_launcher "$BIN" pulumi-language-nodejs "$ROOT/dist/engine/language-host/main.js"
write_launcher "$BIN" pulumi-resource-pulumi-nodejs "$ROOT/node_modules/@pulumi/pulumi/cmd/dynamic-provider"
# The command provider is registered in the project's plugin cache (PULUMI_HOME=.gpuhost/pulumi-home,
# as engine/pulumi.ts sets it) under the exact version the SDK asks for, so the engine finds it without
# a download and without the "using ... from $PATH" warning an ambient plugin draws on every run.
PLUGINS="$ROOT/.gpuhost/engine/plugins"
mkdir -p "$PLUGINS"
rm -f "$BIN/pulumi-resource-command"
write_launcher "$PLUGINS" pulumi-resource-command "$ROOT/dist/engine/command-provider/main.js"
if ! cmp -s "$PLUGINS/pulumi-resource-command" "$ROOT/.gpuhost/pulumi-home/plugins/resource-command-v1.2.1/pulumi-resource-command"; then
  PULUMI_HOME="$ROOT/.gpuhost/pulumi-home" "$BIN/pulumi" plugin install resource command 1.2.1 \
    --file "$PLUGINS/pulumi-resource-command" --non-interactive >/dev/null
fi

printf 'pulumi %s\n' "$("$BIN/pulumi" version)" >"$ROOT/.gpuhost/engine/VERSIONS"
