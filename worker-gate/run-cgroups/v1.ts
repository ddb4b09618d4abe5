import { existsSync, mkdirSync } from 'node:fs';
import { basename, dirname } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import type { RunCgroupRecord } from '../domain/gate-run.ts';
import { killEach, pidsBelow, readCgroupFile, removeCgroupTree, waitUntilEmpty, writeCgroupFile } from './cgroup-files.ts';
import { createV1CpusetCgroup } from './cpuset.ts';
import { joinArgvFor, type RunCgroup, type RunLimits } from './run-cgroup.ts';

/** The v1 controllers a run's cgroup is made in: membership and stopping (freezer), limits and accounting. */
export const V1_CONTROLLERS = ['pids', 'memory', 'cpu', 'cpuacct', 'freezer'] as const;
export type V1Controller = (typeof V1_CONTROLLERS)[number];

const CPU_PERIOD_USEC = 100_000;
const FREEZE_WAIT_MS = 5_000;

/** Which hierarchy directory serves each controller (cpu and cpuacct are often one hierarchy). */
export type V1Paths = Partial<Record<V1Controller, string>>;

/**
 * A run's cgroup in the v1 hierarchies: one directory in each. The process joins every one of them, so each lists the
 * same members; the freezer's list is read.
 */
export class V1RunCgroup implements RunCgroup {
  readonly kind = 'v1' as const;

  readonly paths: readonly string[];

  constructor(paths: readonly string[]) {
    this.paths = paths;
  }

  /** `pinned`: the run's directory in the cpuset hierarchy and the CPUs it is pinned to; null leaves the run unpinned. */
  static create(byController: V1Paths, limits: RunLimits, pinned: { path: string; cpus: readonly number[] } | null = null): V1RunCgroup {
    const paths = [...new Set(Object.values(byController))];
    for (const path of paths) {
      // The parent may have been removed by a gate that stopped meanwhile with this one's state_dir.
      mkdirSync(dirname(path), { recursive: true });
      mkdirSync(path);
    }
    if (pinned) {
      try {
        createV1CpusetCgroup(pinned.path, pinned.cpus);
      } catch (error) {
        for (const path of paths) removeCgroupTree(path);
        throw error;
      }
      paths.push(pinned.path);
    }
    const at = (controller: V1Controller) => byController[controller];
    if (limits.memoryBytes !== null && at('memory')) {
      writeCgroupFile(at('memory')!, 'memory.limit_in_bytes', String(limits.memoryBytes));
      // memsw exists only with swap accounting; without it there is no swap to escape to either.
      if (existsSync(`${at('memory')}/memory.memsw.limit_in_bytes`)) writeCgroupFile(at('memory')!, 'memory.memsw.limit_in_bytes', String(limits.memoryBytes));
    }
    if (limits.pidsMax !== null && at('pids')) writeCgroupFile(at('pids')!, 'pids.max', String(limits.pidsMax));
    if (limits.cpuCores !== null && at('cpu')) {
      writeCgroupFile(at('cpu')!, 'cpu.cfs_period_us', String(CPU_PERIOD_USEC));
      writeCgroupFile(at('cpu')!, 'cpu.cfs_quota_us', String(Math.max(1000, Math.round(limits.cpuCores * CPU_PERIOD_USEC))));
    }
    return new V1RunCgroup(paths);
  }

  private find(file: string): string | undefined {
    return this.paths.find((path) => existsSync(`${path}/${file}`));
  }

  private membershipPath(): string {
    return this.find('freezer.state') ?? this.paths[0]!;
  }

  joinArgv(): string[] {
    return joinArgvFor(this.paths);
  }

  pids(): number[] {
    return pidsBelow(this.membershipPath());
  }

  cpuUsageUsec(): number | null {
    const path = this.find('cpuacct.usage');
    const text = path ? readCgroupFile(path, 'cpuacct.usage') : null;
    return text === null ? null : Math.floor(Number(text.trim()) / 1000);
  }

  /** Freezes the cgroup (no process can fork while the others are killed), SIGKILLs every member, thaws it. */
  async kill(): Promise<{ killed: number }> {
    const membership = this.membershipPath();
    const before = this.pids();
    if (!existsSync(membership)) return { killed: 0 };
    const freezer = this.find('freezer.state');
    if (freezer) {
      writeCgroupFile(freezer, 'freezer.state', 'FROZEN');
      const deadline = Date.now() + FREEZE_WAIT_MS;
      while ((readCgroupFile(freezer, 'freezer.state') ?? '').trim() === 'FREEZING' && Date.now() < deadline) await sleep(10);
    }
    killEach(this.pids());
    if (freezer) writeCgroupFile(freezer, 'freezer.state', 'THAWED');
    const empty = await waitUntilEmpty(membership, killEach);
    if (!empty) throw new Error(`cgroup ${basename(membership)} still holds processes after SIGKILL`);
    return { killed: before.length };
  }

  remove(): void {
    for (const path of this.paths) removeCgroupTree(path);
  }

  record(): RunCgroupRecord {
    return { kind: 'v1', paths: [...this.paths] };
  }
}
