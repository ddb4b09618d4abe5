#!/usr/bin/env bash
# Installs the pinned Codex CLI and Claude Code (worker-gate/launchers/agent-versions.json) into the per-user cache,
# never into node_modules: each ships a native binary of about 400 MB. The gate's launchers find them there
# (docs/worker-gate.md#running-real-agents). Each agent gets its own folder, so one version never shadows another. As root the
# cache is the system's (/var/cache): a gate run as root starts the tools as its agent user, who cannot pass through
# root's private home (worker-gate/launchers/installed-agents.ts says the same).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

if [[ -z "${XDG_CACHE_HOME:-}" && "$(id -u)" == 0 ]]; then cache_home=/var/cache; else cache_home="${XDG_CACHE_HOME:-$HOME/.cache}"; fi
readonly CACHE="$cache_home/research-control-plane/agents"
readonly VERSIONS=worker-gate/launchers/agent-versions.json

log() { echo "[agents] $*"; }
fail() {
  echo "[agents] ERROR: $*
  Re-run with network access to the npm registry: bash scripts/ensure-agents.sh" >&2
  exit 1
}

if [[ "$(uname -s)-$(uname -m)" != "Linux-x86_64" ]]; then
  fail "the pinned agents are installed for Linux on x86_64 only; this is $(uname -s)-$(uname -m)."
fi

for agent in codex claude-code; do
  read -r package version bin < <(node -e "const a = require('./$VERSIONS')['$agent']; console.log(a.package, a.version, a.bin)")
  dir="$CACHE/$agent-$version"
  binary="$dir/node_modules/.bin/$bin"
  if [[ -x "$binary" ]] && "$binary" --version 2>/dev/null | grep -q "$version"; then
    log "$package $version is installed ($binary)"
    continue
  fi
  log "installing $package@$version into $dir (about 400 MB, some seconds)"
  rm -rf "$dir"
  mkdir -p "$dir"
  chmod 755 "$CACHE" "$dir"
  # The package's own install script links the native binary in place: scripts must run.
  npm install --prefix "$dir" --no-save --no-audit --no-fund --loglevel=error "$package@$version" >&2 ||
    fail "npm could not install $package@$version"
  "$binary" --version 2>/dev/null | grep -q "$version" || fail "$binary does not report version $version after the install"
  log "installed $package $version"
done
