#!/usr/bin/env bash
# Makes sure Debian's Chromium is installed at /usr/bin/chromium for the dashboard's browser tests, which drive it with
# playwright-core (test/support/browser.ts). A test tool's own browser download is never used: the machines that run
# the tests reach Debian's package mirror and the npm registry, not a browser CDN.
set -euo pipefail

readonly CHROMIUM="${CHROMIUM_PATH:-/usr/bin/chromium}"

log() { echo "[chromium] $*"; }
fail() {
  echo "[chromium] ERROR: $*
  Install it by hand: sudo apt-get update && sudo apt-get install -y chromium
  (or point CHROMIUM_PATH at a Chromium binary), and re-run: bash scripts/ensure-chromium.sh" >&2
  exit 1
}

if [[ -x "$CHROMIUM" ]]; then
  log "$CHROMIUM is installed"
  exit 0
fi
[[ "$CHROMIUM" == /usr/bin/chromium ]] || fail "CHROMIUM_PATH=$CHROMIUM is not an executable file."

log "$CHROMIUM is missing; installing Debian's chromium package (a minute or two)"

if [[ "$(id -u)" -eq 0 ]]; then
  as_root=()
elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
  as_root=(sudo -n)
else
  fail "$CHROMIUM is missing and this user is not root and has no password-less sudo."
fi
command -v apt-get >/dev/null 2>&1 || fail "$CHROMIUM is missing and apt-get is not available (not Debian/Ubuntu)."

install() {
  "${as_root[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -o Dpkg::Options::=--force-confold chromium </dev/null
}

if ! install; then
  log "install failed; refreshing the package lists (apt-get update) and trying again"
  "${as_root[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update </dev/null || fail "apt-get update failed (output above)."
  install || fail "apt-get install chromium failed (output above)."
fi

[[ -x "$CHROMIUM" ]] || fail "chromium was installed but $CHROMIUM is still missing."
log "installed $("$CHROMIUM" --version 2>/dev/null </dev/null | head -n 1 || echo chromium)"
