#!/usr/bin/env bash
# Makes sure the Postgres named by TEST_DATABASE_URL accepts connections, starting the local
# Debian/Ubuntu cluster if it is down.
set -euo pipefail

readonly URL="${TEST_DATABASE_URL:-postgres://postgres@127.0.0.1:5432/test}"
readonly WAIT_SECONDS=30

log() { echo "[postgres] $*"; }

# postgres://user:pass@host:port/db?opts -> host and port (IPv6 hosts in brackets).
authority="${URL#*://}"
authority="${authority%%/*}"
authority="${authority%%\?*}"
authority="${authority##*@}"
if [[ "$authority" == \[* ]]; then
  host="${authority%%]*}"; host="${host#[}"
  rest="${authority#*]}"; port="${rest#:}"
else
  host="${authority%%:*}"
  port=""; [[ "$authority" == *:* ]] && port="${authority##*:}"
fi
host="${host:-127.0.0.1}"
port="${port:-5432}"

is_up() {
  if command -v pg_isready >/dev/null 2>&1; then
    pg_isready -q -h "$host" -p "$port" -t 1 </dev/null
  else
    timeout 2 bash -c "exec 3<>'/dev/tcp/$host/$port'" 2>/dev/null
  fi
}

if is_up; then
  log "up at $host:$port"
  exit 0
fi

log "not answering at $host:$port"
case "$host" in
  127.0.0.1 | localhost | ::1)
    if command -v pg_ctlcluster >/dev/null 2>&1 && [[ -d /etc/postgresql ]]; then
      version="$(ls /etc/postgresql | sort -V | tail -n 1)"
      if [[ -n "$version" ]]; then
        log "starting cluster $version/main with pg_ctlcluster"
        pg_ctlcluster --skip-systemctl-redirect "$version" main start </dev/null \
          || log "pg_ctlcluster exited non-zero (output above; it needs root or the postgres user); still waiting"
      fi
    fi
    ;;
esac

for ((i = 1; i <= WAIT_SECONDS; i++)); do
  if is_up; then
    log "up at $host:$port after ${i}s"
    exit 0
  fi
  (( i % 5 == 0 )) && log "waiting for $host:$port (${i}s/${WAIT_SECONDS}s)"
  sleep 1
done

echo "[postgres] ERROR: Postgres is not accepting connections at $host:$port after ${WAIT_SECONDS}s.
  Start it (e.g. sudo pg_ctlcluster <version> main start, or docker run -p 5432:5432 -e POSTGRES_HOST_AUTH_METHOD=trust postgres),
  or set TEST_DATABASE_URL=postgres://user@host:port/db to point the tests at a running server." >&2
exit 1
