import { execFileSync, spawnSync } from 'node:child_process';
import { accessSync, constants, readFileSync, realpathSync, statSync } from 'node:fs';
import { userInfo } from 'node:os';
import { delimiter, dirname, join, resolve } from 'node:path';
import type { AgentIsolation } from '../contract/agent-isolation.ts';
import { isWithin, nodeBinDir, realOrResolved, REPO_ROOT } from './sandbox-paths.ts';
import { userSwitchArgv } from './user-switch.ts';

export interface AgentUser {
  name: string;
  uid: number;
  gid: number;
}

/** What detection needs of the gate's config. */
export interface IsolationSettings {
  agent_user: string;
  agent_isolation: 'auto' | 'off';
  state_dir: string;
  project_root: string;
  dispatch_script_path?: string | undefined;
  agent_read_only_paths: readonly string[];
  agent_writable_paths: readonly string[];
}

/** What the gate found at start: the report, and what the argv builder needs. */
export interface IsolationCapabilities {
  report: AgentIsolation;
  /** The user agents switch to; null: they run as the gate's user. */
  user: AgentUser | null;
  /** bwrap's absolute path; null: agents start without a mount namespace. */
  bwrap: string | null;
  /** setpriv's absolute path when `user` is set, or when the gate holds ambient capabilities its agents must not keep. */
  setpriv: string | null;
}

const CAP_SETGID = 6n;
const CAP_SETUID = 7n;

/** Whether this process may change its uid and gid: root, or CAP_SETUID and CAP_SETGID in its effective set. */
export function canSwitchUsers(status = readFileSync('/proc/self/status', 'utf8')): boolean {
  const hex = /^CapEff:\s*([0-9a-f]+)$/im.exec(status)?.[1];
  if (hex === undefined) return process.getuid?.() === 0;
  const caps = BigInt(`0x${hex}`);
  return ((caps >> CAP_SETUID) & 1n) === 1n && ((caps >> CAP_SETGID) & 1n) === 1n;
}

/**
 * Whether this process, not being root, holds a capability an agent started as its user would keep across exec (an
 * ambient one, as a systemd unit grants them).
 */
export function holdsAmbientCapabilities(status = readFileSync('/proc/self/status', 'utf8')): boolean {
  const hex = /^CapAmb:\s*([0-9a-f]+)$/im.exec(status)?.[1];
  return process.getuid?.() !== 0 && hex !== undefined && BigInt(`0x${hex}`) !== 0n;
}

/** The user's uid and primary gid from the system's user database (getent, so NSS users count); null when unknown. */
export function lookUpUser(name: string): AgentUser | null {
  try {
    const line = execFileSync('getent', ['passwd', name], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'], timeout: 5000 }).trim();
    const [, , uid, gid] = line.split(':');
    if (uid === undefined || gid === undefined) return null;
    return { name, uid: Number(uid), gid: Number(gid) };
  } catch {
    return null;
  }
}

/** The first executable named `name` on `path`; null when there is none. */
export function findOnPath(name: string, path = process.env.PATH ?? ''): string | null {
  for (const dir of path.split(delimiter)) {
    if (!dir) continue;
    const candidate = join(dir, name);
    try {
      accessSync(candidate, constants.X_OK);
      if (statSync(candidate).isFile()) return candidate;
    } catch {
      // not here
    }
  }
  return null;
}

function mayEnter(path: string, user: AgentUser): boolean {
  const stat = statSync(path);
  if (user.uid === 0) return true;
  if (stat.uid === user.uid) return (stat.mode & 0o100) !== 0;
  if (stat.gid === user.gid) return (stat.mode & 0o010) !== 0;
  return (stat.mode & 0o001) !== 0;
}

/**
 * The first directory on the way to `path` that `user` may not enter (bwrap runs as that user and binds by path), or
 * null. `through` also checks `path` itself. Directories inside `gateOwned` (state_dir, project_root) are left out: the
 * gate opens the way through them itself (agent-dirs.ts).
 */
export function blockedOnTheWay(path: string, user: AgentUser, through: boolean, gateOwned: readonly string[] = []): string | null {
  const wanted = resolve(path);
  // Not there yet: the gate creates it, so the way to it is the way into its nearest existing parent.
  let existing = wanted;
  let real: string | null = null;
  while (real === null) {
    try {
      real = realpathSync(existing);
    } catch {
      if (existing === dirname(existing)) return null;
      existing = dirname(existing);
    }
  }
  const chain: string[] = [];
  for (let dir = through || existing !== wanted ? real : dirname(real); ; dir = dirname(dir)) {
    chain.unshift(dir);
    if (dir === dirname(dir)) break;
  }
  for (const dir of chain) {
    if (gateOwned.some((own) => isWithin(dir, own))) continue;
    try {
      if (statSync(dir).isDirectory() && !mayEnter(dir, user)) return dir;
    } catch {
      return dir;
    }
  }
  return null;
}

/** The paths an agent user must reach by path for the sandbox to bind them, each with what it is. */
function pathsTheAgentNeeds(settings: IsolationSettings): { path: string; what: string; through: boolean }[] {
  return [
    { path: resolve(settings.project_root), what: 'project_root', through: false },
    { path: resolve(settings.state_dir), what: 'state_dir', through: false },
    { path: REPO_ROOT, what: "the gate's code (the agents' launchers)", through: true },
    { path: nodeBinDir(), what: "Node's directory (the agents' launchers run on it)", through: true },
    ...(settings.dispatch_script_path ? [{ path: dirname(resolve(settings.dispatch_script_path)), what: 'dispatch_script_path', through: true }] : []),
    ...settings.agent_read_only_paths.map((path) => ({ path, what: 'agent_read_only_paths', through: true })),
    ...settings.agent_writable_paths.map((path) => ({ path, what: 'agent_writable_paths', through: true })),
  ];
}

function userSwitch(settings: IsolationSettings, gateUser: string): { user: AgentUser | null; setpriv: string | null; detail: string } {
  if (settings.agent_user === gateUser) return { user: null, setpriv: null, detail: `agent_user '${settings.agent_user}' is the gate's own user` };
  if (!canSwitchUsers()) return { user: null, setpriv: null, detail: `the gate (user ${gateUser}) is not root and lacks CAP_SETUID and CAP_SETGID` };
  const user = lookUpUser(settings.agent_user);
  if (!user) return { user: null, setpriv: null, detail: `agent_user '${settings.agent_user}' does not exist (scripts/ensure-agent-user.sh creates it)` };
  if (user.uid === 0) return { user: null, setpriv: null, detail: `agent_user '${settings.agent_user}' is root` };
  const setpriv = findOnPath('setpriv');
  if (!setpriv) return { user: null, setpriv: null, detail: 'setpriv (util-linux) is not on PATH' };
  const gateOwned = [realOrResolved(settings.state_dir), realOrResolved(settings.project_root)];
  for (const need of pathsTheAgentNeeds(settings)) {
    const blocked = blockedOnTheWay(need.path, user, need.through, gateOwned);
    if (blocked) return { user: null, setpriv: null, detail: `${settings.agent_user} cannot reach ${need.what} ${need.path}: ${blocked} is closed to it` };
  }
  return { user, setpriv, detail: `agents run as ${user.name} (uid ${user.uid}, gid ${user.gid})` };
}

function bwrapVersion(bwrap: string): string | null {
  const result = spawnSync(bwrap, ['--version'], { encoding: 'utf8', timeout: 5000 });
  return result.status === 0 ? result.stdout.trim().replace(/^bubblewrap\s+/, '') : null;
}

/** Tries bwrap once, as the user agents will run as: a kernel without unprivileged user namespaces fails here. */
function bwrapCheck(settings: IsolationSettings, user: AgentUser | null, setpriv: string | null): { path: string | null; version: string | null; detail: string } {
  if (settings.agent_isolation === 'off') return { path: null, version: null, detail: "agent_isolation is 'off'" };
  const bwrap = findOnPath('bwrap');
  if (!bwrap) return { path: null, version: null, detail: 'bwrap (bubblewrap) is not on PATH: apt-get install bubblewrap, or run scripts/ensure-bubblewrap.sh' };
  const version = bwrapVersion(bwrap);
  const asUser = user && setpriv ? userSwitchArgv(setpriv, user.uid, user.gid) : [];
  const argv = [...asUser, bwrap, '--ro-bind', '/', '/', 'true'];
  const tried = spawnSync(argv[0]!, argv.slice(1), { encoding: 'utf8', timeout: 10_000, cwd: '/' });
  if (tried.status !== 0) {
    const why = (tried.stderr || tried.error?.message || `exit ${String(tried.status)}`).trim().split('\n').at(-1);
    return { path: null, version, detail: `bwrap at ${bwrap} does not run here: ${why}` };
  }
  return { path: bwrap, version, detail: `bwrap ${version ?? ''} at ${bwrap}`.replace('  ', ' ') };
}

function summaryOf(mode: AgentIsolation['mode'], runsAs: string, userDetail: string, bwrapDetail: string): string {
  switch (mode) {
    case 'isolated':
      return `agents run as ${runsAs} in a bwrap sandbox that shows only their project, home, tools and the read-only system`;
    case 'sandboxed':
      return `agents run in a bwrap sandbox that shows only their project, home, tools and the read-only system, but as the gate's own user ${runsAs} (${userDetail})`;
    case 'user_only':
      return `agents run UNSANDBOXED as ${runsAs}: they can read whatever ${runsAs} can (${bwrapDetail})`;
    case 'unsandboxed':
      return `agents run UNSANDBOXED as the gate's own user ${runsAs}: they can read the gate's config and state (${bwrapDetail}; ${userDetail})`;
  }
}

/** Detects, once at the gate's start, what confinement its agents get (docs/security.md#security-model). */
export function detectIsolation(settings: IsolationSettings): IsolationCapabilities {
  const gateUser = userInfo().username;
  const switched = userSwitch(settings, gateUser);
  const bwrap = bwrapCheck(settings, switched.user, switched.setpriv);
  const sandboxed = bwrap.path !== null;
  const switches = switched.user !== null;
  const mode: AgentIsolation['mode'] = sandboxed ? (switches ? 'isolated' : 'sandboxed') : switches ? 'user_only' : 'unsandboxed';
  const runsAs = switched.user?.name ?? gateUser;
  return {
    user: switched.user,
    setpriv: switched.setpriv ?? (holdsAmbientCapabilities() ? findOnPath('setpriv') : null),
    bwrap: bwrap.path,
    report: {
      mode,
      sandboxed,
      agent_user: settings.agent_user,
      runs_as: runsAs,
      user_switch: { ok: switches, uid: switched.user?.uid ?? null, gid: switched.user?.gid ?? null, detail: switched.detail },
      bwrap: { ok: sandboxed, path: bwrap.path, version: bwrap.version, detail: bwrap.detail },
      summary: summaryOf(mode, runsAs, switched.detail, bwrap.detail),
    },
  };
}
