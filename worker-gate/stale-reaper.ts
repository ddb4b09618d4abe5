import { setTimeout as sleep } from 'node:timers/promises';
import { processStartedAtMs, readProcessStat, type ProcessInfo } from './process-table.ts';
import { insideDir } from './process-tracking.ts';

export interface StaleSelectionOptions {
  projectDir: string;
  nowMs: number;
  btimeSec: number;
  ticksPerSec: number;
  /** A process must be strictly older than this to be stale. */
  graceSec: number;
  /** Case-insensitive substrings of the command line that mark a leftover workload. */
  markers: string[];
  gpuPids: number[];
  cmdlineOf: (pid: number) => string[] | null;
  /** Never selected: the gate itself and its ancestors (the caller knows them). */
  excludePids: number[];
}

export interface Victim {
  pid: number;
  startTicks: number;
}

export type ReapOutcome = 'terminated' | 'killed' | 'gone' | 'skipped_pid_reused' | 'error';

export interface ReapResult {
  pid: number;
  outcome: ReapOutcome;
  error?: string;
}

export type KillFunction = (pid: number, signal: NodeJS.Signals) => unknown;

export interface ReapOptions {
  termGraceSec: number;
  procRoot?: string;
  kill?: KillFunction;
  /** How often to look whether a signalled process has gone. */
  pollIntervalMs?: number;
}

const DEFAULT_POLL_INTERVAL_MS = 100;
/** SIGKILL cannot be ignored, but a process in uninterruptible sleep dies only when its I/O returns. */
const KILL_CONFIRM_SEC = 2;

/**
 * Leftover processes of a project: working inside projectDir, older than graceSec, and either running a command
 * that matches a marker or holding a GPU context. Zombies are skipped (a signal cannot remove them).
 */
export function selectStaleProcesses(table: ProcessInfo[], options: StaleSelectionOptions): ProcessInfo[] {
  const inProject = insideDir(options.projectDir);
  const excluded = new Set(options.excludePids);
  const gpuPids = new Set(options.gpuPids);
  const markers = options.markers.map((marker) => marker.trim().toLowerCase()).filter((marker) => marker !== '');
  const graceMs = options.graceSec * 1000;
  return table.filter((info) => {
    if (excluded.has(info.pid) || info.state === 'Z') return false;
    if (info.cwd === null || !inProject(info.cwd)) return false;
    const ageMs = options.nowMs - processStartedAtMs(info.startTicks, options.btimeSec, options.ticksPerSec);
    if (ageMs <= graceMs) return false;
    return gpuPids.has(info.pid) || matchesMarker(info, markers, options.cmdlineOf);
  });
}

function matchesMarker(info: ProcessInfo, markers: string[], cmdlineOf: (pid: number) => string[] | null): boolean {
  if (markers.length === 0) return false;
  const argv = cmdlineOf(info.pid);
  const command = (argv && argv.length > 0 ? argv.join(' ') : info.comm).toLowerCase();
  return markers.some((marker) => command.includes(marker));
}

/** SIGTERM each victim, SIGKILL those still there after termGraceSec; a pid is signalled only while it names the same process. */
export async function reapProcesses(victims: Victim[], options: ReapOptions): Promise<ReapResult[]> {
  return Promise.all(victims.map((victim) => reapOne(victim, options)));
}

type Identity = 'same' | 'gone' | 'reused';

async function reapOne(victim: Victim, options: ReapOptions): Promise<ReapResult> {
  const { pid } = victim;
  const procRoot = options.procRoot ?? '/proc';
  const kill = options.kill ?? ((target: number, signal: NodeJS.Signals) => process.kill(target, signal));
  const pollMs = options.pollIntervalMs ?? DEFAULT_POLL_INTERVAL_MS;
  const identity = (): Identity => identify(victim, procRoot);

  const before = identity();
  if (before === 'gone') return { pid, outcome: 'gone' };
  if (before === 'reused') return { pid, outcome: 'skipped_pid_reused' };
  const termError = signal(kill, pid, 'SIGTERM');
  if (termError === 'gone') return { pid, outcome: 'gone' };
  if (termError) return { pid, outcome: 'error', error: `SIGTERM: ${termError}` };

  // The wait's last look at /proc is the check right before SIGKILL: false means the same process is still there.
  if (await waitUntilGone(identity, options.termGraceSec, pollMs)) return { pid, outcome: 'terminated' };
  const killError = signal(kill, pid, 'SIGKILL');
  if (killError === 'gone') return { pid, outcome: 'terminated' };
  if (killError) return { pid, outcome: 'error', error: `SIGKILL: ${killError}` };

  if (await waitUntilGone(identity, KILL_CONFIRM_SEC, pollMs)) return { pid, outcome: 'killed' };
  return { pid, outcome: 'error', error: `still present ${KILL_CONFIRM_SEC} s after SIGKILL` };
}

/** A zombie has exited already; only its parent's wait() is missing. */
function identify(victim: Victim, procRoot: string): Identity {
  const stat = readProcessStat(victim.pid, procRoot);
  if (!stat) return 'gone';
  if (stat.startTicks !== victim.startTicks) return 'reused';
  return stat.state === 'Z' ? 'gone' : 'same';
}

/** null when delivered, 'gone' when no such process, else the error text. */
function signal(kill: KillFunction, pid: number, name: NodeJS.Signals): string | null {
  try {
    kill(pid, name);
    return null;
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ESRCH') return 'gone';
    return error instanceof Error ? error.message : String(error);
  }
}

/** True once the process has exited (or its pid names another one); false if it is still there at the deadline. */
async function waitUntilGone(identity: () => Identity, seconds: number, pollMs: number): Promise<boolean> {
  const deadline = Date.now() + seconds * 1000;
  for (;;) {
    if (identity() !== 'same') return true;
    if (Date.now() >= deadline) return false;
    await sleep(Math.min(pollMs, Math.max(1, deadline - Date.now())));
  }
}
