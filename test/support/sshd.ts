import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { chmod, mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir, userInfo } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { testPort } from './ports.ts';
import { acceptsConnections } from './raw-socket.ts';

const run = promisify(execFile);

export const SSHD_PATH = '/usr/sbin/sshd';
export const SSHD_INSTALL_HINT = `${SSHD_PATH} is missing: run \`bash scripts/ensure-sshd.sh\` (npm test does it) to install openssh-server.`;

/** A real OpenSSH server on a loopback port, letting in the current user with a key held by its own ssh-agent. */
export interface TestSshd {
  /** 'user@127.0.0.1:PORT', the current user (root here). */
  host: string;
  port: number;
  user: string;
  /** An empty directory on "the worker" (this machine) for remote projects. */
  remoteRoot: string;
  /** A scratch directory of this server's, removed by stop() (for known_hosts files and the like). */
  scratchDir: string;
  /** Give this to ssh's environment: its agent holds the only key the server accepts. */
  env: { SSH_AUTH_SOCK: string };
  /** Stops sshd and the agent and removes every file of theirs, remoteRoot included. */
  stop(): Promise<void>;
  /** Kills sshd alone (SIGKILL), so the port stops answering; the agent, remoteRoot and scratchDir stay until stop(). */
  kill(): Promise<void>;
}

const exited = (child: ChildProcess) =>
  child.exitCode !== null || child.signalCode !== null
    ? Promise.resolve()
    : new Promise<void>((resolve) => child.once('exit', () => resolve()));

async function killChild(child: ChildProcess | undefined): Promise<void> {
  if (!child || child.exitCode !== null || child.signalCode !== null) return;
  const gone = exited(child);
  child.kill('SIGKILL');
  await gone;
}

function spawnCollecting(program: string, args: string[], env?: NodeJS.ProcessEnv): { child: ChildProcess; stderr: () => string } {
  const child = spawn(program, args, { stdio: ['ignore', 'ignore', 'pipe'], ...(env ? { env } : {}) });
  let text = '';
  child.stderr?.setEncoding('utf8').on('data', (chunk: string) => (text = (text + chunk).slice(-4000)));
  return { child, stderr: () => text };
}

async function waitFor(what: string, probe: () => Promise<boolean> | boolean, child: ChildProcess, stderr: () => string, timeoutMs: number) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (child.exitCode !== null || child.signalCode !== null) {
      throw new Error(`${what}: the process exited (${child.exitCode ?? child.signalCode}) before it was ready:\n${stderr()}`);
    }
    if (await probe()) return;
    if (Date.now() > deadline) throw new Error(`${what}: not ready after ${timeoutMs} ms:\n${stderr()}`);
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
}

async function startServer(dir: string, user: string): Promise<{ child: ChildProcess; port: number }> {
  // A port picked free can be taken before sshd binds it: try a few.
  for (let attempt = 1; ; attempt++) {
    const port = await testPort();
    const config = join(dir, 'sshd_config');
    await writeFile(
      config,
      [
        `ListenAddress 127.0.0.1`,
        `Port ${port}`,
        `HostKey ${join(dir, 'host_ed25519')}`,
        `AuthorizedKeysFile ${join(dir, 'authorized_keys')}`,
        `PidFile ${join(dir, 'sshd.pid')}`,
        'PubkeyAuthentication yes',
        'PasswordAuthentication no',
        'KbdInteractiveAuthentication no',
        'StrictModes no',
        'UsePAM no',
        'PermitRootLogin prohibit-password',
        `AllowUsers ${user}`,
        'PrintMotd no',
        'LogLevel ERROR',
        '',
      ].join('\n'),
    );
    const { child, stderr } = spawnCollecting(SSHD_PATH, ['-D', '-e', '-f', config]);
    try {
      await waitFor('sshd', () => acceptsConnections('127.0.0.1', port), child, stderr, 10_000);
      return { child, port };
    } catch (error) {
      await killChild(child);
      if (attempt < 3 && /address already in use/i.test(stderr())) continue;
      throw error;
    }
  }
}

/** Starts sshd and an ssh-agent holding a fresh client key; throws with the install hint when sshd is missing. */
export async function startSshd(): Promise<TestSshd> {
  if (!existsSync(SSHD_PATH)) throw new Error(SSHD_INSTALL_HINT);
  const user = userInfo().username;
  // sshd started as root chroots its pre-auth child into the privilege separation directory, which must exist.
  if (process.getuid?.() === 0) await mkdir('/run/sshd', { recursive: true, mode: 0o755 });

  const dir = await mkdtemp(join(tmpdir(), 'rcp-sshd-'));
  await chmod(dir, 0o700);
  let server: ChildProcess | undefined;
  let agent: ChildProcess | undefined;
  const stop = async () => {
    await killChild(server);
    await killChild(agent);
    await rm(dir, { recursive: true, force: true });
  };
  try {
    const keygen = (file: string, comment: string) => run('ssh-keygen', ['-q', '-t', 'ed25519', '-N', '', '-C', comment, '-f', file]);
    await Promise.all([keygen(join(dir, 'host_ed25519'), 'rcp-test-host'), keygen(join(dir, 'client_ed25519'), 'rcp-test-client')]);
    await writeFile(join(dir, 'authorized_keys'), await readFile(join(dir, 'client_ed25519.pub')), { mode: 0o600 });
    const remoteRoot = join(dir, 'remote');
    const scratchDir = join(dir, 'scratch');
    await mkdir(remoteRoot);
    await mkdir(scratchDir);

    const socket = join(dir, 'agent.sock');
    const agentProcess = spawnCollecting('ssh-agent', ['-D', '-a', socket]);
    agent = agentProcess.child;
    await waitFor('ssh-agent', () => existsSync(socket), agentProcess.child, agentProcess.stderr, 10_000);
    await run('ssh-add', ['-q', join(dir, 'client_ed25519')], { env: { ...process.env, SSH_AUTH_SOCK: socket } });

    const started = await startServer(dir, user);
    server = started.child;
    return {
      host: `${user}@127.0.0.1:${started.port}`,
      port: started.port,
      user,
      remoteRoot,
      scratchDir,
      env: { SSH_AUTH_SOCK: socket },
      stop,
      kill: () => killChild(server),
    };
  } catch (error) {
    await stop();
    throw error;
  }
}
