import { spawn } from 'node:child_process';
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { mkdir, mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { isProcessAlive } from '../support/process.ts';

// expected duration: ~15 s

const REPO_ROOT = fileURLToPath(new URL('../..', import.meta.url));
const SIMULATED_AGENT = join(REPO_ROOT, 'worker-gate', 'simulated-agent.sh');
const FAKE_AGENT = join(REPO_ROOT, 'test', 'fixtures', 'agents', 'fake-agent.sh');
const EVENT_TOKEN = 'sim-agent-test-event-token-0123456789';

interface ReceivedEvent {
  headers: IncomingHttpHeaders;
  body: Record<string, unknown>;
}

/** A real HTTP server standing in for the gate's /legacy-agent/event route. */
class EventReceiver {
  readonly received: ReceivedEvent[] = [];
  private readonly server: Server;

  private constructor(server: Server) {
    this.server = server;
  }

  static async start(): Promise<EventReceiver> {
    const server = createServer();
    const receiver = new EventReceiver(server);
    server.on('request', (request, response) => {
      let text = '';
      request.setEncoding('utf8');
      request.on('data', (chunk: string) => (text += chunk));
      request.on('end', () => {
        receiver.received.push({ headers: request.headers, body: JSON.parse(text) as Record<string, unknown> });
        response.writeHead(200, { 'content-type': 'application/json' }).end('{"ok":true}');
      });
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
    return receiver;
  }

  get url(): string {
    return `http://127.0.0.1:${(this.server.address() as AddressInfo).port}/legacy-agent/event`;
  }

  forRun(runId: string): ReceivedEvent[] {
    return this.received.filter((event) => event.body.run_id === runId);
  }

  async close(): Promise<void> {
    this.server.closeAllConnections();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }
}

async function waitUntil<T>(what: string, probe: () => T | undefined | false | Promise<T | undefined | false>, timeoutMs: number): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value !== undefined && value !== false) return value;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

interface ScriptResult {
  code: number | null;
  stdout: string;
  stderr: string;
  ms: number;
}

/** Runs a dispatch script the way the gate does: directly (its shebang), no shell, cwd = project dir. */
function runScript(script: string, cwd: string, env: Record<string, string | undefined>, args: string[] = []): Promise<ScriptResult> {
  const started = Date.now();
  return new Promise((resolve, reject) => {
    const child = spawn(script, args, { cwd, env, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => (stdout += chunk));
    child.stderr.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
    child.once('error', reject);
    // 'close': the script exited and its stdout pipe closed, which proves the agent does not hold it.
    child.once('close', (code) => resolve({ code, stdout, stderr, ms: Date.now() - started }));
  });
}

let root: string;
let receiver: EventReceiver;
const startedAgents: number[] = [];

beforeAll(async () => {
  root = await mkdtemp(join(tmpdir(), 'rcp-sim-agent-'));
  // No node_modules above the project dir: the .sh launchers find their code (and tsx) from the repository.
  receiver = await EventReceiver.start();
});

afterAll(async () => {
  for (const pid of startedAgents) {
    try {
      if (isProcessAlive(pid)) process.kill(-pid, 'SIGKILL');
    } catch {
      // already gone
    }
  }
  await receiver?.close();
  if (root) await rm(root, { recursive: true, force: true });
});

async function newProject(name: string, prompt = `# ${name} study\nMeasure something.\n`): Promise<string> {
  const dir = join(root, name);
  await mkdir(dir, { recursive: true });
  await writeFile(join(dir, 'prompt.md'), prompt);
  return dir;
}

function contractEnv(runId: string, projectDir: string, extra: Record<string, string> = {}): Record<string, string | undefined> {
  return {
    ...process.env,
    RUN_ID: runId,
    PROJECT_ID: runId.replace(/-run$/, ''),
    PROJECT_DIR: projectDir,
    PROMPT_FILE: 'prompt.md',
    DISPATCH_MODE: 'exec',
    MODEL: 'sim-model',
    REASONING_EFFORT: 'medium',
    SANDBOX: 'workspace-write',
    GATE_EVENT_URL: receiver.url,
    GATE_EVENT_TOKEN: EVENT_TOKEN,
    SIMULATED_AGENT_WORK_SEC: '1',
    ...extra,
  };
}

function parseLaunch(result: ScriptResult): { root_pid: number; process_group_id: number } {
  expect(result.code, result.stderr).toBe(0);
  const lines = result.stdout.split('\n').filter((line) => line.trim() !== '');
  expect(lines).toHaveLength(1);
  const printed = JSON.parse(lines[0]!) as Record<string, unknown>;
  expect(Object.keys(printed).sort()).toEqual(['process_group_id', 'root_pid']);
  expect(printed.root_pid).toEqual(expect.any(Number));
  expect(printed.process_group_id).toBe(printed.root_pid);
  startedAgents.push(printed.root_pid as number);
  return printed as { root_pid: number; process_group_id: number };
}

describe('the simulated agent, run as a dispatch script', () => {
  it('starts a detached agent, exits at once, posts session-start and session-end and leaves its evidence', { timeout: 60_000 }, async () => {
    const projectDir = await newProject('alpha');
    const result = await runScript(SIMULATED_AGENT, projectDir, contractEnv('alpha-run', projectDir));
    const launched = parseLaunch(result);
    expect(result.stderr).toBe('');
    expect(result.ms).toBeLessThan(15_000);
    // The script has exited; the agent it started works on.
    expect(isProcessAlive(launched.root_pid)).toBe(true);

    await waitUntil('session-end', () => receiver.forRun('alpha-run').some((e) => e.body.event === 'session-end'), 30_000);
    await waitUntil('the agent to exit', () => !isProcessAlive(launched.root_pid), 10_000);

    const events = receiver.forRun('alpha-run');
    const names = events.map((e) => e.body.event);
    expect([names[0], names.at(-1)]).toEqual(['session-start', 'session-end']);
    expect(new Set(names.slice(1, -1))).toEqual(new Set(['progress']));
    // Its progress events carry its steps, for the run's transcript: what it read, then each step's call and output.
    const said = events.flatMap((e) => (e.body.transcript as unknown[] | undefined) ?? []);
    expect(said[0]).toEqual({ kind: 'message', text: expect.stringContaining('# alpha study') });
    expect(said).toContainEqual({ kind: 'tool_call', tool: 'simulated_shell', text: 'python experiment.py --step 1' });
    expect(said.at(-1)).toEqual({ kind: 'tool_output', tool: 'simulated_shell', text: expect.stringMatching(/^step (\d+) of \1: simulated/) });
    const sessionId = events[0]!.body.session_id as string;
    expect(sessionId).toMatch(/^sim-alpha-run-[0-9a-f]+$/);
    for (const { headers, body } of events) {
      expect(headers.authorization).toBe(`Bearer ${EVENT_TOKEN}`);
      expect(headers['content-type']).toMatch(/^application\/json/);
      expect(body).toMatchObject({
        run_id: 'alpha-run',
        project_id: 'alpha',
        session_id: sessionId,
        root_pid: launched.root_pid,
        process_group_id: launched.process_group_id,
        message: expect.any(String),
      });
      expect(new Date(body.timestamp as string).toISOString()).toBe(body.timestamp);
    }

    const notes = await readFile(join(projectDir, 'run_notes.md'), 'utf8');
    expect(notes).toContain('alpha-run');
    expect(notes).toContain('# alpha study');
    const metrics = JSON.parse(await readFile(join(projectDir, 'results', 'simulated', 'metrics.json'), 'utf8')) as Record<string, unknown>;
    expect(Object.keys(metrics).length).toBeGreaterThan(0);
    expect(metrics.score).toEqual(expect.any(Number));
    const decision = JSON.parse(await readFile(join(projectDir, '.research', 'decision.json'), 'utf8')) as Record<string, unknown>;
    expect(decision).toEqual({ decision: 'inconclusive', summary: expect.stringMatching(/\S/) });
    // Atomic writes leave no temporary files behind.
    expect((await readdir(join(projectDir, '.research'))).filter((name) => name.endsWith('.tmp'))).toEqual([]);
    // The agent's output went to its log, which never shows the token.
    const log = await readFile(join(projectDir, '.research', 'agent.log'), 'utf8');
    expect(log).toContain('posted session-end');
    expect(log).not.toContain(EVENT_TOKEN);
  });

  it('says in run_notes.md that it resumed, keeping the earlier notes', { timeout: 60_000 }, async () => {
    const projectDir = await newProject('bravo');
    await writeFile(join(projectDir, 'run_notes.md'), '# Earlier notes\n\nFirst session.\n');
    const launched = parseLaunch(await runScript(SIMULATED_AGENT, projectDir, contractEnv('bravo-run', projectDir, { DISPATCH_MODE: 'resume' })));
    await waitUntil('session-end', () => receiver.forRun('bravo-run').some((e) => e.body.event === 'session-end'), 30_000);
    await waitUntil('the agent to exit', () => !isProcessAlive(launched.root_pid), 10_000);

    const notes = await readFile(join(projectDir, 'run_notes.md'), 'utf8');
    expect(notes.startsWith('# Earlier notes')).toBe(true);
    expect(notes).toMatch(/resumed/i);
    expect(receiver.forRun('bravo-run').map((e) => e.body.event).filter((event) => event !== 'progress')).toEqual(['session-start', 'session-end']);
    const decision = JSON.parse(await readFile(join(projectDir, '.research', 'decision.json'), 'utf8')) as Record<string, unknown>;
    expect(decision.decision).toBe('inconclusive');
  });

  it("ends, rather than looping, when its project's folder is deleted under the sandbox that mounts it", { timeout: 60_000 }, async () => {
    // The shape the gate's sandbox gives an agent: its project a mount point, the folders above it the sandbox's own.
    const projectDir = await newProject('gone');
    const sandbox = ['--bind', '/', '/', '--tmpfs', root, '--bind', projectDir, projectDir, '--dev', '/dev', '--proc', '/proc', '--chdir', projectDir];
    const result = await runScript('bwrap', projectDir, contractEnv('gone-run', projectDir, { SIMULATED_AGENT_WORK_SEC: '3' }), [...sandbox, SIMULATED_AGENT]);
    const launched = parseLaunch(result);
    await waitUntil('the agent to start working', () => receiver.forRun('gone-run').some((e) => e.body.event === 'session-start'), 30_000);
    await rm(projectDir, { recursive: true, force: true });
    // Its results can no longer be written: it stops with that error (Node's recursive mkdir went round without end
    // here, at half a core, for as long as the machine ran).
    await waitUntil('the agent to exit', () => !isProcessAlive(launched.root_pid), 30_000);
    expect(receiver.forRun('gone-run').map((e) => e.body.event)).not.toContain('session-end');
  });

  it('exits 2 with a message naming the missing or invalid variables, never their values', async () => {
    const projectDir = await newProject('charlie');
    const env = contractEnv('charlie-run', projectDir, { DISPATCH_MODE: 'replay', GATE_EVENT_URL: 'not a url' });
    delete env.RUN_ID;
    const result = await runScript(SIMULATED_AGENT, projectDir, env);
    expect(result.code).toBe(2);
    expect(result.stdout).toBe('');
    expect(result.stderr).toMatch(/RUN_ID: is required/);
    expect(result.stderr).toMatch(/DISPATCH_MODE/);
    expect(result.stderr).toMatch(/GATE_EVENT_URL/);
    expect(result.stderr).not.toContain(EVENT_TOKEN);
    expect(receiver.forRun('charlie-run')).toEqual([]);
  });

  it('exits 2 when the prompt file is missing', async () => {
    const projectDir = await newProject('delta');
    const result = await runScript(SIMULATED_AGENT, projectDir, contractEnv('delta-run', projectDir, { PROMPT_FILE: 'absent.md' }));
    expect(result.code).toBe(2);
    expect(result.stderr).toMatch(/PROMPT_FILE: absent\.md/);
  });
});

describe('the fake agent fixture', () => {
  it('honours bad-json, fail and question and counts every invocation', { timeout: 60_000 }, async () => {
    const counterFile = join(root, 'fake-count.txt');

    // scenario.json in the project wins over the environment.
    const echo = await newProject('echo');
    await writeFile(join(echo, 'scenario.json'), JSON.stringify({ scenario: 'bad-json' }));
    const badJson = await runScript(FAKE_AGENT, echo, contractEnv('echo-run', echo, { FAKE_AGENT_COUNTER_FILE: counterFile, FAKE_AGENT_SCENARIO: 'fail' }));
    expect(badJson.code).toBe(0);
    expect(() => JSON.parse(badJson.stdout)).toThrow();

    // Without scenario.json the environment decides.
    const foxtrot = await newProject('foxtrot');
    const failed = await runScript(FAKE_AGENT, foxtrot, contractEnv('foxtrot-run', foxtrot, { FAKE_AGENT_COUNTER_FILE: counterFile, FAKE_AGENT_SCENARIO: 'fail' }));
    expect(failed.code).toBe(3);
    expect(failed.stdout).toBe('');
    expect(failed.stderr).toMatch(/fail/);

    const golf = await newProject('golf');
    await writeFile(join(golf, 'scenario.json'), JSON.stringify({ scenario: 'question' }));
    const launched = parseLaunch(await runScript(FAKE_AGENT, golf, contractEnv('golf-run', golf, { FAKE_AGENT_COUNTER_FILE: counterFile })));
    await waitUntil('ask-user-question', () => receiver.forRun('golf-run').some((e) => e.body.event === 'ask-user-question'), 30_000);
    await waitUntil('the agent to exit', () => !isProcessAlive(launched.root_pid), 10_000);
    const events = receiver.forRun('golf-run');
    expect(events.map((e) => e.body.event)).toEqual(['session-start', 'ask-user-question']);
    expect(events[1]!.body.question).toMatch(/\S/);
    expect(events[1]!.headers.authorization).toBe(`Bearer ${EVENT_TOKEN}`);

    const lines = (await readFile(counterFile, 'utf8')).split('\n').filter((line) => line !== '');
    expect(lines.map((line) => (JSON.parse(line) as { run_id: string }).run_id)).toEqual(['echo-run', 'foxtrot-run', 'golf-run']);
  });
});
