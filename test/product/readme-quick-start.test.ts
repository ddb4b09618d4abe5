import { spawn, type ChildProcess } from 'node:child_process';
import { createServer, type Server } from 'node:net';
import { chmod, mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { killProcessesWorkingIn, START_COMMAND_ARGS } from '../support/process.ts';
import { testPort } from '../support/ports.ts';

// expected duration: ~60 s

/**
 * The Quick start (docs/getting-started.md#quick-start) as a new user follows it, in a fresh folder: `npm start` on a
 * taken port (it answers at once, saying how to move), then on the port the page names, under a pseudo-terminal (a
 * short banner and readable lines), the page's blocks that turn live dispatch on and queue one item and dispatch it (run as written: the
 * dispatch is live, not a no-op, through the gate's identity check), and the same start with no terminal (JSON lines).
 */
const REPO_ROOT = fileURLToPath(new URL('../..', import.meta.url));
const START = [process.execPath, ...START_COMMAND_ARGS];

let cwd: string;
let shims: string;
const children: ChildProcess[] = [];
let holder: Server;

/** A fenced block of the Quick start, found by the comment naming it. */
async function readmeBlock(name: string): Promise<string> {
  const readme = await readFile(join(REPO_ROOT, 'docs', 'getting-started.md'), 'utf8');
  const match = new RegExp(`<!-- quick-start:${name} [^\\n]*-->\\n\`\`\`sh\\n([\\s\\S]*?)\\n\`\`\`\\n`).exec(readme);
  if (!match) throw new Error(`docs/getting-started.md has no quick-start:${name} block`);
  return match[1]!;
}

interface Started {
  child: ChildProcess;
  output: () => string;
  exited: Promise<number | null>;
}

function start(command: string[], env: Record<string, string>): Started {
  // As a new user's shell: no config named, no Temporal of their own, the log as the terminal (or its absence) decides.
  const { LOG_FORMAT: _format, LOG_LEVEL: _level, ...inherited } = process.env;
  const child = spawn(command[0]!, command.slice(1), {
    cwd,
    env: { ...inherited, SVC_CONFIG: '', SVC_CONTROL_PLANE_CONFIG: '', TEMPORAL_ADDRESS: '', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
    detached: true,
  });
  children.push(child);
  let output = '';
  child.stdout!.on('data', (chunk: Buffer) => (output += chunk.toString()));
  child.stderr!.on('data', (chunk: Buffer) => (output += chunk.toString()));
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  return { child, output: () => output, exited };
}

async function waitFor(started: Started, pattern: RegExp, timeoutMs: number): Promise<RegExpExecArray> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const match = pattern.exec(started.output());
    if (match) return match;
    if (started.child.exitCode !== null || Date.now() > deadline) throw new Error(`no ${pattern} (exit ${started.child.exitCode}):\n${started.output()}`);
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
}

async function stop(started: Started): Promise<void> {
  process.kill(-started.child.pid!, 'SIGINT');
  await started.exited;
}

function bash(script: string, env: Record<string, string>): Promise<{ code: number | null; output: string }> {
  return new Promise((resolve) => {
    const child = spawn('bash', ['-euo', 'pipefail', '-c', script], { cwd, env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
    let output = '';
    child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()));
    child.once('close', (code) => resolve({ code, output }));
  });
}

beforeAll(async () => {
  cwd = await mkdtemp(join(tmpdir(), 'rcp-quick-start-'));
  // `npx rcp` is the checkout's rcp wherever the Quick start's commands run; anything else goes to the real npx.
  shims = join(cwd, 'shims');
  await mkdir(shims);
  const npx = join(shims, 'npx');
  await writeFile(npx, `#!/bin/sh\nif [ "$1" = rcp ]; then shift; exec "${process.execPath}" "${join(REPO_ROOT, 'bin', 'rcp.js')}" "$@"; fi\nexec ${'$'}(PATH="${process.env.PATH}" command -v npx) "$@"\n`);
  await chmod(npx, 0o755);
});

afterAll(async () => {
  for (const child of children) if (child.exitCode === null && child.signalCode === null) process.kill(-child.pid!, 'SIGKILL');
  holder?.close();
  // The simulated agent of the dispatched run outlives the service (an agent outlives its gate by design), and may still
  // be at work in its project: it goes before its folder does.
  if (cwd) killProcessesWorkingIn(cwd);
  await rm(cwd, { recursive: true, force: true, maxRetries: 10, retryDelay: 500 });
});

describe("the Quick start", () => {
  it('a taken port is said at once with the setting that moves it; on the next port the dispatch it shows runs live', { timeout: 240_000 }, async () => {
    const taken = await testPort();
    holder = createServer();
    await new Promise<void>((resolve) => holder.listen(taken, '127.0.0.1', resolve));
    const began = Date.now();
    const refused = start(START, { RCP_LISTEN_PORT: String(taken) });
    expect(await refused.exited).toBe(3);
    expect(Date.now() - began).toBeLessThan(10_000);
    expect(refused.output()).toContain(`port ${taken} on 127.0.0.1 is taken by another program`);
    expect(refused.output()).toContain(`RCP_LISTEN_PORT=${taken + 1} npm start`);
    expect(refused.output()).toContain(`"listen_port" in ${join(cwd, 'state', 'config.json')}`);
    const token = /shown once[^\n]*\n\n\s+(\S+)\n/.exec(refused.output())?.[1];
    expect(token, refused.output()).toMatch(/^[A-Za-z0-9_-]{43}$/);

    // The test's own Temporal UI would collide with another file's: the UI is off (the banner then names none).
    const configPath = join(cwd, 'state', 'config.json');
    await writeFile(configPath, `${JSON.stringify({ ...JSON.parse(await readFile(configPath, 'utf8')), temporal_ui_enabled: false }, null, 2)}\n`);
    const turnedOn = await bash(await readmeBlock('live-dispatch'), {});
    expect(turnedOn.code, turnedOn.output).toBe(0);
    expect(JSON.parse(await readFile(configPath, 'utf8')).live_dispatch_enabled).toBe(true);

    const port = await testPort();
    const onTerminal = start(['script', '-qfec', START.join(' '), '/dev/null'], { RCP_LISTEN_PORT: String(port) });
    await waitFor(onTerminal, /stop with Ctrl-C/, 120_000);
    const terminalOutput = onTerminal.output();
    expect(terminalOutput).toContain(`dashboard:    http://127.0.0.1:${port}/control/dashboard-v2`);
    expect(terminalOutput).toMatch(/INFO\s+configuration loaded/);
    expect(terminalOutput).toMatch(/INFO\s+quiet window \(run scope\): .*inference_eval 300 s/);
    expect(terminalOutput).not.toContain('No workflows registered');
    expect(terminalOutput).not.toContain('{"level"');
    const longest = Math.max(...terminalOutput.split('\n').map((line) => line.length));
    expect(longest, terminalOutput).toBeLessThan(500);

    const env = { PATH: `${shims}:${process.env.PATH}`, XDG_CONFIG_HOME: join(cwd, 'xdg'), TOKEN: token!, RCP_URL: '', RCP_TOKEN: '' };
    const login = await bash(`echo "$TOKEN" | npx rcp login --url http://127.0.0.1:${port}`, env);
    expect(login.code, login.output).toBe(0);
    const followed = await bash(await readmeBlock('queue-and-dispatch'), env);
    expect(followed.code, followed.output).toBe(0);
    expect(followed.output).toMatch(/^live_dispatch: quick-start run \S+/m);
    expect(followed.output).not.toMatch(/^noop/m);
    // A request reads as its method and path.
    expect(onTerminal.output()).toMatch(/INFO\s+request completed .*req="POST \/control\/dispatch-next" status=200/);

    // Followed again on the same state: the Quick start says the candidate merges into the first and is not promoted.
    const again = await bash(await readmeBlock('queue-and-dispatch'), env);
    expect(again.code).not.toBe(0);
    expect(again.output).toMatch(/^error: 409: candidate 'cand-\S+' is merged, not admitted: merged into cand-/m);
    await stop(onTerminal);

    const piped = start(START, { RCP_LISTEN_PORT: String(port) });
    await waitFor(piped, /stop with Ctrl-C/, 120_000);
    const logLines = piped.output().split('\n').filter((line) => line.startsWith('{'));
    expect(logLines.length).toBeGreaterThan(3);
    for (const line of logLines) expect(() => JSON.parse(line), line).not.toThrow();
    expect(logLines.map((line) => JSON.parse(line).msg)).toContain('configuration loaded');
    expect(piped.output()).not.toMatch(/^\d\d:\d\d:\d\d INFO/m);
    await stop(piped);
  });
});
