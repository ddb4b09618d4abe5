import { readFileSync } from 'node:fs';

export interface CgroupMount {
  /** Where the hierarchy's root (as this mount shows it) is mounted. */
  mountPoint: string;
  /** The cgroup this mount shows at its mount point ('/' unless a container mounted a subtree). */
  root: string;
  version: 1 | 2;
  /** v1: the controllers bound to the hierarchy. */
  controllers: string[];
}

const unescape = (field: string) => field.replace(/\\([0-7]{3})/g, (_, octal: string) => String.fromCharCode(parseInt(octal, 8)));

/** The cgroup file systems mounted here, from /proc/self/mountinfo. */
export function cgroupMounts(mountinfo = readFileSync('/proc/self/mountinfo', 'utf8')): CgroupMount[] {
  const mounts: CgroupMount[] = [];
  for (const line of mountinfo.split('\n')) {
    const [mine, theirs] = line.split(' - ');
    if (!mine || !theirs) continue;
    const fields = mine.split(' ');
    const [fsType, , superOptions = ''] = theirs.split(' ');
    if (fsType !== 'cgroup' && fsType !== 'cgroup2') continue;
    mounts.push({
      mountPoint: unescape(fields[4] ?? ''),
      root: unescape(fields[3] ?? '/'),
      version: fsType === 'cgroup2' ? 2 : 1,
      controllers: fsType === 'cgroup' ? superOptions.split(',').filter((option) => option !== 'rw' && option !== 'ro') : [],
    });
  }
  return mounts;
}

/** This process's cgroup in each hierarchy, from /proc/self/cgroup: v1 by controller name, v2 under ''. */
export function ownCgroups(text = readFileSync('/proc/self/cgroup', 'utf8')): Map<string, string> {
  const own = new Map<string, string>();
  for (const line of text.split('\n')) {
    const match = /^\d+:([^:]*):(.*)$/.exec(line);
    if (!match) continue;
    const [, controllers = '', path = '/'] = match;
    if (controllers === '') own.set('', path);
    for (const controller of controllers.split(',')) if (controller !== '') own.set(controller, path);
  }
  return own;
}

/** The directory of cgroup `path` under a mount, or null when the mount does not show it. */
export function directoryOf(mount: CgroupMount, path: string): string | null {
  const root = mount.root.endsWith('/') ? mount.root : `${mount.root}/`;
  if (path !== mount.root && !path.startsWith(root)) return null;
  const rest = path === mount.root ? '' : path.slice(root.length);
  return rest === '' ? mount.mountPoint : `${mount.mountPoint.replace(/\/$/, '')}/${rest}`;
}
