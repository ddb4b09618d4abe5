#!/usr/bin/env bash
# Builds the real Temporal server and its SQL schema tool into a per-user cache outside the repo, with the server's
# Postgres schema files beside them, for a Temporal of its own on Postgres (docs/operations.md#running-on-several-machines).
# Keep the version in step with platform/temporal/temporal-server.ts.
set -euo pipefail

# Later tags need a newer Go than the machines carry. docker-compose.yml's temporalio images carry the same version.
readonly VERSION=1.31.0
readonly MODULE=go.temporal.io/server

log() { echo "[temporal-server] $*"; }
fail() { echo "[temporal-server] ERROR: $*" >&2; exit 1; }

# shellcheck source=lib/go-install.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/go-install.sh"

cache_root="${RCP_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/research-control-plane}"
install_dir="$cache_root/temporal-server-$VERSION"

# Built by this script for this version: `go version -m` names the module version it was built from.
is_expected_build() {
  command -v go >/dev/null 2>&1 || return 1
  grep -Eq "^[[:space:]]*mod[[:space:]]+$MODULE[[:space:]]+v${VERSION}[[:space:]]" <<<"$(go version -m "$1" 2>/dev/null)"
}
installed() {
  [[ -x "$install_dir/temporal-server" && -x "$install_dir/temporal-sql-tool" && -d "$install_dir/schema/postgresql" ]] &&
    is_expected_build "$install_dir/temporal-server" && is_expected_build "$install_dir/temporal-sql-tool"
}

command -v go >/dev/null 2>&1 || fail "'go' is not on PATH, so the Temporal server v$VERSION cannot be built.
  Install Go from https://go.dev/dl/ (put its bin/ on PATH) and re-run: bash scripts/install-temporal-server.sh"

if installed; then
  log "temporal-server v$VERSION already installed in $install_dir"
  exit 0
fi

mkdir -p "$install_dir"
lock_install_dir "$install_dir" "temporal-server v$VERSION" installed

# Build into a temp GOBIN on the same filesystem, then rename: an interrupted build never leaves a partial binary.
build_dir="$(mktemp -d "$install_dir/.build.XXXXXX")"
trap 'rm -rf "$build_dir"' EXIT

log "building the Temporal server v$VERSION and its SQL tool with $(go version | awk '{print $3}') into $install_dir"
log "this takes about 3 minutes on a 2-core machine once Go's module cache holds the server (longer the first time);"
log "a progress line follows every 15 s while it builds"
started=$SECONDS
go_install_with_progress "temporal-server v$VERSION" "$build_dir" "$MODULE/cmd/server@v$VERSION" "$MODULE/cmd/tools/sql@v$VERSION"
is_expected_build "$build_dir/server" || fail "the built server is not Temporal v$VERSION."
is_expected_build "$build_dir/sql" || fail "the built SQL tool is not Temporal v$VERSION."

# The schema files (versioned SQL for the main and visibility stores) come from the module source go just fetched.
module_dir="$(go env GOMODCACHE)/$MODULE@v$VERSION"
[[ -d "$module_dir/schema/postgresql" ]] || fail "$module_dir/schema/postgresql is missing after the build."
rm -rf "$build_dir/schema"
mkdir -p "$build_dir/schema"
cp -R "$module_dir/schema/postgresql" "$build_dir/schema/postgresql"
chmod -R u+w "$build_dir/schema"

rm -rf "$install_dir/schema"
mv -f "$build_dir/schema" "$install_dir/schema"
mv -f "$build_dir/sql" "$install_dir/temporal-sql-tool"
mv -f "$build_dir/server" "$install_dir/temporal-server"
log "installed temporal-server and temporal-sql-tool v$VERSION in $install_dir in $((SECONDS - started))s"
