#!/usr/bin/env bash
# Makes sure promtool is at hand for the alert-rule tests (test/console/prometheus-rules.test.ts), which check
# deploy/prometheus/rcp-alerts.yml, run its unit tests and lint a live /metrics scrape with it. It comes from Debian's
# prometheus package: the machines that run the tests reach Debian's package mirror and the npm registry, not GitHub's
# release downloads. The package is downloaded and only promtool taken out of it, into the user cache: installing the
# package would also install (and, under systemd, start) a Prometheus server. Keep the path in step with the test.
set -euo pipefail

cache_root="${RCP_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/research-control-plane}"
readonly CACHED="$cache_root/promtool/promtool"

log() { echo "[promtool] $*"; }
fail() {
  echo "[promtool] ERROR: $*
  Get it by hand: apt-get download prometheus && dpkg-deb -x prometheus_*.deb x && cp x/usr/bin/promtool $CACHED
  (or point PROMTOOL_PATH at a promtool binary), and re-run: bash scripts/ensure-promtool.sh" >&2
  exit 1
}

if [[ -n "${PROMTOOL_PATH:-}" ]]; then
  [[ -x "$PROMTOOL_PATH" ]] || fail "PROMTOOL_PATH=$PROMTOOL_PATH is not an executable file."
  log "using PROMTOOL_PATH=$PROMTOOL_PATH"
  exit 0
fi
if [[ -x "$CACHED" ]]; then
  log "$CACHED is installed"
  exit 0
fi

command -v apt-get >/dev/null 2>&1 || fail "apt-get is not available (not Debian/Ubuntu)."
command -v dpkg-deb >/dev/null 2>&1 || fail "dpkg-deb is not available (not Debian/Ubuntu)."
log "$CACHED is missing; taking promtool out of Debian's prometheus package (a minute or so)"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

download() { (cd "$work" && apt-get download prometheus </dev/null); }
if ! download; then
  # Stale package lists: refresh them where this user may.
  if [[ "$(id -u)" -eq 0 ]]; then as_root=()
  elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then as_root=(sudo -n)
  else fail "apt-get download prometheus failed (output above), and this user may not refresh the package lists."
  fi
  log "download failed; refreshing the package lists (apt-get update) and trying again"
  "${as_root[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update </dev/null || fail "apt-get update failed (output above)."
  download || fail "apt-get download prometheus failed (output above)."
fi

dpkg-deb -x "$work"/prometheus_*.deb "$work/extracted" || fail "dpkg-deb could not unpack the prometheus package."
[[ -x "$work/extracted/usr/bin/promtool" ]] || fail "the prometheus package holds no usr/bin/promtool."
mkdir -p "$(dirname "$CACHED")"
cp "$work/extracted/usr/bin/promtool" "$CACHED.tmp"
mv -f "$CACHED.tmp" "$CACHED"
log "installed $("$CACHED" --version 2>&1 </dev/null | head -n 1 || echo promtool) at $CACHED"
