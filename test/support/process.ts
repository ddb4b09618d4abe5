import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { readProcessTable } from '../../worker-gate/process-table.ts';

const REPO_ROOT = fileURLToPath(new URL('../..', import.meta.url));

/** The Node arguments of `npm start` (its flags and entry point), with the entry point's path made absolute. */
export const START_COMMAND_ARGS: readonly string[] = (JSON.parse(readFileSync(join(REPO_ROOT, 'package.json'), 'utf8')) as { scripts: { start: string } }).scripts.start
  .split(/\s+/)
  .slice(1)
  .map((arg) => (/\.[jt]s$/.test(arg) ? join(REPO_ROOT, arg) : arg));

/** True while a process with this pid exists (signal 0 checks without signalling). */
export function isProcessAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/** True while the process exists and has not exited: a zombie (exited, not yet collected by its parent) counts as gone. */
export function isProcessRunning(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3) !== 'Z';
  } catch {
    return false;
  }
}

/**
 * SIGKILLs every process working in `dir` or below it (its cwd there): the detached agents a test's service dispatched,
 * which outlive the service by design, before the test removes the folder they work in.
 */
export function killProcessesWorkingIn(dir: string): void {
  for (const { pid, cwd } of readProcessTable()) {
    if (pid === process.pid || cwd === null || (cwd !== dir && !cwd.startsWith(`${dir}/`))) continue;
    try {
      process.kill(pid, 'SIGKILL');
    } catch {
      // Gone already.
    }
  }
}
