import { spawn, type ChildProcess } from 'node:child_process';
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import { chmod, mkdir, mkdtemp, readFile, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { testPort } from './ports.ts';
import type { GateCallbackPayload } from '../../worker-gate/contract/callback-body.ts';
import type { TranscriptEntry, TranscriptPush } from '../../worker-gate/contract/run-transcript.ts';
import { START_COMMAND_ARGS } from './process.ts';

export const GATE_TOKEN = 'gate-test-token-0123456789abcdef';
export const CONTROL_TOKEN = 'gate-test-control-token-0123456789';
export const CALLBACK_TOKEN = 'gate-test-callback-token-0123456789';
export const FAKE_AGENT_PATH = fileURLToPath(new URL('../fixtures/agents/fake-agent.sh', import.meta.url));
const REPO_ROOT = fileURLToPath(new URL('../..', import.meta.url));
/** A directory holding a fake `nvidia-smi`; put it first on the gate's PATH to exercise the GPU telemetry path. */
export const FAKE_GPU_BIN = fileURLToPath(new URL('../fixtures/bin', import.meta.url));

export async function waitUntil<T>(what: string, probe: () => T | undefined | Promise<T | undefined>, timeoutMs: number, everyMs = 200): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value !== undefined && value !== false) return value;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, everyMs));
  }
}

export interface ReceivedCallback {
  body: GateCallbackPayload;
  headers: IncomingHttpHeaders;
  at: number;
}

/** A real HTTP server standing in for the control plane's worker-callback endpoint. It can go down and come back. */
export class CallbackReceiver {
  readonly received: ReceivedCallback[] = [];
  /** Transcript entries the gate pushed beside its callbacks (…/worker-transcript), by run, each seq once. */
  readonly transcripts = new Map<string, Map<number, TranscriptEntry>>();
  private server: Server | undefined;

  readonly port: number;

  private constructor(port: number) {
    this.port = port;
  }

  static async start(): Promise<CallbackReceiver> {
    const receiver = new CallbackReceiver(await testPort());
    await receiver.up();
    return receiver;
  }

  get url(): string {
    return `http://127.0.0.1:${this.port}/control/api/worker-callback`;
  }

  async up(): Promise<void> {
    this.server = createServer((request, response) => {
      let text = '';
      request.setEncoding('utf8');
      request.on('data', (chunk: string) => (text += chunk));
      request.on('end', () => {
        if (request.url?.endsWith('/worker-transcript')) {
          const push = JSON.parse(text) as TranscriptPush;
          const held = this.transcripts.get(push.run_id) ?? new Map<number, TranscriptEntry>();
          this.transcripts.set(push.run_id, held);
          for (const entry of push.entries) held.set(entry.seq, entry);
          response.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ run_id: push.run_id, stored_through: Math.max(...held.keys()) }));
          return;
        }
        this.received.push({ body: JSON.parse(text) as GateCallbackPayload, headers: request.headers, at: Date.now() });
        response.writeHead(200, { 'content-type': 'application/json' }).end('{"ok":true}');
      });
    });
    const server = this.server;
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(this.port, '127.0.0.1', () => resolve());
    });
  }

  async down(): Promise<void> {
    const server = this.server;
    this.server = undefined;
    if (!server) return;
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  }

  /** The run's transcript as pushed so far, in seq order. */
  transcriptOf(runId: string): TranscriptEntry[] {
    return [...(this.transcripts.get(runId)?.values() ?? [])].sort((a, b) => a.seq - b.seq);
  }

  forRun(runId: string): ReceivedCallback[] {
    return this.received.filter((callback) => callback.body.run_id === runId);
  }

  /**
   * The run's callbacks as the control plane acts on them: one per idempotency key, in order of first arrival. The gate
   * delivers at least once, so on a loaded machine a callback this receiver was slow to answer may arrive again.
   */
  deliveredForRun(runId: string): ReceivedCallback[] {
    const keys = new Set<string>();
    return this.forRun(runId).filter((callback) => !keys.has(callback.body.idempotency_key) && keys.add(callback.body.idempotency_key));
  }

  waitFor(runId: string, eventType: string, timeoutMs: number): Promise<ReceivedCallback> {
    return waitUntil(`${eventType} callback for ${runId}`, () => this.forRun(runId).find((c) => c.body.event_type === eventType), timeoutMs);
  }
}

/** The fake agent's settings (test/fixtures/agents/fake-agent.ts) a test may give the gate's environment. */
export const FAKE_AGENT_ENV = ['FAKE_AGENT_COUNTER_FILE', 'FAKE_AGENT_WORK_SEC', 'FAKE_AGENT_CHILD_EXTRA_SEC', 'FAKE_AGENT_SCENARIO'];

export interface GateConfigOptions {
  callbackUrl: string;
  overrides?: Record<string, unknown>;
}

export interface GateFixture {
  dir: string;
  configPath: string;
  port: number;
  url: string;
  projectRoot: string;
  counterFile: string;
}

/**
 * A worker-gate-only config in a fresh directory. Thresholds are raised so a busy CI machine does not keep the
 * quiet window from closing; the threshold logic itself is covered by the quiet-window unit tests.
 */
export async function writeGateConfig(options: GateConfigOptions): Promise<GateFixture> {
  const dir = await mkdtemp(join(tmpdir(), 'rcp-gate-'));
  // The agent runs as another user (agent_user) where the gate can switch: the way to its project must be open to it.
  await chmod(dir, 0o711);
  // The fake agent counts its starts in a file every run's sandbox may write (agent_writable_paths).
  const shared = join(dir, 'agent-shared');
  await mkdir(shared, { mode: 0o777 });
  await chmod(shared, 0o777);
  const port = await testPort();
  const configPath = join(dir, 'config.json');
  const config = {
    roles: ['worker_gate'],
    control_api_bearer_token: CONTROL_TOKEN,
    worker_wake_gate_bearer_token: GATE_TOKEN,
    completion_callback_url: options.callbackUrl,
    completion_callback_token: CALLBACK_TOKEN,
    completion_callback_timeout_sec: 5,
    state_dir: './state',
    project_root: './projects',
    dispatch_script_path: FAKE_AGENT_PATH,
    dispatch_timeout_sec: 20,
    listen_host: '127.0.0.1',
    listen_port: port,
    sample_interval_sec: 1,
    idle_sustain_sec: 30,
    max_wait_after_idle_sec: 600,
    default_workload_class: 'unknown',
    cpu_idle_threshold_pct: 100,
    gpu_idle_avg_threshold_pct: 100,
    gpu_idle_peak_threshold_pct: 100,
    vram_delta_threshold_mib: 1_000_000,
    stale_project_process_grace_sec: 2,
    stale_project_process_term_grace_sec: 1,
    stale_project_process_command_markers: ['rcp-linger-marker'],
    agent_writable_paths: ['./agent-shared'],
    // The fake agent's settings, which tests give the gate's environment: the agent gets no other variable of it.
    agent_credential_env: ['OPENAI_API_KEY', 'OPENAI_BASE_URL', 'ANTHROPIC_API_KEY', 'ANTHROPIC_BASE_URL', ...FAKE_AGENT_ENV],
    // Most tests' agents end without their evidence on purpose (a question, a failure, a lingering child) and are
    // judged on that session; the tests of continuations set the limit themselves.
    agent_continue_limit: 0,
    ...options.overrides,
  };
  await writeFile(configPath, JSON.stringify(config, null, 2));
  return { dir, configPath, port, url: `http://127.0.0.1:${port}`, projectRoot: join(dir, 'projects'), counterFile: join(shared, 'dispatch-count.txt') };
}

/** How often the fake agent's dispatch script ran for this run (it appends one line per invocation). */
export async function dispatchCount(fixture: GateFixture, runId: string): Promise<number> {
  const text = await readFile(fixture.counterFile, 'utf8').catch(() => '');
  return text.split('\n').filter((line) => line.includes(`"${runId}"`)).length;
}

export interface ServiceProcess {
  child: ChildProcess;
  output: () => string;
  exited: Promise<number | null>;
  kill(signal: NodeJS.Signals): Promise<void>;
}
export type GateProcess = ServiceProcess;

/** Runs the real entry point (`npm start`'s command) on a config file; resolves once `<url>/healthz` answers 200. */
export async function startServiceProcess(
  what: string,
  options: { configPath: string; url: string; env?: Record<string, string>; readyTimeoutMs?: number },
): Promise<ServiceProcess> {
  const child = spawn(process.execPath, [...START_COMMAND_ARGS], {
    cwd: REPO_ROOT,
    env: { ...process.env, SVC_CONFIG: options.configPath, SVC_CONTROL_PLANE_CONFIG: '', LOG_LEVEL: 'info', ...options.env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  child.stdout!.on('data', (chunk: Buffer) => (output += chunk.toString()));
  child.stderr!.on('data', (chunk: Buffer) => (output += chunk.toString()));
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  await waitUntil(
    `the ${what} to answer /healthz`,
    async () => {
      if (child.exitCode !== null) throw new Error(`the ${what} exited early:\n${output}`);
      const response = await fetch(`${options.url}/healthz`).catch(() => undefined);
      return response?.status === 200 ? true : undefined;
    },
    options.readyTimeoutMs ?? 60_000,
  );
  return {
    child,
    output: () => output,
    exited,
    async kill(signal) {
      if (child.exitCode === null) child.kill(signal);
      await exited;
    },
  };
}

/** A worker-gate-only process on the fixture's config; its dispatch script counts invocations in the counter file. */
export function startGateProcess(fixture: GateFixture, env: Record<string, string> = {}): Promise<GateProcess> {
  return startServiceProcess('gate', {
    configPath: fixture.configPath,
    url: fixture.url,
    env: { FAKE_AGENT_COUNTER_FILE: fixture.counterFile, ...env },
  });
}

function dispatchBody(runId: string, extra: Record<string, unknown> = {}): Record<string, unknown> {
  const projectId = runId.replace(/-run$/, '');
  return {
    run_id: runId,
    project_id: projectId,
    project_dir: projectId,
    prompt_file: 'prompt.md',
    mode: 'exec',
    model: 'fake-model',
    reasoning_effort: 'low',
    sandbox: 'workspace-write',
    ...extra,
  };
}

export function gateClient(fixture: GateFixture) {
  const call = async (method: string, path: string, body?: unknown, token = GATE_TOKEN) => {
    const response = await fetch(`${fixture.url}${path}`, {
      method,
      headers: { authorization: `Bearer ${token}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
    return { status: response.status, body: (await response.json()) as Record<string, any> };
  };
  return {
    call,
    prepare: (body: Record<string, unknown>) => call('POST', '/prepare-project', body),
    dispatch: (body: Record<string, unknown>) => call('POST', '/dispatch', body),
    dashboard: () => call('GET', '/dashboard/api?limit=100&event_limit=500'),
    /** One run as /dashboard/api shows it. */
    async runView(runId: string): Promise<Record<string, any> | undefined> {
      const { body } = await call('GET', '/dashboard/api?limit=100&event_limit=1');
      return (body.runs as Record<string, any>[]).find((run) => run.run_id === runId);
    },
    /** `POST /runs/:run_id/resume`: the run's session starts again with the body's prompt (docs/worker-gate.md#resuming-a-run). */
    resume: (runId: string, body: Record<string, unknown>) => call('POST', `/runs/${encodeURIComponent(runId)}/resume`, body),
    /** The /dispatch body `launch` sends for a run (project id = run id without its `-run` suffix). */
    dispatchBody,
    /** Prepare then dispatch one run of the fake agent, with the scenario written into the project first. */
    async launch(runId: string, scenario: string, extra: Record<string, unknown> = {}) {
      const body = dispatchBody(runId, extra);
      const prepared = await call('POST', '/prepare-project', {
        run_id: runId,
        project_id: body.project_id,
        project_dir: body.project_dir,
        prompt_file: body.prompt_file,
        prompt_text: `# ${String(body.project_id)}\nDo the work.\n`,
      });
      if (prepared.status !== 200) throw new Error(`prepare failed: ${JSON.stringify(prepared)}`);
      await writeFile(join(fixture.projectRoot, String(body.project_dir), 'scenario.json'), JSON.stringify({ scenario }));
      return call('POST', '/dispatch', body);
    },
  };
}
