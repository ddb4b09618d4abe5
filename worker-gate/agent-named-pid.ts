import type { GateRun, TrackedPid } from './domain/gate-run.ts';
import { readProcessCwd, readProcessStat } from './process-table.ts';
import { insideDir } from './process-tracking.ts';
import { reopenRunCgroup } from './run-cgroups/index.ts';

/** Ancestors walked at most: a real process tree is far shallower, and the walk must end on a loop of reused pids. */
const MAX_ANCESTRY = 64;

export type NamedPidVerdict = { ok: true; process: TrackedPid } | { ok: false; reason: string };

/**
 * Whether a pid an agent names (`root_pid` of its event) is one of the run's own processes at this moment. A run with a
 * cgroup owns exactly its members: a process of the gate's user working in the project, but started elsewhere, is not
 * the run's. Without a cgroup the pid must exist, and either work inside the project directory or descend from the
 * dispatch script the gate started (its
 * parent chain reaches the script, or it is in the session the script was started in, which holds only its
 * descendants). Anything else would let an agent put any process of the gate's user, pid 1 included, on the list a
 * cancel kills.
 */
export function checkAgentNamedPid(pid: number, run: Pick<GateRun, 'project_dir' | 'dispatch_script' | 'cgroup'>, procRoot = '/proc'): NamedPidVerdict {
  const stat = readProcessStat(pid, procRoot);
  if (!stat) return { ok: false, reason: 'no such process' };
  const named = { pid: stat.pid, startTicks: stat.startTicks };
  if (run.cgroup) {
    if (reopenRunCgroup(run.cgroup).pids().includes(pid)) return { ok: true, process: named };
    return { ok: false, reason: "not a member of the run's cgroup" };
  }
  const cwd = readProcessCwd(pid, procRoot);
  if (cwd !== null && insideDir(run.project_dir)(cwd)) return { ok: true, process: named };
  const script = run.dispatch_script;
  if (script && stat.startTicks >= script.startTicks) {
    if (stat.session === script.pid) return { ok: true, process: named };
    let current: { pid: number; ppid: number; startTicks: number } | null = stat;
    for (let depth = 0; current && depth < MAX_ANCESTRY; depth += 1) {
      if (current.pid === script.pid && current.startTicks === script.startTicks) return { ok: true, process: named };
      if (current.ppid <= 1) break;
      current = readProcessStat(current.ppid, procRoot);
    }
  }
  return { ok: false, reason: 'neither working in the project nor started by the dispatch script' };
}
