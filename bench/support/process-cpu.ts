import { execFileSync } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';

/**
 * CPU time of groups of processes, from /proc (bench/fleet.ts). A snapshot reads every process's utime and stime, and
 * cutime and cstime: what its children that have exited and been reaped used. A group's CPU between two snapshots is
 * the growth of both over its members, so a child that lived and exited inside the window (a Postgres backend, an
 * agent) is counted through its parent, if the parent is a member.
 */

interface ProcessTimes {
  pid: number;
  ppid: number;
  comm: string;
  /** Clock ticks: its own, and its reaped children's. */
  own: number;
  children: number;
}

const TICKS_PER_SECOND = Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim()) || 100;

function readProcess(pid: number): ProcessTimes | undefined {
  let stat: string;
  try {
    stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  } catch {
    return undefined;
  }
  // comm is in parentheses and may hold spaces; the fields after it are space-separated.
  const close = stat.lastIndexOf(')');
  const comm = stat.slice(stat.indexOf('(') + 1, close);
  const fields = stat.slice(close + 2).split(' ');
  const field = (n: number) => Number(fields[n - 3]);
  return { pid, ppid: field(4), comm, own: field(14) + field(15), children: field(16) + field(17) };
}

export type Snapshot = Map<number, ProcessTimes>;

export function snapshot(): Snapshot {
  const processes: Snapshot = new Map();
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    const times = readProcess(Number(entry));
    if (times) processes.set(times.pid, times);
  }
  return processes;
}

/** The pids of `roots` and all their descendants in a snapshot. */
export function withDescendants(processes: Snapshot, roots: readonly number[]): Set<number> {
  const members = new Set(roots.filter((pid) => processes.has(pid)));
  let grew = true;
  while (grew) {
    grew = false;
    for (const process of processes.values()) {
      if (!members.has(process.pid) && members.has(process.ppid)) {
        members.add(process.pid);
        grew = true;
      }
    }
  }
  return members;
}

/** The pids whose command name is `comm` (e.g. every `postgres` process). */
export function byCommand(processes: Snapshot, comm: string): Set<number> {
  return new Set([...processes.values()].filter((process) => process.comm === comm).map((process) => process.pid));
}

/** CPU seconds the members used between two snapshots (members taken from either). */
export function cpuSeconds(before: Snapshot, after: Snapshot, members: ReadonlySet<number>): number {
  let ticks = 0;
  for (const pid of members) {
    const end = after.get(pid);
    const start = before.get(pid);
    if (!end) continue;
    ticks += end.own + end.children - (start ? start.own + start.children : 0);
  }
  return ticks / TICKS_PER_SECOND;
}
