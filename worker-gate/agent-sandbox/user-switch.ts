/**
 * `setpriv` switching to the agent's user and group with no supplementary groups and no capability it could carry over
 * exec: a gate given CAP_SETUID/CAP_SETGID as ambient capabilities (a systemd unit of a non-root gate) would otherwise
 * pass them on to the agent, since a switch between two non-root users keeps them.
 */
export function userSwitchArgv(setpriv: string, uid: number, gid: number): string[] {
  return [setpriv, `--reuid=${uid}`, `--regid=${gid}`, '--clear-groups', ...NO_CAPABILITIES_CARRIED, '--'];
}

const NO_CAPABILITIES_CARRIED = ['--inh-caps=-all', '--ambient-caps=-all'];

/** `setpriv` keeping the gate's user but dropping what would carry its capabilities over exec: no user switch possible. */
export function capabilityDropArgv(setpriv: string): string[] {
  return [setpriv, ...NO_CAPABILITIES_CARRIED, '--'];
}
