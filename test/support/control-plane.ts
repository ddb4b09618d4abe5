import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtemp, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { inject } from 'vitest';
import { testPort } from './ports.ts';
import { START_COMMAND_ARGS } from './process.ts';
import { CALLBACK_TOKEN, CONTROL_TOKEN, GATE_TOKEN, startServiceProcess, type ServiceProcess } from './gate.ts';

const REPO_ROOT = fileURLToPath(new URL('../..', import.meta.url));

/**
 * A control-plane-only process (`npm start`'s command) on a test database and the run's shared Temporal dev server,
 * with a task queue of its own so no other test file's worker picks up its workflows.
 */
export interface ControlPlaneFixture {
  dir: string;
  configPath: string;
  port: number;
  url: string;
  callbackUrl: string;
  taskQueue: string;
}

/** Reserves the port first, so the gate's config can name this process's callback URL before either starts. */
export async function reserveControlPlane(): Promise<Omit<ControlPlaneFixture, 'configPath'>> {
  const dir = await mkdtemp(join(tmpdir(), 'rcp-control-plane-'));
  const port = await testPort();
  const url = `http://127.0.0.1:${port}`;
  return { dir, port, url, callbackUrl: `${url}/control/api/worker-callback`, taskQueue: `runs-test-${randomBytes(4).toString('hex')}` };
}

export interface ControlPlaneConfigOptions {
  databaseUrl: string;
  /** worker_wake_gate_url: the default lane. */
  gateUrl?: string;
  overrides?: Record<string, unknown>;
}

export async function writeControlPlaneConfig(
  reserved: Omit<ControlPlaneFixture, 'configPath'>,
  options: ControlPlaneConfigOptions,
): Promise<ControlPlaneFixture> {
  const configPath = join(reserved.dir, 'config.json');
  const config = {
    roles: ['control_plane'],
    control_api_bearer_token: CONTROL_TOKEN,
    completion_callback_url: reserved.callbackUrl,
    completion_callback_token: CALLBACK_TOKEN,
    ...(options.gateUrl ? { worker_wake_gate_url: options.gateUrl, worker_wake_gate_bearer_token: GATE_TOKEN } : {}),
    state_dir: './state',
    project_root: './projects',
    dispatch_script_path: join(REPO_ROOT, 'worker-gate', 'simulated-agent.sh'),
    listen_host: '127.0.0.1',
    listen_port: reserved.port,
    control_plane_store_backend: 'pg',
    pg_database_url: options.databaseUrl,
    temporal_address: inject('temporalAddress'),
    temporal_task_queue: reserved.taskQueue,
    live_dispatch_enabled: true,
    dispatch_timeout_sec: 20,
    max_wait_after_idle_sec: 600,
    // Promoted projects take this class; the gate's test thresholds are its top-level ones, which `unknown` uses.
    default_workload_class: 'unknown',
    ...options.overrides,
  };
  await writeFile(configPath, JSON.stringify(config, null, 2));
  return { ...reserved, configPath };
}

export type ControlPlaneProcess = ServiceProcess;

export function startControlPlaneProcess(fixture: ControlPlaneFixture, env: Record<string, string> = {}): Promise<ControlPlaneProcess> {
  // TEMPORAL_ADDRESS from the environment would override the config's dev server address.
  return startServiceProcess('control plane', { configPath: fixture.configPath, url: fixture.url, env: { TEMPORAL_ADDRESS: '', ...env }, readyTimeoutMs: 90_000 });
}

/** Starts a control plane that must refuse to start: its exit code and what it wrote to stderr. */
export function failedControlPlaneStart(fixture: ControlPlaneFixture, env: Record<string, string> = {}): Promise<{ code: number | null; stderr: string }> {
  const child = spawn(process.execPath, [...START_COMMAND_ARGS], {
    cwd: REPO_ROOT,
    // The environment's Temporal settings would override the config's.
    env: { ...process.env, SVC_CONFIG: fixture.configPath, SVC_CONTROL_PLANE_CONFIG: '', TEMPORAL_ADDRESS: '', TEMPORAL_NAMESPACE: '', ...env },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let stderr = '';
  child.stderr!.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  const timer = setTimeout(() => child.kill('SIGKILL'), 60_000);
  return new Promise((resolve) =>
    child.once('exit', (code) => {
      clearTimeout(timer);
      resolve({ code, stderr });
    }),
  );
}

/** The one line a person reads first when a start fails. */
export const startupFailureLine = (stderr: string): string | undefined => stderr.split('\n').find((line) => line.startsWith('research-control-plane: start-up failed:'));

/** JSON calls to the control API with the control token (or another bearer). */
export function controlClient(url: string, token = CONTROL_TOKEN) {
  return async (method: string, path: string, body?: unknown, bearer = token) => {
    const response = await fetch(`${url}${path}`, {
      method,
      headers: { authorization: `Bearer ${bearer}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
    const text = await response.text();
    return { status: response.status, body: (text ? JSON.parse(text) : null) as Record<string, any> };
  };
}
