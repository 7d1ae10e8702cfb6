#!/usr/bin/env bash
# Sets up everything the README's commands need, idempotently, and fast when nothing changed:
#   - node_modules (npm ci) when missing or older than package-lock.json, side by side with a CLI build;
#   - the Pulumi CLI: an official `pulumi` on PATH when it is PULUMI_MIN_VERSION or newer (its own
#     bundled plugins then run: nothing of ours is put before them), else the offline build of
#     PULUMI_VERSION (cached, or built from Go modules: engine/cli/go.mod pins it) with our plugin
#     launchers beside it, where the engine looks for bundled plugins;
#   - the command provider @pulumi/command 1.2.1 asks for: whatever the user's plugin cache
#     (PULUMI_HOME, default ~/.pulumi) already holds, official or not, is left alone; only where there
#     is none (or the one there is ours) is gpuhost's stand-in registered (engine/README.md says why).
# `--npm-only` stops after node_modules. Everything of ours lands in .gpuhost/ (gitignored); built
# CLIs are also cached outside the checkout (GPUHOST_ENGINE_CACHE, default ~/.cache/gpuhost/engine) so a
# fresh clone on the same machine (CI) does not rebuild.
set -euo pipefail

PULUMI_VERSION="3.276.0"
# The oldest CLI gpuhost runs on: its dynamic providers' read returns inputs, which the engine keeps
# from 3.216.0 on (diffs stay accurate after a refresh).
PULUMI_MIN_VERSION="3.216.0"
COMMAND_VERSION="1.2.1"
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BIN="$ROOT/.gpuhost/engine/bin"
CACHE="${GPUHOST_ENGINE_CACHE:-${GPUHOST_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/gpuhost}/engine}/v$PULUMI_VERSION"
# Every launcher we write carries this line, so we can tell ours from a plugin someone else installed.
MARK="# Written by gpuhost's engine/setup.sh"

log() { printf '[gpuhost setup] %s\n' "$*" >&2; }

# --- node_modules -------------------------------------------------------------------------------
npm_install() {
  if [ ! -d "$ROOT/node_modules/@pulumi/pulumi" ] || [ "$ROOT/package-lock.json" -nt "$ROOT/node_modules/.package-lock.json" ]; then
    log "installing npm dependencies (npm ci)"
    (cd "$ROOT" && npm ci --no-audit --no-fund --loglevel=error)
  fi
}
if [ "${1:-}" = "--npm-only" ]; then
  npm_install
  exit 0
fi

# --- the CLI --------------------------------------------------------------------------------------
# version_at_least BIN MIN: true when BIN reports MIN or newer.
version_at_least() {
  local have
  have="$("$1" version 2>/dev/null | sed 's/^v//')" || return 1
  [ -n "$have" ] || return 1
  [ "$(printf '%s\n%s\n' "$2" "$have" | sort -V | head -n1)" = "$2" ]
}

# The first `pulumi` on PATH that is not our own link or build.
official=""
while IFS= read -r candidate; do
  case "$(readlink -f "$candidate")" in "$ROOT"/.gpuhost/*) continue ;; esac
  official="$candidate"
  break
done < <(type -ap pulumi 2>/dev/null || true)

mkdir -p "$BIN"
# State, the plugin cache and the CLI live here: this user's alone.
chmod 0700 "$ROOT/.gpuhost"
if [ -n "$official" ] && version_at_least "$official" "$PULUMI_MIN_VERSION"; then
  target="$(readlink -f "$official")"
  if [ "$(readlink "$BIN/pulumi" 2>/dev/null)" != "$target" ]; then
    log "using the installed Pulumi CLI $target ($("$official" version)) and its bundled plugins"
    ln -sfn "$target" "$BIN/pulumi"
  fi
  # A link is all: the engine looks for bundled plugins beside the resolved CLI, the official ones.
  rm -f "$BIN/pulumi-language-nodejs" "$BIN/pulumi-resource-pulumi-nodejs"
  MODE=official
else
  if [ -n "$official" ]; then log "$official is older than v$PULUMI_MIN_VERSION: using the offline build v$PULUMI_VERSION"; fi
  if [ -f "$BIN/pulumi" ] && [ ! -L "$BIN/pulumi" ] && version_at_least "$BIN/pulumi" "$PULUMI_VERSION"; then
    : # already set up
  else
    if ! { [ -x "$CACHE/pulumi" ] && version_at_least "$CACHE/pulumi" "$PULUMI_VERSION"; }; then
      # The Go build (minutes) and npm ci (tens of seconds) share nothing: run them side by side.
      bash "$ROOT/engine/build-cli.sh" "$PULUMI_VERSION" "$CACHE" &
      build_pid=$!
    fi
    COPY_CLI=1
  fi
  MODE=offline
fi

npm_install
if [ -n "${build_pid:-}" ] && ! wait "$build_pid"; then
  log "building the Pulumi CLI failed (output above)"
  exit 1
fi
if [ -n "${COPY_CLI:-}" ]; then
  log "using the offline build $CACHE/pulumi"
  rm -f "$BIN/pulumi"
  cp "$CACHE/pulumi" "$BIN/pulumi"
fi

# --- plugin launchers -----------------------------------------------------------------------------
# Node for the launchers: the one first on PATH now (engine/run.sh put a supported one there), so a
# plain `pulumi` run from a shell whose own node is older still runs the plugins on a supported one.
NODE="$(command -v node)"

# write_if_changed FILE: the launcher text on stdin, made executable; FILE is replaced only when it differs.
write_if_changed() {
  local file="$1" tmp
  tmp="$(mktemp "$(dirname "$file")/.launcher.XXXXXX")"
  cat >"$tmp"
  chmod 0755 "$tmp"
  if cmp -s "$tmp" "$file"; then rm -f "$tmp"; else mv "$tmp" "$file"; fi
}

if [ "$MODE" = offline ]; then
  # Beside our CLI, where the engine finds bundled plugins. Neither names the checkout: the language
  # host is found relative to this launcher, the dynamic-provider host from the program's folder (the
  # engine starts plugins there), as upstream's launcher does.
  write_if_changed "$BIN/pulumi-language-nodejs" <<LAUNCHER
#!/bin/sh
$MARK: gpuhost's Node.js language host (engine/offline-plugins/language-host).
exec "$NODE" "\$(dirname "\$0")/../../../dist/engine/offline-plugins/language-host/main.js" "\$@"
LAUNCHER
  write_if_changed "$BIN/pulumi-resource-pulumi-nodejs" <<LAUNCHER
#!/bin/sh
$MARK: the dynamic-provider host, @pulumi/pulumi's own, from the program's node_modules,
# with a watch that ends it when the engine is gone (engine/offline-plugins/dynamic-provider-watch.ts).
script="\$("$NODE" -e 'process.stdout.write(require.resolve("@pulumi/pulumi/cmd/dynamic-provider"))')" || exit 1
exec "$NODE" --require "\$(dirname "\$0")/../../../dist/engine/offline-plugins/dynamic-provider-watch.js" "\$script" "\$@"
LAUNCHER
fi

# The command provider, registered in the user's plugin cache under the exact version the SDK asks for,
# unless one is there that we did not write. The launcher finds the stand-in at each start: in the
# checkout whose runner started the engine (GPUHOST_OFFLINE_PLUGINS_ROOT, set by engine/pulumi.ts),
# else in a checkout above the program's folder (or a copy of one in its node_modules/gpuhost). It
# names no checkout: a moved or second clone needs nothing re-registered. The npm package does not
# carry the stand-ins (package.json "files"): a user of the package has an official Pulumi.
PLUGINS="$ROOT/.gpuhost/engine/plugins"
mkdir -p "$PLUGINS"
# Its node is chosen when it starts (PATH's when >= 22, else the pinned one engine/run.sh installs),
# so every checkout writes the same file, whichever node its shell has.
PINNED_NODE="${GPUHOST_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/gpuhost}/node/v$(sed -n 's/^NODE_VERSION="\(.*\)"$/\1/p' "$ROOT/engine/run.sh")/bin/node"
write_if_changed "$PLUGINS/pulumi-resource-command" <<LAUNCHER
#!/bin/sh
$MARK: stand-in for pulumi-resource-command $COMMAND_VERSION (gpuhost's engine/README.md).
# The official provider replaces it: pulumi plugin install resource command $COMMAND_VERSION --reinstall
node=node
if [ "\$(node -p 'process.versions.node.split(".")[0] >= 22' 2>/dev/null)" != true ] && [ -x "$PINNED_NODE" ]; then
  node="$PINNED_NODE"
fi
# ROOT holds gpuhost with the stand-in: run it. The second path is where clones from before the
# stand-ins moved keep it (one launcher serves every clone on the machine).
try() {
  grep -qs '"name": "gpuhost"' "\$1/package.json" || return 0
  for plugin in dist/engine/offline-plugins/command-provider/main.js dist/engine/command-provider/main.js; do
    if [ -f "\$1/\$plugin" ]; then exec "\$node" "\$1/\$plugin" "\$@"; fi
  done
}
# The checkout whose runner started the engine (engine/pulumi.ts names it), then one above the program.
if [ -n "\${GPUHOST_OFFLINE_PLUGINS_ROOT:-}" ]; then try "\$GPUHOST_OFFLINE_PLUGINS_ROOT" "\$@"; fi
d="\$PWD"
while :; do
  try "\$d/node_modules/gpuhost" "\$@"
  try "\$d" "\$@"
  [ "\$d" = / ] && break
  d="\$(dirname "\$d")"
done
echo "pulumi-resource-command: gpuhost's stand-in (it lives in a gpuhost checkout, not in the npm package) found no checkout above \$PWD; install the official provider: pulumi plugin install resource command $COMMAND_VERSION --reinstall" >&2
exit 1
LAUNCHER
PULUMI_HOME_DIR="${PULUMI_HOME:-$HOME/.pulumi}"
installed="$PULUMI_HOME_DIR/plugins/resource-command-v$COMMAND_VERSION/pulumi-resource-command"
if [ -e "$installed" ] && ! grep -qs "^$MARK" "$installed"; then
  : # someone else's (the official provider, say): never overwritten
elif ! cmp -s "$PLUGINS/pulumi-resource-command" "$installed"; then
  log "registering gpuhost's stand-in command provider $COMMAND_VERSION in $PULUMI_HOME_DIR/plugins"
  "$BIN/pulumi" plugin install resource command "$COMMAND_VERSION" --file "$PLUGINS/pulumi-resource-command" \
    --reinstall --non-interactive >/dev/null
fi

printf 'pulumi %s (%s)\nnode %s\n' "$("$BIN/pulumi" version)" "$MODE" "$("$NODE" --version)" >"$ROOT/.gpuhost/engine/VERSIONS"
