import { lstatSync, readlinkSync, realpathSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { sha256Hex } from '../../platform/http/tokens.ts';

/** This checkout: the launchers, the simulated agent and node_modules that agents' runs execute, bound read-only. */
export const REPO_ROOT = realpathSync(fileURLToPath(new URL('../..', import.meta.url)));

/** The system's read-only parts: bound where they are directories, recreated where they are links (merged /usr). */
export const SYSTEM_PATHS = ['/usr', '/bin', '/sbin', '/lib', '/lib32', '/lib64', '/libx32', '/etc'] as const;

/** Bound when present: the resolver's files /etc/resolv.conf may link to (systemd-resolved). */
export const OPTIONAL_SYSTEM_PATHS = ['/run/systemd/resolve'] as const;

export type SystemEntry = { kind: 'dir'; path: string } | { kind: 'link'; path: string; target: string };

/** How the host has each system path: a directory to bind, a link to recreate, or nothing. */
export function systemEntries(): SystemEntry[] {
  const entries: SystemEntry[] = [];
  for (const path of SYSTEM_PATHS) {
    try {
      const stat = lstatSync(path);
      if (stat.isSymbolicLink()) entries.push({ kind: 'link', path, target: readlinkSync(path) });
      else if (stat.isDirectory()) entries.push({ kind: 'dir', path });
    } catch {
      // not on this host
    }
  }
  return entries;
}

/** The directory of the Node binary this gate runs on (its real path): agents written in Node need it. */
export function nodeBinDir(): string {
  return dirname(realpathSync(process.execPath));
}

/** The real path of `path`, or its absolute form when it does not exist (yet). */
export function realOrResolved(path: string): string {
  try {
    return realpathSync(path);
  } catch {
    return resolve(path);
  }
}

/** Whether `path` is `dir` or lies below it, by whole path segments. */
export function isWithin(path: string, dir: string): boolean {
  return path === dir || path.startsWith(dir.endsWith('/') ? dir : `${dir}/`);
}

/** A project's key under state_dir: its path's hash, so that no name of the agent's choosing becomes a path of the gate's. */
export const projectKey = (projectDir: string) => sha256Hex(projectDir).slice(0, 16);
