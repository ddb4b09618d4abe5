import { spawn, spawnSync } from 'node:child_process';
import { closeSync, fstatSync, mkdirSync, openSync, readSync, readFileSync, rmSync, writeFileSync, writeSync } from 'node:fs';
import { createConnection, createServer } from 'node:net';
import { dirname, resolve } from 'node:path';
import { Connection } from '@temporalio/client';

export interface TemporalDevServerOptions {
  binaryPath: string;
  /** SQLite file for persistent state; omit for an in-memory server. */
  dbFile?: string;
  /** Frontend bind address; default 127.0.0.1. */
  ip?: string;
  /** Frontend gRPC port; default 7233 if free, else a free ephemeral port. */
  port?: number;
  /** Web UI port; default port + 1000 if free, else a free ephemeral port. Ignored when headless. */
  uiPort?: number;
  headless?: boolean;
  /** Namespace to register at launch and to wait for ('default' always exists too). */
  namespace: string;
  /** Server stdout/stderr are appended here. */
  logFile: string;
  /** Records the server pid so a later start can stop a server orphaned by a crashed parent. */
  pidFile?: string;
  /** Default 60000. */
  startupTimeoutMs?: number;
  onProgress?: (msg: string) => void;
}

export interface TemporalDevServer {
  address: string;
  uiUrl?: string;
  pid: number;
  /** SIGTERM, then SIGKILL after timeoutMs (default 10000); resolves once the process is gone. */
  stop(timeoutMs?: number): Promise<void>;
}

const DEFAULT_PORT = 7233;
const LOG_TAIL_LINES = 20;

/** How often a start is tried again when a port this process picked was taken before the server bound it. */
const PORT_RACE_ATTEMPTS = 3;

/** A start that failed; takenPort when its log says that port was already in use when the server bound it. */
export class DevServerStartError extends Error {
  readonly takenPort: number | undefined;

  constructor(message: string, takenPort: number | undefined) {
    super(message);
    this.name = 'DevServerStartError';
    this.takenPort = takenPort;
  }
}

/**
 * Starts the dev server. A port picked for it is only known to be free when it is picked: another process may bind
 * it before the server does. That holds for the ports picked here (none given) and for the internal ports the server
 * picks itself for its history, matching and worker services and its membership: losing one of those, it logs the
 * failed listen as an error and goes on into a panic whose stack trace fills the log's tail. Such a start names the
 * port "already in use" somewhere in its log and is tried again, on newly picked ports where this function picked
 * them; a start that lost a port the caller gave fails at once, since that port is never replaced.
 */
export async function startTemporalDevServer(opts: TemporalDevServerOptions): Promise<TemporalDevServer> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await startOnce(opts);
    } catch (error) {
      const givenPorts = [opts.port, opts.uiPort];
      const racedForPort = error instanceof DevServerStartError && error.takenPort !== undefined && !givenPorts.includes(error.takenPort);
      if (!racedForPort || attempt >= PORT_RACE_ATTEMPTS) throw error;
      opts.onProgress?.('a port picked for the Temporal dev server was taken before it bound it; starting again');
    }
  }
}

async function startOnce(opts: TemporalDevServerOptions): Promise<TemporalDevServer> {
  const progress = opts.onProgress ?? (() => {});
  const ip = opts.ip ?? '127.0.0.1';
  // Absolute so the pidFile check can compare it against the recorded command line.
  const dbFile = opts.dbFile === undefined ? undefined : resolve(opts.dbFile);
  const logFile = resolve(opts.logFile);
  const pidFile = opts.pidFile === undefined ? undefined : resolve(opts.pidFile);
  const startupTimeoutMs = opts.startupTimeoutMs ?? 60_000;

  if (dbFile !== undefined) mkdirSync(dirname(dbFile), { recursive: true });
  mkdirSync(dirname(logFile), { recursive: true });
  if (pidFile !== undefined) {
    mkdirSync(dirname(pidFile), { recursive: true });
    await stopStaleDevServer(pidFile, dbFile, progress);
  }

  const port = opts.port ?? ((await isPortFree(ip, DEFAULT_PORT)) ? DEFAULT_PORT : await freePort(ip));
  const uiPort = opts.headless ? undefined : (opts.uiPort ?? (await defaultUiPort(ip, port)));
  const address = `${hostForUrl(ip)}:${port}`;
  const uiUrl = uiPort === undefined ? undefined : `http://${hostForUrl(ip)}:${uiPort}`;
  const args = devServerArgs({ ip, port, uiPort, dbFile, namespace: opts.namespace });

  progress(`starting Temporal dev server on ${address} (${dbFile ?? 'in-memory'}), log: ${logFile}`);
  const startedAt = Date.now();
  const logFd = openSync(logFile, 'a');
  const attemptLogStart = fstatSync(logFd).size;
  writeSync(logFd, `\n=== ${new Date().toISOString()} ${opts.binaryPath} ${args.join(' ')}\n`);
  // detached: own process group, so a terminal Ctrl-C reaches only us and we can stop our
  // workers before the server goes away.
  const [command, commandArgs] = dyingWithThisProcess(opts.binaryPath, args);
  const child = spawn(command, commandArgs, { detached: true, stdio: ['ignore', logFd, logFd] });
  closeSync(logFd);
  // The server is stopped explicitly; it must not keep the Node event loop alive on its own.
  child.unref();

  let exitReason: string | undefined;
  const exited = new Promise<void>((resolveExit) => {
    child.once('exit', (code, signal) => {
      exitReason = signal !== null ? `was killed by ${signal}` : `exited with code ${code}`;
      resolveExit();
    });
    child.once('error', (err) => {
      exitReason = `could not be started: ${err.message}`;
      resolveExit();
    });
  });

  const pid = child.pid;
  if (pid === undefined) {
    await exited;
    throw startupError(`Temporal dev server (${opts.binaryPath}) ${exitReason ?? 'did not start'}`, logFile, attemptLogStart);
  }
  if (pidFile !== undefined) writeFileSync(pidFile, `${pid}\n`);
  killOnExit.set(pid, pidFile);
  void exited.then(() => killOnExit.delete(pid));

  let stopping: Promise<void> | undefined;
  const stop = (timeoutMs = 10_000): Promise<void> => {
    stopping ??= (async () => {
      if (exitReason === undefined) {
        signalGroup(pid, 'SIGTERM');
        if (!(await settlesWithin(exited, timeoutMs))) {
          signalGroup(pid, 'SIGKILL');
          await exited;
        }
      }
      if (pidFile !== undefined) removePidFileIfOwned(pidFile, pid);
    })();
    return stopping;
  };

  try {
    await waitUntilAnswering({
      address,
      namespace: opts.namespace,
      deadline: startedAt + startupTimeoutMs,
      exited,
      exitReason: () => exitReason,
    });
  } catch (err) {
    await stop();
    const reason = err instanceof Error ? err.message : String(err);
    throw startupError(`Temporal dev server (pid ${pid}, ${address}) ${reason}`, logFile, attemptLogStart);
  }
  progress(`Temporal dev server answering at ${address} after ${Date.now() - startedAt} ms (pid ${pid})`);
  return { address, ...(uiUrl === undefined ? {} : { uiUrl }), pid, stop };
}

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

let pdeathsigSupported: boolean | undefined;

/**
 * On Linux, util-linux's setpriv asks the kernel to send the server SIGTERM when this process dies, which also covers
 * the deaths no exit hook sees (SIGKILL, the OOM killer). setpriv execs the server, so the pid stays the server's. The
 * kernel ties this to the thread that spawned the server, which for us is always Node's main thread. Without setpriv
 * the exit hook and the pid file check at the next start remain.
 */
function dyingWithThisProcess(binaryPath: string, args: string[]): [string, string[]] {
  if (process.platform !== 'linux') return [binaryPath, args];
  pdeathsigSupported ??= spawnSync('setpriv', ['--pdeathsig', 'TERM', '--', 'true'], { stdio: 'ignore' }).status === 0;
  return pdeathsigSupported ? ['setpriv', ['--pdeathsig', 'TERM', '--', binaryPath, ...args]] : [binaryPath, args];
}

function devServerArgs(o: {
  ip: string;
  port: number;
  uiPort: number | undefined;
  dbFile: string | undefined;
  namespace: string;
}): string[] {
  // Metrics, HTTP API and the internal history/matching/worker services take ports the CLI picks
  // itself in this version; only the frontend and UI ports are chosen here.
  const args = ['server', 'start-dev', '--ip', o.ip, '--port', String(o.port)];
  // 'default' is always created; naming it again would register it twice.
  if (o.namespace !== 'default') args.push('--namespace', o.namespace);
  args.push(...(o.uiPort === undefined ? ['--headless'] : ['--ui-port', String(o.uiPort)]));
  if (o.dbFile !== undefined) args.push('--db-filename', o.dbFile);
  // An activity scheduled by a workflow task goes back to the same worker in the task's answer, sparing a poll round
  // trip per activity (the run's preflight, prepare and dispatch). Off by default in the server.
  args.push('--dynamic-config-value', 'system.enableActivityEagerExecution=true');
  args.push('--log-level', 'warn');
  return args;
}

async function waitUntilAnswering(o: {
  address: string;
  namespace: string;
  deadline: number;
  exited: Promise<void>;
  exitReason: () => string | undefined;
}): Promise<void> {
  const [host, port] = splitAddress(o.address);
  let lastError = 'no answer yet';
  for (;;) {
    const exit = o.exitReason();
    if (exit !== undefined) throw new Error(`${exit} before it answered`);
    const remaining = o.deadline - Date.now();
    if (remaining <= 0) throw new Error(`did not answer within the startup timeout (last error: ${lastError})`);

    // A plain TCP probe first: gRPC connects back off for up to a second after a refusal,
    // which would add that much to every start.
    if (await tcpAccepts(host, port, Math.min(500, remaining))) {
      const attempt = describeNamespace(o.address, o.namespace, Math.min(5_000, remaining)).then(
        () => true,
        (err: unknown) => {
          lastError = err instanceof Error ? err.message : String(err);
          return false;
        },
      );
      // Something else may hold the port; the child's exit must not wait out the attempt.
      if (await Promise.race([attempt, o.exited.then(() => false)])) return;
    } else {
      lastError = `nothing listening on ${o.address}`;
    }
    await sleep(100);
  }
}

async function describeNamespace(address: string, namespace: string, timeoutMs: number): Promise<void> {
  // lazy + ensureConnected rather than connect(): a failed connect() leaves no handle to close.
  const connection = Connection.lazy({ address, connectTimeout: timeoutMs });
  try {
    await connection.ensureConnected();
    await connection.withDeadline(Date.now() + timeoutMs, () =>
      connection.workflowService.describeNamespace({ namespace }),
    );
  } finally {
    await connection.close();
  }
}

/**
 * A control plane that was SIGKILLed leaves its detached dev server running, still holding
 * the SQLite file and the port. Stop it if the pidFile names a live `start-dev` process for
 * the same database; anything else (reused pid, other server) is left alone.
 */
async function stopStaleDevServer(
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

function signalGroup(pid: number, signal: NodeJS.Signals): void {
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

function removePidFileIfOwned(pidFile: string, pid: number): void {
  try {
    if (readFileSync(pidFile, 'utf8').trim() === String(pid)) rmSync(pidFile, { force: true });
  } catch {
    // Already removed.
  }
}

/** The line that says why a start failed: a Go panic's first line, or the CLI's error line. */
const CAUSE_LINE = /^(?:panic: .*|.*\blevel=ERROR\b.*)$/m;
const TAKEN_PORT = /listen tcp \S*:(\d+): bind: address already in use/i;

/**
 * The error names the cause from this attempt's part of the log (a panic's cause is at its top, above a stack trace
 * longer than the tail) and quotes the log's last lines.
 */
function startupError(message: string, logFile: string, attemptLogStart: number): DevServerStartError {
  let attemptLog: string;
  try {
    attemptLog = readAttemptLog(logFile, attemptLogStart);
  } catch (err) {
    attemptLog = `(could not read log: ${err instanceof Error ? err.message : String(err)})`;
  }
  const cause = CAUSE_LINE.exec(attemptLog)?.[0];
  const tail = attemptLog.split('\n').filter((l) => l.trim() !== '').slice(-LOG_TAIL_LINES).join('\n');
  return new DevServerStartError(
    `${message}${cause === undefined ? '' : `: ${cause}`}\n--- last ${LOG_TAIL_LINES} lines of ${logFile} ---\n${tail}`,
    takenPortIn(attemptLog),
  );
}

/** The log is appended to by every start: only this attempt's part is read, and at most ATTEMPT_LOG_MAX_BYTES of it. */
const ATTEMPT_LOG_MAX_BYTES = 4 * 1024 * 1024;

function readAttemptLog(logFile: string, attemptLogStart: number): string {
  const fd = openSync(logFile, 'r');
  try {
    const length = Math.max(0, Math.min(fstatSync(fd).size - attemptLogStart, ATTEMPT_LOG_MAX_BYTES));
    const buffer = Buffer.alloc(length);
    const read = readSync(fd, buffer, 0, length, attemptLogStart);
    return buffer.subarray(0, read).toString('utf8');
  } finally {
    closeSync(fd);
  }
}

function takenPortIn(attemptLog: string): number | undefined {
  const port = TAKEN_PORT.exec(attemptLog)?.[1];
  return port === undefined ? undefined : Number(port);
}

async function defaultUiPort(ip: string, port: number): Promise<number> {
  const conventional = port + 1000;
  return conventional <= 65535 && (await isPortFree(ip, conventional)) ? conventional : freePort(ip);
}

function isPortFree(host: string, port: number): Promise<boolean> {
  return new Promise((resolveFree) => {
    const server = createServer();
    server.once('error', () => resolveFree(false));
    server.listen({ host, port, exclusive: true }, () => server.close(() => resolveFree(true)));
  });
}

/** A port the OS considers free right now; the server binds it moments later. */
export function freePort(host = '127.0.0.1'): Promise<number> {
  return new Promise((resolvePort, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen({ host, port: 0, exclusive: true }, () => {
      const addr = server.address();
      const port = typeof addr === 'object' && addr !== null ? addr.port : 0;
      server.close(() => (port > 0 ? resolvePort(port) : reject(new Error('no ephemeral port assigned'))));
    });
  });
}

function tcpAccepts(host: string, port: number, timeoutMs: number): Promise<boolean> {
  return new Promise((resolveProbe) => {
    const socket = createConnection({ host, port });
    const done = (ok: boolean) => {
      socket.destroy();
      resolveProbe(ok);
    };
    socket.setTimeout(timeoutMs, () => done(false));
    socket.once('connect', () => done(true));
    socket.once('error', () => done(false));
  });
}

async function settlesWithin(promise: Promise<void>, timeoutMs: number): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  const timedOut = new Promise<boolean>((r) => {
    timer = setTimeout(() => r(false), timeoutMs);
  });
  try {
    return await Promise.race([promise.then(() => true), timedOut]);
  } finally {
    clearTimeout(timer);
  }
}

function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}

function hostForUrl(ip: string): string {
  return ip.includes(':') ? `[${ip}]` : ip;
}

function splitAddress(address: string): [string, number] {
  const colon = address.lastIndexOf(':');
  return [address.slice(0, colon).replace(/^\[|\]$/g, ''), Number(address.slice(colon + 1))];
}
