import { spawn } from 'node:child_process';
import { closeSync, fstatSync, mkdirSync, openSync, writeFileSync, writeSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { Connection } from '@temporalio/client';
import { dyingWithThisProcess, killWithThisProcess, removePidFileIfOwned, signalGroup, stopStaleDevServer } from './dev-server-process.ts';
import { DevServerStartError, startupError } from './dev-server-startup-error.ts';
import { freePort, hostForUrl, isPortFree, splitAddress, tcpAccepts } from './local-ports.ts';

export { freePort } from './local-ports.ts';

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

/** How often a start is tried again when a port this process picked was taken before the server bound it. */
const PORT_RACE_ATTEMPTS = 3;

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
  killWithThisProcess(pid, pidFile, exited);

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

async function defaultUiPort(ip: string, port: number): Promise<number> {
  const conventional = port + 1000;
  return conventional <= 65535 && (await isPortFree(ip, conventional)) ? conventional : freePort(ip);
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
