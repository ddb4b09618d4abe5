import { spawnSync } from 'node:child_process';
import { readFileSync, rmSync } from 'node:fs';

/**
 * The dev server's process: started in a group that dies with this process (the kernel's parent-death signal, an
 * exit hook), signalled as a group, and its pid file, through which a later start stops a server a crashed parent left.
 */

/** Servers started by this process and not yet gone, with their pid files: the exit hook's list. */
const killOnExit = new Map<number, string | undefined>();

/**
 * However this process exits (process.exit on a shutdown deadline or a second signal, an uncaught exception), a dev
 * server it started must not outlive it holding its ports and database. Only synchronous work is possible here.
 */
process.on('exit', () => {
  for (const [pid, pidFile] of killOnExit) {
    signalGroup(pid, 'SIGKILL');
    if (pidFile !== undefined) removePidFileIfOwned(pidFile, pid);
  }
});

/** Kills the server's group however this process exits, until the server itself has exited. */
export function killWithThisProcess(pid: number, pidFile: string | undefined, exited: Promise<void>): void {
  killOnExit.set(pid, pidFile);
  void exited.then(() => killOnExit.delete(pid));
}

let pdeathsigSupported: boolean | undefined;

/**
 * On Linux, util-linux's setpriv asks the kernel to send the server SIGTERM when this process dies, which also covers
 * the deaths no exit hook sees (SIGKILL, the OOM killer). setpriv execs the server, so the pid stays the server's. The
 * kernel ties this to the thread that spawned the server, which for us is always Node's main thread. Without setpriv
 * the exit hook and the pid file check at the next start remain.
 */
export function dyingWithThisProcess(binaryPath: string, args: string[]): [string, string[]] {
  if (process.platform !== 'linux') return [binaryPath, args];
  pdeathsigSupported ??= spawnSync('setpriv', ['--pdeathsig', 'TERM', '--', 'true'], { stdio: 'ignore' }).status === 0;
  return pdeathsigSupported ? ['setpriv', ['--pdeathsig', 'TERM', '--', binaryPath, ...args]] : [binaryPath, args];
}

/**
 * A control plane that was SIGKILLed leaves its detached dev server running, still holding
 * the SQLite file and the port. Stop it if the pidFile names a live `start-dev` process for
 * the same database; anything else (reused pid, other server) is left alone.
 */
export async function stopStaleDevServer(
  pidFile: string,
  dbFile: string | undefined,
  progress: (msg: string) => void,
): Promise<void> {
  let pid: number;
  try {
    pid = Number.parseInt(readFileSync(pidFile, 'utf8').trim(), 10);
  } catch {
    return;
  }
  if (Number.isInteger(pid) && pid > 0 && isAlive(pid) && isDevServerFor(pid, dbFile)) {
    progress(`stopping stale Temporal dev server (pid ${pid}) left by a previous run`);
    signalGroup(pid, 'SIGTERM');
    if (!(await waitUntilDead(pid, 10_000))) {
      signalGroup(pid, 'SIGKILL');
      if (!(await waitUntilDead(pid, 5_000))) {
        throw new Error(`stale Temporal dev server (pid ${pid}, from ${pidFile}) did not exit after SIGKILL`);
      }
    }
  }
  rmSync(pidFile, { force: true });
}

function isDevServerFor(pid: number, dbFile: string | undefined): boolean {
  let argv: string[];
  try {
    argv = readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0');
  } catch {
    return false;
  }
  if (!argv.includes('start-dev')) return false;
  const dbIndex = argv.indexOf('--db-filename');
  const recordedDb = dbIndex >= 0 ? argv[dbIndex + 1] : argv.find((a) => a.startsWith('--db-filename='))?.slice(14);
  return recordedDb === dbFile;
}

/** Alive and not a zombie (a killed child stays in the table until its parent reaps it). */
function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3) !== 'Z';
  } catch {
    return true;
  }
}

async function waitUntilDead(pid: number, timeoutMs: number): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  while (isAlive(pid)) {
    if (Date.now() >= deadline) return false;
    await sleep(100);
  }
  return true;
}

export function signalGroup(pid: number, signal: NodeJS.Signals): void {
  try {
    process.kill(-pid, signal);
  } catch {
    // Not a group leader (or already gone): fall back to the process itself.
    try {
      process.kill(pid, signal);
    } catch {
      // Already gone.
    }
  }
}

export function removePidFileIfOwned(pidFile: string, pid: number): void {
  try {
    if (readFileSync(pidFile, 'utf8').trim() === String(pid)) rmSync(pidFile, { force: true });
  } catch {
    // Already removed.
  }
}

function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}
