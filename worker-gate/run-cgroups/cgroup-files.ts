import { existsSync, readdirSync, readFileSync, rmdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { readProcessStat } from '../process-table.ts';

/** A cgroup file's text; null when it or its cgroup is gone or unreadable. */
export function readCgroupFile(dir: string, name: string): string | null {
  try {
    return readFileSync(join(dir, name), 'utf8');
  } catch {
    return null;
  }
}

export function writeCgroupFile(dir: string, name: string, value: string): void {
  writeFileSync(join(dir, name), value);
}

/** Writes the value when the file exists; false when the controller behind it is not there. */
export function writeIfPresent(dir: string, name: string, value: string): boolean {
  // cgroupfs refuses to create a file (EACCES), so a missing controller file is looked for first.
  if (!existsSync(join(dir, name))) return false;
  writeFileSync(join(dir, name), value);
  return true;
}

/** The child cgroups of `dir` (a cgroup's subdirectories), by path. */
export function childCgroups(dir: string): string[] {
  try {
    return readdirSync(dir, { withFileTypes: true })
      .filter((entry) => entry.isDirectory())
      .map((entry) => join(dir, entry.name));
  } catch {
    return [];
  }
}

/** Every pid in the cgroup and its descendants: a process that made a child cgroup is still the run's. */
export function pidsBelow(dir: string): number[] {
  const pids = new Set<number>();
  const queue = [dir];
  for (let next = queue.pop(); next !== undefined; next = queue.pop()) {
    const text = readCgroupFile(next, 'cgroup.procs');
    if (text === null) continue;
    for (const line of text.split('\n')) {
      const pid = Number(line);
      if (line !== '' && Number.isInteger(pid) && pid > 0) pids.add(pid);
    }
    queue.push(...childCgroups(next));
  }
  return [...pids].sort((a, b) => a - b);
}

/** Removes the cgroup and the ones below it, deepest first; a cgroup already gone is fine. */
export function removeCgroupTree(dir: string): void {
  for (const child of childCgroups(dir)) removeCgroupTree(child);
  try {
    rmdirSync(dir);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
  }
}

/** SIGKILL to each pid; one already gone is skipped. */
export function killEach(pids: readonly number[]): void {
  for (const pid of pids) {
    try {
      process.kill(pid, 'SIGKILL');
    } catch {
      // gone already
    }
  }
}

const EMPTY_WAIT_MS = 10_000;
const POLL_MS = 20;

/** Waits until no process is left below `dir`, doing `again` between looks; false when some remain at the deadline. */
export async function waitUntilEmpty(dir: string, again: (pids: number[]) => void = () => undefined): Promise<boolean> {
  const deadline = Date.now() + EMPTY_WAIT_MS;
  for (;;) {
    // A zombie has exited already; it holds no resources and its parent's wait() removes it.
    const left = pidsBelow(dir).filter((pid) => readProcessStat(pid)?.state !== 'Z');
    if (left.length === 0) return true;
    if (Date.now() >= deadline) return false;
    again(left);
    await sleep(POLL_MS);
  }
}
