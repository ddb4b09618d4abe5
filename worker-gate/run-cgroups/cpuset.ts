import { existsSync, mkdirSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { readCgroupFile, writeCgroupFile } from './cgroup-files.ts';

/**
 * CPU pinning of a run's cgroup (docs/worker-gate.md#slots-and-gpus): the cpuset controller, in the v1 cpuset hierarchy
 * or enabled in the v2 parent of the gate's runs.
 */

/** Where a run's cgroup can be pinned to CPUs, or why it cannot. */
export type CpusetSupport = { available: true; kind: 'v1' | 'v2'; parent: string } | { available: false; reason: string };

/** The CPUs of a kernel CPU list such as "0-3,8,10-11", ascending; [] for an empty or malformed list. */
export function parseCpuList(text: string): number[] {
  const cpus = new Set<number>();
  for (const part of text.trim().split(',')) {
    if (part === '') continue;
    const match = /^(\d+)(?:-(\d+))?$/.exec(part.trim());
    if (!match) return [];
    const first = Number(match[1]);
    const last = match[2] === undefined ? first : Number(match[2]);
    if (last < first || last - first > 65_536) return [];
    for (let cpu = first; cpu <= last; cpu += 1) cpus.add(cpu);
  }
  return [...cpus].sort((a, b) => a - b);
}

/** The kernel's CPU list form of `cpus`: ranges of consecutive CPUs joined, as in "0-2,5". */
export function formatCpuList(cpus: readonly number[]): string {
  const sorted = [...new Set(cpus)].sort((a, b) => a - b);
  const ranges: string[] = [];
  for (let i = 0; i < sorted.length; ) {
    let j = i;
    while (j + 1 < sorted.length && sorted[j + 1] === sorted[j]! + 1) j += 1;
    ranges.push(i === j ? String(sorted[i]) : `${sorted[i]}-${sorted[j]}`);
    i = j + 1;
  }
  return ranges.join(',');
}

const errorText = (error: unknown) => (error instanceof Error ? error.message : String(error));

/**
 * The parent of the gate's pinned runs in the v1 cpuset hierarchy, `<base>/<parentName>`. A new v1 cpuset cgroup has
 * no CPUs and no memory nodes, and takes no process until it has both, so the parent gets its own parent's.
 */
export function setUpV1Cpuset(base: string | null, parentName: string): CpusetSupport {
  if (base === null) return { available: false, reason: "the v1 cpuset hierarchy is not mounted, or not writable where the gate's cgroup is" };
  const parent = join(base, parentName);
  try {
    ensureV1CpusetParent(base, parent);
  } catch (error) {
    return { available: false, reason: `the v1 cpuset hierarchy refused the gate's cgroup ${parent}: ${errorText(error)}` };
  }
  return { available: true, kind: 'v1', parent };
}

/** Makes the v1 parent where it is missing (a gate of the same state_dir that stopped removes it) and fills its cpuset from its own parent. */
export function ensureV1CpusetParent(base: string, parent: string): void {
  if (!existsSync(parent)) mkdirSync(parent);
  for (const file of ['cpuset.cpus', 'cpuset.mems']) {
    if ((readCgroupFile(parent, file) ?? '').trim() === '') writeCgroupFile(parent, file, (readCgroupFile(base, file) ?? '').trim());
  }
}

/** The CPUs a run under `support`'s parent may be pinned to: the parent's effective cpuset. */
export function pinnableCpus(support: CpusetSupport): number[] {
  if (!support.available) return [];
  const files = support.kind === 'v1' ? ['cpuset.effective_cpus', 'cpuset.cpus'] : ['cpuset.cpus.effective', 'cpuset.cpus'];
  for (const file of files) {
    const cpus = parseCpuList(readCgroupFile(support.parent, file) ?? '');
    if (cpus.length > 0) return cpus;
  }
  return [];
}

/** Makes the run's v1 cpuset cgroup pinned to `cpus` (memory nodes as its parent's), ready for the run's first process. */
export function createV1CpusetCgroup(path: string, cpus: readonly number[]): void {
  const parent = dirname(path);
  ensureV1CpusetParent(dirname(parent), parent);
  mkdirSync(path);
  writeCgroupFile(path, 'cpuset.mems', (readCgroupFile(parent, 'cpuset.mems') ?? '').trim());
  writeCgroupFile(path, 'cpuset.cpus', formatCpuList(cpus));
}
