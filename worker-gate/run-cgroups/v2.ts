import { existsSync, mkdirSync } from 'node:fs';
import { dirname, join } from 'node:path';
import type { RunCgroupRecord } from '../domain/gate-run.ts';
import { killEach, pidsBelow, readCgroupFile, removeCgroupTree, waitUntilEmpty, writeCgroupFile, writeIfPresent } from './cgroup-files.ts';
import { formatCpuList } from './cpuset.ts';
import { joinArgvFor, type RunCgroup, type RunLimits } from './run-cgroup.ts';

/** cpu.max's period: the kernel's default, 100 ms. */
const CPU_PERIOD_USEC = 100_000;

/** A run's cgroup in the unified (v2) hierarchy: one directory. */
export class V2RunCgroup implements RunCgroup {
  readonly kind = 'v2' as const;

  readonly path: string;

  constructor(path: string) {
    this.path = path;
  }

  /**
   * Makes the cgroup and writes the limits its parent's controllers allow; returns the limits left unapplied. `cpus`
   * pins it (cpuset.cpus, which the parent's cpuset controller must offer); null leaves it unpinned.
   */
  static create(path: string, limits: RunLimits, cpus: readonly number[] | null = null): { cgroup: V2RunCgroup; unapplied: string[] } {
    mkdirSync(dirname(path), { recursive: true });
    mkdirSync(path);
    const unapplied: string[] = [];
    const set = (file: string, value: string) => {
      if (!writeIfPresent(path, file, value)) unapplied.push(file);
    };
    if (limits.memoryBytes !== null) {
      set('memory.max', String(limits.memoryBytes));
      // Without swap the limit is the run's whole footprint; a host without swap has no such file.
      writeIfPresent(path, 'memory.swap.max', '0');
    }
    if (limits.pidsMax !== null) set('pids.max', String(limits.pidsMax));
    if (limits.cpuCores !== null) set('cpu.max', `${Math.max(1000, Math.round(limits.cpuCores * CPU_PERIOD_USEC))} ${CPU_PERIOD_USEC}`);
    if (cpus !== null && !writeIfPresent(path, 'cpuset.cpus', formatCpuList(cpus))) {
      removeCgroupTree(path);
      throw new Error(`${path} has no cpuset.cpus: the cpuset controller is not enabled for it`);
    }
    return { cgroup: new V2RunCgroup(path), unapplied };
  }

  joinArgv(): string[] {
    return joinArgvFor([this.path]);
  }

  pids(): number[] {
    return pidsBelow(this.path);
  }

  cpuUsageUsec(): number | null {
    const match = /^usage_usec (\d+)$/m.exec(readCgroupFile(this.path, 'cpu.stat') ?? '');
    return match ? Number(match[1]) : null;
  }

  async kill(): Promise<{ killed: number }> {
    const before = this.pids();
    if (!existsSync(this.path)) return { killed: 0 };
    const hasKill = existsSync(join(this.path, 'cgroup.kill'));
    if (hasKill) writeCgroupFile(this.path, 'cgroup.kill', '1');
    else {
      // Before cgroup.kill (Linux 5.14): frozen processes cannot fork while each is killed.
      writeIfPresent(this.path, 'cgroup.freeze', '1');
      // Read again once frozen: a pid of the list before may have exited and been reused outside the run.
      killEach(this.pids());
    }
    const empty = await waitUntilEmpty(this.path, hasKill ? undefined : killEach);
    if (!empty) throw new Error(`cgroup ${this.path} still holds processes after SIGKILL`);
    return { killed: before.length };
  }

  remove(): void {
    removeCgroupTree(this.path);
  }

  record(): RunCgroupRecord {
    return { kind: 'v2', paths: [this.path] };
  }
}
