import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { freePort } from '../bin/runtime/temporal-dev-server.ts';
import { SIMULATED_AGENT_PATH } from '../config/first-run.ts';
import { createTestDatabase } from './support/database.ts';
import { CallbackReceiver } from './support/gate.ts';
import { isProcessAlive } from './support/process.ts';

const TOKEN = 'process-test-token-0123456789abcdef';
const GATE_TOKEN = 'process-test-gate-token-0123456789';

interface StartedProcess {
  child: ChildProcess;
  output: () => string;
  exited: Promise<number | null>;
}

function startEntryPoint(configPath: string, env: Record<string, string> = {}): StartedProcess {
  const child = spawn(process.execPath, ['--import', 'tsx', 'bin/control-plane.ts'], {
    env: { ...process.env, SVC_CONFIG: configPath, SVC_CONTROL_PLANE_CONFIG: '', TEMPORAL_ADDRESS: '', LOG_LEVEL: 'warn', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  child.stdout!.on('data', (chunk: Buffer) => (output += chunk.toString()));
  child.stderr!.on('data', (chunk: Buffer) => (output += chunk.toString()));
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  return { child, output: () => output, exited };
}

async function waitForBanner(started: StartedProcess, timeoutMs = 90_000): Promise<string> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    const match = /dashboard:\s+(http:\/\/[^/\s]+)\//.exec(started.output());
    if (match) return match[1]!;
    if (started.child.exitCode !== null) throw new Error(`exited early:\n${started.output()}`);
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
  throw new Error(`no banner within ${timeoutMs} ms:\n${started.output()}`);
}


describe('the real entry point', () => {
  let dir: string;
  let configPath: string;

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'rcp-process-'));
    configPath = join(dir, 'config.json');
    await writeFile(
      configPath,
      JSON.stringify({
        control_api_bearer_token: TOKEN,
        completion_callback_url: 'http://127.0.0.1:9/control/api/worker-callback',
        completion_callback_token: 'process-test-callback-0123456789',
        state_dir: './state',
        project_root: './projects',
        dispatch_script_path: './agent.sh',
        listen_host: '127.0.0.1',
        listen_port: 0,
        temporal_ui_port: await freePort(),
      }),
    );
  });
  afterAll(async () => rm(dir, { recursive: true, force: true }));

  it('serves /healthz, keeps events across a restart, and exits cleanly on SIGTERM with the embedded Temporal gone', async () => {
    const first = startEntryPoint(configPath);
    const url = await waitForBanner(first);
    expect(first.output()).toMatch(/Temporal UI:\s+http:\/\/127\.0\.0\.1:\d+/);
    const health = await fetch(`${url}/healthz`);
    expect(health.status).toBe(200);
    expect(await health.json()).toMatchObject({ ok: true, service: 'research-control-plane' });

    const deep = await (await fetch(`${url}/control/health`, { headers: { authorization: `Bearer ${TOKEN}` } })).json();
    expect(deep).toMatchObject({ ok: true, store_backend: 'embedded', temporal: { ok: true, worker_state: 'RUNNING' } });

    const login = await fetch(`${url}/control/api/session`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ token: TOKEN }),
    });
    expect(login.status).toBe(200);

    const temporalPid = Number((await readFile(join(dir, 'state/temporal/dev-server.pid'), 'utf8')).trim());
    expect(isProcessAlive(temporalPid)).toBe(true);
    first.child.kill('SIGTERM');
    expect(await first.exited).toBe(0);
    expect(isProcessAlive(temporalPid)).toBe(false);
    await expect(fetch(`${url}/healthz`)).rejects.toThrow();

    const second = startEntryPoint(configPath);
    const secondUrl = await waitForBanner(second);
    const events = await fetch(`${secondUrl}/control/api/v1/events?entity_type=dashboard_session`, {
      headers: { authorization: `Bearer ${TOKEN}` },
    });
    expect(((await events.json()) as { items: unknown[] }).items).toHaveLength(1);
    second.child.kill('SIGINT');
    expect(await second.exited).toBe(0);
  }, 180_000);

  it('runs on Postgres against TEMPORAL_ADDRESS and serves the worker gate on the same port: the bundled simulated agent completes a run', async () => {
    const database = await createTestDatabase();
    const receiver = await CallbackReceiver.start();
    const pgConfigPath = join(dir, 'pg.json');
    const base = JSON.parse(await readFile(configPath, 'utf8')) as Record<string, unknown>;
    await writeFile(
      pgConfigPath,
      JSON.stringify({
        ...base,
        control_plane_store_backend: 'pg',
        pg_database_url: database.url,
        roles: ['control_plane', 'worker_gate'],
        worker_wake_gate_bearer_token: GATE_TOKEN,
        completion_callback_url: receiver.url,
        dispatch_script_path: SIMULATED_AGENT_PATH,
        default_workload_class: 'unknown',
        sample_interval_sec: 1,
        idle_sustain_sec: 30,
        cpu_idle_threshold_pct: 100,
      }),
    );
    const started = startEntryPoint(pgConfigPath, { TEMPORAL_ADDRESS: inject('temporalAddress'), SIMULATED_AGENT_WORK_SEC: '1' });
    try {
      const url = await waitForBanner(started);
      expect(started.output()).not.toContain('Temporal UI');
      expect(started.output()).toContain(`worker gate:  ${url}/dashboard/api`);
      const health = await (await fetch(`${url}/control/health`, { headers: { authorization: `Bearer ${TOKEN}` } })).json();
      expect(health).toMatchObject({
        ok: true,
        store_backend: 'pg',
        db_path: expect.stringContaining(database.name),
        temporal: { ok: true, address: inject('temporalAddress'), worker_state: 'RUNNING' },
      });
      expect(await (await fetch(`${url}/healthz`)).json()).toMatchObject({ ok: true, worker_gate: { ready: true } });

      const gateAuth = { authorization: `Bearer ${GATE_TOKEN}`, 'content-type': 'application/json' };
      const run = { run_id: 'sim-run', project_id: 'sim', project_dir: 'sim', prompt_file: 'prompt.md' };
      const post = (path: string, body: unknown) => fetch(`${url}${path}`, { method: 'POST', headers: gateAuth, body: JSON.stringify(body) });
      expect((await post('/prepare-project', { ...run, prompt_text: '# Simulated\n' })).status).toBe(200);
      expect((await post('/dispatch', { ...run, mode: 'exec', model: 'none', reasoning_effort: 'low', sandbox: '' })).status).toBe(200);
      const finished = await receiver.waitFor('sim-run', 'session_finished_ready', 80_000);
      expect(finished.body.evidence).toMatchObject({ run_notes: true, decision_file: true, decision: 'inconclusive', results_json_files: 1 });
      expect(receiver.forRun('sim-run').map((c) => c.body.event_type)).toEqual(['session_started', 'session_finished_ready']);

      started.child.kill('SIGTERM');
      expect(await started.exited).toBe(0);
    } finally {
      started.child.kill('SIGKILL');
      await receiver.down();
      await database.drop();
    }
  }, 150_000);

  it('refuses a broken configuration with exit status 2, listing every problem and binding nothing', async () => {
    const port = await freePort();
    const badPath = join(dir, 'bad.json');
    await writeFile(badPath, JSON.stringify({ listen_port: port, sample_interval_sec: 0, control_api_bearer_token: 'changeme' }));
    const started = startEntryPoint(badPath);
    expect(await started.exited).toBe(2);
    const output = started.output();
    for (const field of ['completion_callback_url', 'state_dir', 'sample_interval_sec', 'control_api_bearer_token']) {
      expect(output).toContain(field);
    }
    await expect(fetch(`http://127.0.0.1:${port}/healthz`)).rejects.toThrow();
  }, 60_000);
});
