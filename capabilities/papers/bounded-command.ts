import { spawn } from 'node:child_process';

/**
 * Runs a program (rsync, for the evidence sync) with an argument array, never through a shell, in its own process
 * group: after its time is up, or when a line of its stdout says stop, the whole group is killed, so nothing it
 * started (an ssh still closing) outlives it.
 */

export interface CommandOutcome {
  exitCode: number | null;
  signal: NodeJS.Signals | null;
  timedOut: boolean;
  /** Stopped by onStdoutLine. */
  stopped: boolean;
  stderr: string;
  spawnError: string | null;
}

export interface BoundedCommandOptions {
  /** Handed to the child as its descriptor 3 (the pinned destination parent). */
  pinnedFd?: number;
  /** Each line of stdout; answering false stops the command (its whole group is killed). */
  onStdoutLine?: (line: string) => boolean;
}

const STDERR_TAIL_CHARS = 500;
/** After timeout_ms the process group gets SIGTERM, and SIGKILL this long after if it is still there. */
const KILL_GRACE_MS = 500;
/** The longest stdout line kept while waiting for its end: rsync's list lines are a path plus ~50 bytes. */
const MAX_STDOUT_LINE = 16 * 1024;

/** The end of a command's stderr, short enough for a report. */
export const stderrTail = (text: string) => {
  const trimmed = text.trim();
  return trimmed.length > STDERR_TAIL_CHARS ? `…${trimmed.slice(-STDERR_TAIL_CHARS)}` : trimmed;
};

/** Runs `program` in its own process group; after timeoutMs the whole group is killed. */
export function runBounded(program: string, args: string[], env: NodeJS.ProcessEnv, timeoutMs: number, options: BoundedCommandOptions = {}): Promise<CommandOutcome> {
  return new Promise((resolveOutcome) => {
    let stderr = '';
    let timedOut = false;
    let stopped = false;
    let spawnError: string | null = null;
    let signal: NodeJS.Signals | null = null;
    let settled = false;
    const stdio: ('ignore' | 'pipe' | number)[] = ['ignore', options.onStdoutLine ? 'pipe' : 'ignore', 'pipe'];
    if (options.pinnedFd !== undefined) stdio.push(options.pinnedFd);
    const child = spawn(program, args, { env, detached: true, stdio });
    child.stderr?.setEncoding('utf8').on('data', (chunk: string) => (stderr = (stderr + chunk).slice(-4 * STDERR_TAIL_CHARS)));
    const signalGroup = (signal: NodeJS.Signals) => {
      if (child.pid === undefined) return;
      try {
        process.kill(-child.pid, signal);
      } catch {
        // The group is gone already.
      }
    };
    const timers: NodeJS.Timeout[] = [];
    const onLine = options.onStdoutLine;
    if (onLine && child.stdout) {
      let pending = '';
      child.stdout.setEncoding('utf8').on('data', (chunk: string) => {
        if (stopped) return;
        const lines = (pending + chunk).split('\n');
        pending = lines.pop() ?? '';
        if (pending.length > MAX_STDOUT_LINE || !lines.every((line) => onLine(line))) {
          stopped = true;
          // SIGTERM first: rsync then removes the temporary file of the transfer it was in.
          signalGroup('SIGTERM');
          timers.push(setTimeout(() => signalGroup('SIGKILL'), KILL_GRACE_MS));
        }
      });
    }
    const finish = (exitCode: number | null) => {
      if (settled) return;
      settled = true;
      timers.forEach(clearTimeout);
      // After a timeout or a stop, nothing rsync started in its group (an ssh still closing) outlives the sync.
      if (timedOut || stopped) signalGroup('SIGKILL');
      resolveOutcome({ exitCode, signal, timedOut, stopped, stderr, spawnError });
    };
    timers.push(
      setTimeout(() => {
        timedOut = true;
        signalGroup('SIGTERM');
        timers.push(setTimeout(() => signalGroup('SIGKILL'), KILL_GRACE_MS));
        // Should the pipes never close (a grandchild that left the group holding them), stop waiting anyway.
        timers.push(setTimeout(() => finish(null), KILL_GRACE_MS + 1000));
      }, Math.min(Math.max(1, timeoutMs), 2_147_483_647)),
    );
    child.once('error', (error) => {
      spawnError = `${program} could not be started: ${error.message}`;
      finish(null);
    });
    child.once('close', (code, closedBy) => {
      signal = closedBy;
      finish(timedOut ? null : code);
    });
  });
}
