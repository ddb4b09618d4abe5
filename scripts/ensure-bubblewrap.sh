#!/usr/bin/env bash
# Makes sure bwrap (Debian's bubblewrap) is installed: the worker gate starts every agent in a bwrap sandbox that
# shows only its project, its home, its tools and the read-only system (docs/security.md#security-model), and the sandbox
# tests (test/worker-gate/agent-sandbox.test.ts) run it for real. Installs the package when it is missing.
set -euo pipefail

log() { echo "[bubblewrap] $*"; }
fail() {
  echo "[bubblewrap] ERROR: $*
  Install it by hand: sudo apt-get update && sudo apt-get install -y --no-install-recommends bubblewrap
  (other systems: the bubblewrap package of the distribution), and re-run: bash scripts/ensure-bubblewrap.sh.
  Without it the worker gate runs agents unsandboxed and says so at start, in /control/health and in a strict preflight." >&2
  exit 1
}

if command -v bwrap >/dev/null 2>&1; then
  log "$(command -v bwrap) is installed ($(bwrap --version 2>/dev/null || echo 'version unknown'))"
  exit 0
fi

log "bwrap is missing; installing Debian's bubblewrap (a minute or so)"
if [[ "$(id -u)" -eq 0 ]]; then
  as_root=()
elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
  as_root=(sudo -n)
else
  fail "bwrap is missing and this user is not root and has no password-less sudo."
fi
command -v apt-get >/dev/null 2>&1 || fail "bwrap is missing and apt-get is not available (not Debian/Ubuntu)."

install() {
  "${as_root[@]}" env DEBIAN_FRONTEND=noninteractive \
    apt-get install -y --no-install-recommends -o DPkg::Lock::Timeout=300 bubblewrap </dev/null
}
if ! install; then
  log "install failed; refreshing the package lists (apt-get update) and trying again"
  "${as_root[@]}" env DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=300 update </dev/null || fail "apt-get update failed (output above)."
  install || fail "apt-get install bubblewrap failed (output above)."
fi
command -v bwrap >/dev/null 2>&1 || fail "bubblewrap was installed but bwrap is not on PATH."
log "installed $(command -v bwrap) ($(bwrap --version))"
