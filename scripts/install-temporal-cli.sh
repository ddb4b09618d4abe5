#!/usr/bin/env bash
# Installs the Temporal CLI (which embeds the dev server) into a per-user cache outside the repo.
# Keep the cache path in step with platform/temporal/temporal-cli.ts.
set -euo pipefail

readonly VERSION=1.5.1
readonly MODULE=github.com/temporalio/cli/cmd/temporal

log() { echo "[temporal-cli] $*"; }
fail() { echo "[temporal-cli] ERROR: $*" >&2; exit 1; }

# Plain `go install` builds report "0.0.0-DEV" (releases stamp the version via ldflags), so
# fall back to the module version Go records in the binary; without Go, trust the versioned path.
is_expected_build() {
  local reported
  reported="$("$1" --version 2>/dev/null </dev/null)" || return 1
  if grep -q "version ${VERSION}\b" <<<"$reported"; then return 0; fi
  if ! command -v go >/dev/null 2>&1; then return 0; fi
  grep -Eq "^[[:space:]]*mod[[:space:]]+github.com/temporalio/cli[[:space:]]+v${VERSION}[[:space:]]" \
    <<<"$(go version -m "$1" 2>/dev/null)"
}

# shellcheck source=lib/go-install.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/go-install.sh"

if [[ -n "${TEMPORAL_CLI_PATH:-}" ]]; then
  [[ -f "$TEMPORAL_CLI_PATH" && -x "$TEMPORAL_CLI_PATH" ]] \
    || fail "TEMPORAL_CLI_PATH=$TEMPORAL_CLI_PATH is not an executable file."
  log "using TEMPORAL_CLI_PATH=$TEMPORAL_CLI_PATH"
  exit 0
fi

cache_root="${RCP_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/research-control-plane}"
install_dir="$cache_root/temporal-cli-$VERSION"
binary="$install_dir/temporal"

if [[ -x "$binary" ]] && is_expected_build "$binary"; then
  log "temporal v$VERSION already installed at $binary"
  exit 0
fi

if ! command -v go >/dev/null 2>&1; then
  fail "'go' is not on PATH, so temporal v$VERSION cannot be built.
  Install Go from https://go.dev/dl/ (put its bin/ on PATH) and re-run: bash scripts/install-temporal-cli.sh
  Or set TEMPORAL_CLI_PATH to an existing temporal v$VERSION binary,
  or set TEMPORAL_ADDRESS=host:port so the control plane uses a running Temporal server instead of a dev server."
fi

mkdir -p "$install_dir"

installed() { [[ -x "$binary" ]] && is_expected_build "$binary"; }
lock_install_dir "$install_dir" "temporal v$VERSION" installed

# Build into a temp GOBIN on the same filesystem, then rename: an interrupted build never
# leaves a partial binary at the final path.
build_dir="$(mktemp -d "$install_dir/.build.XXXXXX")"
trap 'rm -rf "$build_dir"' EXIT

log "building temporal v$VERSION with $(go version | awk '{print $3}') into $install_dir"
log "this takes about 5 minutes on a 2-core machine the first time (later runs reuse the Go build cache);"
log "a progress line follows every 15 s while it builds"
started=$SECONDS
# Stamp the version so `temporal --version` reports it, as release builds do.
go_install_with_progress "temporal v$VERSION" "$build_dir" \
  -ldflags "-X github.com/temporalio/cli/temporalcli.Version=$VERSION" "$MODULE@v$VERSION"

is_expected_build "$build_dir/temporal" || fail "the built binary is not temporal v$VERSION."
mv -f "$build_dir/temporal" "$binary"
log "installed $binary in $((SECONDS - started))s"
