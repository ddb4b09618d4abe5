import { resolve } from 'node:path';
import type { ProcessInfo } from './process-table.ts';
import type { GateRun } from './domain/gate-run.ts';
import { reopenRunCgroup } from './run-cgroups/run-cgroup-host.ts';

export interface KnownProcess {
  pid: number;
  startTicks: number;
}

export interface TrackingTarget {
  rootPid?: number;
  /** When given, the root pid counts only while its start time matches (a reused pid is another process). */
  rootStartTicks?: number;
  processGroupId?: number;
  projectDir: string;
  known: ReadonlyArray<KnownProcess>;
  /**
   * The pids in the run's own cgroup, when it has one: then these are exactly its processes, and the other rules
   * (which a process in a session of its own, outside the project, escapes) are not used.
   */
  cgroupPids?: readonly number[];
}

export interface TrackedProcesses {
  /** Tracked processes that have not exited, by pid. */
  alive: ProcessInfo[];
  rootAlive: boolean;
}

const DELETED_SUFFIX = ' (deleted)';

/**
 * The processes that belong to an agent run: its root, its process group, everything working inside the project
 * directory, the processes seen before (same pid and start time), and all their descendants. Zombies are not alive.
 */
export function findTrackedProcesses(table: ProcessInfo[], target: TrackingTarget): TrackedProcesses {
  const byPid = new Map(table.map((info) => [info.pid, info]));
  const root = findRoot(byPid, target);
  if (target.cgroupPids !== undefined) {
    const members = new Set(target.cgroupPids);
    const alive = table.filter((info) => members.has(info.pid) && isAlive(info)).sort((a, b) => a.pid - b.pid);
    return { alive, rootAlive: root !== null && members.has(root.pid) && isAlive(root) };
  }
  const inProject = insideDir(target.projectDir);
  const seeds = [
    ...(root ? [root] : []),
    ...processGroupMembers(table, target.processGroupId),
    ...table.filter((info) => info.cwd !== null && inProject(info.cwd)),
    ...stillKnown(byPid, target.known),
  ];
  const tracked = withDescendants(table, seeds);
  const alive = [...tracked.values()].filter(isAlive).sort((a, b) => a.pid - b.pid);
  return { alive, rootAlive: root !== null && isAlive(root) };
}

function findRoot(byPid: Map<number, ProcessInfo>, target: TrackingTarget): ProcessInfo | null {
  if (target.rootPid === undefined) return null;
  const candidate = byPid.get(target.rootPid);
  if (!candidate) return null;
  if (target.rootStartTicks !== undefined && candidate.startTicks !== target.rootStartTicks) return null;
  return candidate;
}

function processGroupMembers(table: ProcessInfo[], processGroupId: number | undefined): ProcessInfo[] {
  // pgrp 0 is the kernel's own threads, never an agent's group.
  if (processGroupId === undefined || processGroupId <= 0) return [];
  return table.filter((info) => info.pgrp === processGroupId);
}

function stillKnown(byPid: Map<number, ProcessInfo>, known: ReadonlyArray<KnownProcess>): ProcessInfo[] {
  const found: ProcessInfo[] = [];
  for (const { pid, startTicks } of known) {
    const info = byPid.get(pid);
    if (info && info.startTicks === startTicks) found.push(info);
  }
  return found;
}

function withDescendants(table: ProcessInfo[], seeds: ProcessInfo[]): Map<number, ProcessInfo> {
  const children = new Map<number, ProcessInfo[]>();
  for (const info of table) {
    const siblings = children.get(info.ppid);
    if (siblings) siblings.push(info);
    else children.set(info.ppid, [info]);
  }
  const tracked = new Map<number, ProcessInfo>();
  const queue = [...seeds];
  for (let next = queue.pop(); next !== undefined; next = queue.pop()) {
    if (tracked.has(next.pid)) continue;
    tracked.set(next.pid, next);
    queue.push(...(children.get(next.pid) ?? []));
  }
  return tracked;
}

function isAlive(info: ProcessInfo): boolean {
  return info.state !== 'Z';
}

/**
 * A test for "is `dir` or lies below it", by whole path segments (/p/proj-1 is not inside /p/proj).
 * A cwd whose directory was removed reads back as "<path> (deleted)"; it still counts as where the process works.
 */
export function insideDir(dir: string): (path: string) => boolean {
  const cleanDir = resolve(dir);
  const prefix = cleanDir.endsWith('/') ? cleanDir : `${cleanDir}/`;
  return (path) => {
    const cleanPath = resolve(path.endsWith(DELETED_SUFFIX) ? path.slice(0, -DELETED_SUFFIX.length) : path);
    return cleanPath === cleanDir || cleanPath.startsWith(prefix);
  };
}

/** What identifies a run's processes: its cgroup's members; without one, its root (with start time), process group, project and those seen. */
export function trackingTargetOf(run: GateRun): TrackingTarget {
  return {
    ...(run.root_pid !== null ? { rootPid: run.root_pid } : {}),
    ...(run.root_start_ticks !== null ? { rootStartTicks: run.root_start_ticks } : {}),
    ...(run.process_group_id !== null ? { processGroupId: run.process_group_id } : {}),
    projectDir: run.project_dir,
    known: run.known_pids,
    ...(run.cgroup ? { cgroupPids: reopenRunCgroup(run.cgroup).pids() } : {}),
  };
}
