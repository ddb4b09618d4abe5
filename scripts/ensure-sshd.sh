#!/usr/bin/env bash
# Makes sure an OpenSSH server binary is installed at /usr/sbin/sshd, for the evidence-sync tests: they start
# their own sshd on a loopback port (test/support/sshd.ts). Installs Debian's openssh-server when it is missing,
# without leaving a system sshd listening on port 22.
set -euo pipefail

readonly SSHD=/usr/sbin/sshd
readonly POLICY=/usr/sbin/policy-rc.d

log() { echo "[sshd] $*"; }
fail() {
  echo "[sshd] ERROR: $*
  Install it by hand: sudo apt-get update && sudo apt-get install -y --no-install-recommends openssh-server
  (then stop the system service it may start: sudo service ssh stop), and re-run: bash scripts/ensure-sshd.sh" >&2
  exit 1
}

if [[ -x "$SSHD" ]]; then
  log "$SSHD is installed"
  exit 0
fi

log "$SSHD is missing; installing openssh-server (a minute or so)"

if [[ "$(id -u)" -eq 0 ]]; then
  as_root=()
elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
  as_root=(sudo -n)
else
  fail "$SSHD is missing and this user is not root and has no password-less sudo."
fi
command -v apt-get >/dev/null 2>&1 || fail "$SSHD is missing and apt-get is not available (not Debian/Ubuntu)."

# The package's postinst would start a system sshd on port 22: policy-rc.d answering 101 ("action forbidden")
# makes invoke-rc.d skip that start. An existing policy file is someone else's and is left as it is.
placed_policy=false
remove_policy() {
  if [[ "$placed_policy" == true ]]; then "${as_root[@]}" rm -f "$POLICY" || true; fi
}
trap remove_policy EXIT
if [[ ! -e "$POLICY" ]]; then
  printf '#!/bin/sh\n# Placed by scripts/ensure-sshd.sh while it installs openssh-server; removed afterwards.\nexit 101\n' \
    | "${as_root[@]}" tee "$POLICY" >/dev/null
  "${as_root[@]}" chmod 0755 "$POLICY"
  placed_policy=true
fi

install() {
  "${as_root[@]}" env DEBIAN_FRONTEND=noninteractive \
    apt-get install -y --no-install-recommends -o Dpkg::Options::=--force-confold openssh-server </dev/null
}

if ! install; then
  log "install failed; refreshing the package lists (apt-get update) and trying again"
  "${as_root[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update </dev/null || fail "apt-get update failed (output above)."
  install || fail "apt-get install openssh-server failed (output above)."
fi

# Where no policy file could be placed (or the init system ignored it), stop a system sshd the install started.
if command -v service >/dev/null 2>&1; then
  "${as_root[@]}" service ssh stop >/dev/null 2>&1 </dev/null || true
fi

[[ -x "$SSHD" ]] || fail "openssh-server was installed but $SSHD is still missing."
log "installed $("$SSHD" -V 2>&1 </dev/null | head -n 1 || echo openssh-server)"
