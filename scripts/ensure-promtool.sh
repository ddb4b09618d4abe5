#!/usr/bin/env bash
# Makes sure Debian's promtool is installed at /usr/bin/promtool for the alert-rule tests (test/prometheus-rules.test.ts),
# which check deploy/prometheus/rcp-alerts.yml, run its unit tests and lint a live /metrics scrape with it. It comes
# from Debian's prometheus package (the server ships beside it; recommends such as the node exporter are left out):
# the machines that run the tests reach Debian's package mirror and the npm registry, not GitHub's release downloads.
set -euo pipefail

readonly PROMTOOL="${PROMTOOL_PATH:-/usr/bin/promtool}"

log() { echo "[promtool] $*"; }
fail() {
  echo "[promtool] ERROR: $*
  Install it by hand: sudo apt-get update && sudo apt-get install -y --no-install-recommends prometheus
  (or point PROMTOOL_PATH at a promtool binary), and re-run: bash scripts/ensure-promtool.sh" >&2
  exit 1
}

if [[ -x "$PROMTOOL" ]]; then
  log "$PROMTOOL is installed"
  exit 0
fi
[[ "$PROMTOOL" == /usr/bin/promtool ]] || fail "PROMTOOL_PATH=$PROMTOOL is not an executable file."

log "$PROMTOOL is missing; installing Debian's prometheus package (a minute or so)"

if [[ "$(id -u)" -eq 0 ]]; then
  as_root=()
elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
  as_root=(sudo -n)
else
  fail "$PROMTOOL is missing and this user is not root and has no password-less sudo."
fi
command -v apt-get >/dev/null 2>&1 || fail "$PROMTOOL is missing and apt-get is not available (not Debian/Ubuntu)."

install() {
  "${as_root[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends -o Dpkg::Options::=--force-confold prometheus </dev/null
}

if ! install; then
  log "install failed; refreshing the package lists (apt-get update) and trying again"
  "${as_root[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update </dev/null || fail "apt-get update failed (output above)."
  install || fail "apt-get install prometheus failed (output above)."
fi

[[ -x "$PROMTOOL" ]] || fail "prometheus was installed but $PROMTOOL is still missing."
log "installed $("$PROMTOOL" --version 2>&1 </dev/null | head -n 1 || echo promtool)"
