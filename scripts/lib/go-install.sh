# Sourced by the install scripts that build a Go program into the user cache (install-temporal-cli.sh,
# install-temporal-server.sh). Expects log() and fail() from the caller.

# Go's default install location is often not on a non-login shell's PATH.
if ! command -v go >/dev/null 2>&1 && [[ -x /usr/local/go/bin/go ]]; then
  PATH="/usr/local/go/bin:$PATH"
fi

# go_install_with_progress WHAT GOBIN [go install arguments...]
# Runs `go install` with GOBIN set, printing a progress line every RCP_PROGRESS_EVERY_SEC (15) seconds: compiling
# prints nothing for minutes, and a steady line tells a new user the build has not hung. Fails naming WHAT.
go_install_with_progress() {
  local what="$1" gobin="$2"
  shift 2
  local started=$SECONDS
  GOBIN="$gobin" go install "$@" </dev/null &
  local go_pid=$!
  local progress_every="${RCP_PROGRESS_EVERY_SEC:-15}"
  (
    while sleep "$progress_every"; do
      kill -0 "$go_pid" 2>/dev/null || exit 0
      log "still building $what ($((SECONDS - started))s so far)"
    done
  ) &
  local ticker_pid=$!
  # A signal sent only to this script (not its process group) must not orphan the build.
  trap 'kill "$go_pid" "$ticker_pid" 2>/dev/null; exit 143' INT TERM HUP
  local build_status=0
  wait "$go_pid" || build_status=$?
  kill "$ticker_pid" 2>/dev/null || true
  wait "$ticker_pid" 2>/dev/null || true
  trap - INT TERM HUP
  [[ $build_status -eq 0 ]] || fail "go install of $what failed (see the output above)."
}

# lock_install_dir DIR WHAT CHECK
# Serialises concurrent installs into DIR (two terminals, CI + pretest) so only one build runs: takes DIR/.install.lock
# on descriptor 9 for the rest of the script, then exits 0 when CHECK (a command) says another process installed WHAT
# meanwhile, and otherwise removes the leftovers of builds that were killed before their cleanup ran.
lock_install_dir() {
  local dir="$1" what="$2" check="$3"
  command -v flock >/dev/null 2>&1 || return 0
  exec 9>"$dir/.install.lock"
  flock 9
  if "$check"; then
    log "$what installed by another process in $dir"
    exit 0
  fi
  rm -rf "$dir"/.build.*
}
