#!/usr/bin/env bash
# Makes sure the unprivileged user the worker gate runs agents as (config agent_user, default rcp-agent) exists
# (docs/security.md#security-model). Only root creates users: as another user this says what the gate will do instead.
set -euo pipefail

readonly AGENT_USER="${RCP_AGENT_USER:-rcp-agent}"

log() { echo "[agent-user] $*"; }

if id -u "$AGENT_USER" >/dev/null 2>&1; then
  log "user $AGENT_USER exists (uid $(id -u "$AGENT_USER"))"
  exit 0
fi
if [[ "$(id -u)" -ne 0 ]]; then
  log "user $AGENT_USER does not exist, and only root can create it: a gate started by $(id -un) runs agents as $(id -un)"
  log "(sandboxed by bwrap where it is installed). To create it: sudo useradd --system --no-create-home --shell /usr/sbin/nologin $AGENT_USER"
  exit 0
fi
command -v useradd >/dev/null 2>&1 || { echo "[agent-user] ERROR: useradd is not available; create the user $AGENT_USER by hand" >&2; exit 1; }
log "creating the system user $AGENT_USER (no home, no login shell)"
useradd --system --no-create-home --shell /usr/sbin/nologin "$AGENT_USER"
log "user $AGENT_USER created (uid $(id -u "$AGENT_USER"))"
