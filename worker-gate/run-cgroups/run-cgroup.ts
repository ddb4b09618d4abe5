import type { RunCgroupRecord } from '../domain/gate-run.ts';

export type { RunCgroupRecord } from '../domain/gate-run.ts';

/** One run's own cgroup: every process its first process starts stays in it, whatever session or directory it takes. */
export interface RunCgroup {
  readonly kind: 'v2' | 'v1';
  /** argv that moves itself into this cgroup, then execs the rest of the argv */
  joinArgv(): string[];
  /** every pid in the run's cgroup now (exact membership) */
  pids(): number[];
  /** CPU time used by the cgroup so far, microseconds; null when unreadable */
  cpuUsageUsec(): number | null;
  /** stops every process of the cgroup (v2 cgroup.kill; v1 freezer + SIGKILL) and waits until it is empty */
  kill(): Promise<{ killed: number }>;
  remove(): void;
  /** What the run's record keeps to reopen this cgroup, after a gate restart too. */
  record(): RunCgroupRecord;
}

/** Limits of one run's cgroup; null leaves that resource unlimited. */
export interface RunLimits {
  memoryBytes: number | null;
  pidsMax: number | null;
  /** Cores' worth of CPU time per period (0.5 = half a core). */
  cpuCores: number | null;
}

// Written with the shell's builtin echo, "0" names the writing process itself: the shell joins each hierarchy, then
// becomes the script, so the run's first process is inside its cgroup before it runs a single instruction of its own.
const JOIN_SCRIPT = 'while [ "$1" != -- ]; do echo 0 > "$1/cgroup.procs" || exit 125; shift; done; shift; exec "$@"';

/** The argv prefix that joins `paths` (one per hierarchy) and then runs what follows it. */
export function joinArgvFor(paths: readonly string[]): string[] {
  return ['/bin/sh', '-c', JOIN_SCRIPT, 'rcp-cgroup-join', ...paths, '--'];
}
