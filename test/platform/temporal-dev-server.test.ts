import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import type { Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Connection } from '@temporalio/client';
import { afterAll, describe, expect, it } from 'vitest';
import { locateTemporalCli, temporalCliInstallHint } from '../../platform/temporal/temporal-cli.ts';
import { startTemporalDevServer } from '../../platform/temporal/temporal-dev-server.ts';
import { testPort } from '../support/ports.ts';
import type { TemporalDevServer, TemporalDevServerOptions } from '../../platform/temporal/temporal-dev-server.ts';
import { isProcessAlive, isProcessRunning } from '../support/process.ts';
import { acceptsConnections } from '../support/raw-socket.ts';

// expected duration: ~12 s

const NAMESPACE = 'rcp-test';
const workDir = mkdtempSync(join(tmpdir(), 'rcp-temporal-dev-server-'));
const started: TemporalDevServer[] = [];

afterAll(async () => {
  await Promise.all(started.map((server) => server.stop(5_000)));
  rmSync(workDir, { recursive: true, force: true });
});

/** A missing CLI is a failure with the install hint, never a skip. */
function requireBinary(): string {
  const binaryPath = locateTemporalCli();
  if (binaryPath === undefined) throw new Error(temporalCliInstallHint());
  return binaryPath;
}

async function start(overrides: Partial<TemporalDevServerOptions>): Promise<TemporalDevServer> {
  const server = await startTemporalDevServer({
    binaryPath: requireBinary(),
    namespace: NAMESPACE,
    logFile: join(workDir, 'logs', 'temporal.log'),
    headless: true,
    port: await testPort(),
    startupTimeoutMs: 30_000,
    ...overrides,
  });
  started.push(server);
  return server;
}

async function describeNamespaceName(address: string): Promise<string | null | undefined> {
  const connection = await Connection.connect({ address, connectTimeout: 5_000 });
  try {
    const response = await connection.workflowService.describeNamespace({ namespace: NAMESPACE });
    return response.namespaceInfo?.name;
  } finally {
    await connection.close();
  }
}


describe('startTemporalDevServer', () => {
  it('serves the namespace, stops its process and keeps the SQLite file', { timeout: 40_000 }, async () => {
    const dbFile = join(workDir, 'fresh', 'nested', 'temporal.sqlite');
    const pidFile = join(workDir, 'fresh', 'temporal.pid');
    const uiPort = await testPort();
    const server = await start({ dbFile, pidFile, headless: false, uiPort });

    expect(server.uiUrl).toBe(`http://127.0.0.1:${uiPort}`);
    expect(readFileSync(pidFile, 'utf8').trim()).toBe(String(server.pid));
    expect(await describeNamespaceName(server.address)).toBe(NAMESPACE);

    await server.stop();
    expect(() => process.kill(server.pid, 0)).toThrow();
    await server.stop(); // idempotent
    expect(existsSync(pidFile)).toBe(false);
    expect(existsSync(dbFile)).toBe(true);
  });

  it('stops a dev server left running by a previous process before restarting on its database', { timeout: 40_000 }, async () => {
    const dbFile = join(workDir, 'restart', 'temporal.sqlite');
    const pidFile = join(workDir, 'restart', 'temporal.pid');
    const port = await testPort();
    const stale = await start({ dbFile, pidFile, port });

    const progress: string[] = [];
    // Same port: it is only free once the stale server is gone.
    const fresh = await start({ dbFile, pidFile, port, onProgress: (msg) => progress.push(msg) });

    expect(isProcessAlive(stale.pid)).toBe(false);
    expect(progress.some((msg) => msg.includes(`stale Temporal dev server (pid ${stale.pid})`))).toBe(true);
    expect(readFileSync(pidFile, 'utf8').trim()).toBe(String(fresh.pid));
    expect(await describeNamespaceName(fresh.address)).toBe(NAMESPACE);

    await stale.stop(); // already gone: must neither signal nor remove the new pidFile
    expect(readFileSync(pidFile, 'utf8').trim()).toBe(String(fresh.pid));
    await fresh.stop();
    expect(isProcessAlive(fresh.pid)).toBe(false);
    expect(existsSync(dbFile)).toBe(true);
  });

  /** Lines a start appended to the log: one per attempt. */
  const attemptsIn = (logFile: string) => readFileSync(logFile, 'utf8').split('\n').filter((line) => line.startsWith('=== ')).length;

  it('reports the cause and the log tail when the server exits during startup, once for a port the caller gave', { timeout: 20_000 }, async () => {
    const binaryPath = requireBinary();
    const sockets = new Set<Socket>();
    const blocker = createServer((socket) => sockets.add(socket));
    await new Promise<void>((resolve) => blocker.listen(0, '127.0.0.1', resolve));
    const address = blocker.address();
    const busyPort = typeof address === 'object' && address !== null ? address.port : 0;
    const logFile = join(workDir, 'busy.log');
    try {
      await expect(start({ binaryPath, port: busyPort, logFile })).rejects.toThrow(
        /exited with code \d+ before it answered: .*can't set frontend port.*address already in use.*\n--- last 20 lines[\s\S]*can't set frontend port/,
      );
      expect(attemptsIn(logFile)).toBe(1);
    } finally {
      for (const socket of sockets) socket.destroy();
      await new Promise<void>((resolve) => blocker.close(() => resolve()));
    }
  });

  it('starts again when a port the server picked for itself was taken, naming the lost port above a panic longer than the tail', { timeout: 20_000 }, async () => {
    // The real server's own port picks cannot be steered into a collision, so a stand-in does what it does then.
    const standIn = join(workDir, 'loses-its-port.sh');
    writeFileSync(
      standIn,
      [
        '#!/bin/sh',
        `echo 'time=now level=ERROR msg="Failed to start gRPC listener" error="listen tcp 127.0.0.1:45678: bind: address already in use"'`,
        `echo 'panic: runtime error: invalid memory address or nil pointer dereference'`,
        'i=0; while [ $i -lt 40 ]; do echo "go.temporal.io/server/frame$i()"; i=$((i+1)); done',
        'exit 2',
        '',
      ].join('\n'),
      { mode: 0o755 },
    );
    const logFile = join(workDir, 'loses-its-port.log');
    const progress: string[] = [];
    await expect(start({ binaryPath: standIn, logFile, onProgress: (message) => progress.push(message) })).rejects.toThrow(
      /exited with code 2 before it answered: .*Failed to start gRPC listener.*127\.0\.0\.1:45678: bind: address already in use/,
    );
    expect(attemptsIn(logFile)).toBe(3);
    expect(progress.filter((message) => message.includes('starting again'))).toHaveLength(2);
  });

  describe('never outlives the process that started it', () => {
    /** Starts the dev server in a child process that then ends as `ending` says; resolves once the server answers. */
    async function startInParent(ending: 'exit' | 'throw' | 'hang') {
      const parent = spawn(
        process.execPath,
        ['--import', 'tsx', 'test/support/dev-server-parent.ts', requireBinary(), join(workDir, `parent-${ending}.log`), String(await testPort()), ending],
        { stdio: ['ignore', 'pipe', 'pipe'] },
      );
      let output = '';
      parent.stdout!.on('data', (chunk: Buffer) => (output += chunk.toString()));
      parent.stderr!.on('data', (chunk: Buffer) => (output += chunk.toString()));
      const exited = new Promise<number | null>((resolve) => parent.once('exit', (code) => resolve(code)));
      const started = await Promise.race([
        new Promise<RegExpExecArray>((resolve) => {
          parent.stdout!.on('data', () => {
            const match = /^(\d+) 127\.0\.0\.1:(\d+)$/m.exec(output);
            if (match) resolve(match);
          });
        }),
        exited.then(() => {
          throw new Error(`the parent ended before its dev server answered:\n${output}`);
        }),
      ]);
      return { parent, exited, pid: Number(started[1]), port: Number(started[2]) };
    }

    async function expectGone(pid: number, port: number): Promise<void> {
      const deadline = Date.now() + 10_000;
      while (isProcessRunning(pid) && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 100));
      const survived = isProcessRunning(pid);
      // Never left behind, even by a failing test (it leads its own process group).
      if (survived) process.kill(-pid, 'SIGKILL');
      expect(survived).toBe(false);
      // The Go server's main thread can be reported gone while its other threads still finish exiting and hold the
      // listening socket for a moment (seen on the Node 24 pass): the port must stop answering soon, not at once.
      const portDeadline = Date.now() + 5_000;
      let answering = await acceptsConnections('127.0.0.1', port);
      while (answering && Date.now() < portDeadline) {
        await new Promise((resolve) => setTimeout(resolve, 100));
        answering = await acceptsConnections('127.0.0.1', port);
      }
      expect(answering).toBe(false);
    }

    it.each(['exit', 'throw'] as const)('a parent that ends by %s takes it along', { timeout: 40_000 }, async (ending) => {
      const { exited, pid, port } = await startInParent(ending);
      expect(await exited).toBe(1);
      await expectGone(pid, port);
    });

    it('a parent killed with SIGKILL takes it along (Linux, through setpriv --pdeathsig)', { timeout: 40_000 }, async () => {
      const { parent, exited, pid, port } = await startInParent('hang');
      expect(isProcessRunning(pid)).toBe(true);
      parent.kill('SIGKILL');
      await exited;
      await expectGone(pid, port);
    });
  });
});
