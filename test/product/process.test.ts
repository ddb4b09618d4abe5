import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { testPort } from '../support/ports.ts';
import { SIMULATED_AGENT_PATH } from '../../platform/config/first-run.ts';
import { createTestDatabase } from '../support/database.ts';
import { CallbackReceiver } from '../support/gate.ts';
import { isProcessAlive, isProcessRunning, START_COMMAND_ARGS } from '../support/process.ts';
import { sampleValue, scrape } from '../support/prometheus.ts';
import { acceptsConnections, rawConnection, stalledBodyRequest } from '../support/raw-socket.ts';

// expected duration: ~85 s

const TOKEN = 'process-test-token-0123456789abcdef';
const GATE_TOKEN = 'process-test-gate-token-0123456789';

interface StartedProcess {
  child: ChildProcess;
  output: () => string;
  exited: Promise<number | null>;
}

/** Every entry point a test started: a test that fails half-way must not leave a control plane running. */
const entryPoints: ChildProcess[] = [];
afterAll(() => {
  for (const child of entryPoints) if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
});

function startEntryPoint(configPath: string, env: Record<string, string> = {}): StartedProcess {
  const child = spawn(process.execPath, [...START_COMMAND_ARGS], {
    env: { ...process.env, SVC_CONFIG: configPath, SVC_CONTROL_PLANE_CONFIG: '', TEMPORAL_ADDRESS: '', LOG_LEVEL: 'warn', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  entryPoints.push(child);
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


/** A loopback control plane on a free port, its paths relative to the config file. */
const processConfig = (extra: Record<string, unknown>): Record<string, unknown> => ({
  control_api_bearer_token: TOKEN,
  completion_callback_url: 'http://127.0.0.1:9/control/api/worker-callback',
  completion_callback_token: 'process-test-callback-0123456789',
  state_dir: './state',
  project_root: './projects',
  dispatch_script_path: './agent.sh',
  listen_host: '127.0.0.1',
  listen_port: 0,
  ...extra,
});

describe('the real entry point', () => {
  let dir: string;
  let configPath: string;

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'rcp-process-'));
    configPath = join(dir, 'config.json');
    await writeFile(configPath, JSON.stringify(processConfig({ temporal_ui_port: await testPort() })));
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
    // Two starts of up to 90 s each (waitForBanner) and their exits: on a busy 2-core machine the embedded Temporal's
    // start takes most of that, and a shorter limit cut the test off before a slow start could say what it waited on.
  }, 240_000);

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
        state_dir: './state-pg',
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
        // The gate served here says how it confines its agents: this test's directory is closed to other users, so
        // bwrap runs them as the gate's own user.
        worker_gate: { ready: true, agent_isolation: { sandboxed: true, mode: expect.stringMatching(/^(isolated|sandboxed)$/) } },
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

      // One scrape with the control token covers both roles: the gate's series moved with the run.
      const metrics = await scrape(url, TOKEN);
      expect(sampleValue(metrics, 'rcp_gate_runs', { gate_state: 'finished_ready' })).toBe(1);
      expect(sampleValue(metrics, 'rcp_gate_samples')).toBeGreaterThan(0);
      expect(sampleValue(metrics, 'rcp_gate_sampling_cpu_seconds')).toBeGreaterThan(0);
      expect(sampleValue(metrics, 'rcp_gate_outbox_pending')).toBe(0);
      expect(sampleValue(metrics, 'rcp_queue_items', { status: 'queued' })).toBe(0);
      expect((await fetch(`${url}/metrics`, { headers: { authorization: `Bearer ${GATE_TOKEN}` } })).status).toBe(401);

      started.child.kill('SIGTERM');
      expect(await started.exited).toBe(0);
    } finally {
      started.child.kill('SIGKILL');
      await receiver.down();
      await database.drop();
    }
  }, 150_000);

  it('refuses a broken configuration with exit status 2, listing every problem and binding nothing', async () => {
    const port = await testPort();
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

/** The parts of the 408 answer that matter: status, body shape, and that the server closes the connection. */
const REQUEST_TIMEOUT_ANSWER = /HTTP\/1\.1 408 Request Timeout\r\n[\s\S]*connection: close\r\n[\s\S]*x-content-type-options: nosniff\r\n[\s\S]*\r\n\r\n\{"detail":"request timeout"\}$/i;
const REQUEST_TIMEOUT_SEC = 2;
// The server answers by the configured limit; the slack absorbs a loaded test machine.
const LIMIT_MS = REQUEST_TIMEOUT_SEC * 1000;
const SLACK_MS = 1_000;

describe('a stalled client (docs/http.md#http-conventions)', () => {
  let dir: string;
  let base: Record<string, unknown>;

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'rcp-process-stalled-'));
    base = processConfig({ http_request_timeout_sec: REQUEST_TIMEOUT_SEC });
  });
  afterAll(async () => rm(dir, { recursive: true, force: true }));

  describe('on the control plane with the embedded Temporal, its UI off', () => {
    let started: StartedProcess;
    let url: string;
    let uiPort: number;
    let frontendPort: number;

    beforeAll(async () => {
      uiPort = await testPort();
      frontendPort = await testPort();
      const configPath = join(dir, 'control-plane.json');
      await writeFile(configPath, JSON.stringify({ ...base, temporal_ui_enabled: false, temporal_ui_port: uiPort, temporal_dev_server_port: frontendPort }));
      started = startEntryPoint(configPath);
      url = await waitForBanner(started);
    }, 120_000);
    afterAll(() => {
      started.child.kill('SIGKILL');
    });

    it('advertises no Temporal UI and starts none; the dev server listens on temporal_dev_server_port', async () => {
      expect(started.output()).toMatch(new RegExp(`Temporal:\\s+127\\.0\\.0\\.1:${frontendPort}\\n`));
      expect(started.output()).not.toContain('Temporal UI');
      const health = (await (await fetch(`${url}/control/health`, { headers: { authorization: `Bearer ${TOKEN}` } })).json()) as {
        temporal: Record<string, unknown>;
      };
      expect(health.temporal).toMatchObject({ ok: true });
      expect(health.temporal).not.toHaveProperty('ui_url');
      const temporalPid = Number((await readFile(join(dir, 'state/temporal/dev-server.pid'), 'utf8')).trim());
      expect((await readFile(`/proc/${temporalPid}/cmdline`, 'utf8')).split('\0')).toContain('--headless');
      expect(await acceptsConnections('127.0.0.1', uiPort)).toBe(false);
    });

    it('answers a stalled body 408 within http_request_timeout_sec and closes the connection, with or without credentials', async () => {
      const withToken = await rawConnection(url, stalledBodyRequest('/control/pause', { authorization: `Bearer ${TOKEN}` }));
      const without = await rawConnection(url, stalledBodyRequest('/control/pause'));

      const answered = await withToken.closed;
      expect(answered.text).toMatch(/^HTTP\/1\.1 408 /);
      expect(answered.text).toMatch(REQUEST_TIMEOUT_ANSWER);
      expect(answered.afterMs).toBeGreaterThanOrEqual(LIMIT_MS / 2);
      expect(answered.afterMs).toBeLessThan(LIMIT_MS + SLACK_MS);

      // Refused at once by the auth hook, yet the unread body must not keep the connection open either.
      const refused = await without.closed;
      expect(refused.text).toMatch(/^HTTP\/1\.1 401 /);
      expect(refused.text).toMatch(REQUEST_TIMEOUT_ANSWER);
      expect(refused.afterMs).toBeLessThan(LIMIT_MS + SLACK_MS);
    });

    it('stops cleanly on SIGINT with stalled requests open, well before the shutdown deadline, and takes Temporal down with it', async () => {
      const temporalPid = Number((await readFile(join(dir, 'state/temporal/dev-server.pid'), 'utf8')).trim());
      const temporalPort = Number(/Temporal:\s+127\.0\.0\.1:(\d+)/.exec(started.output())![1]);
      const stalled = [
        await rawConnection(url, stalledBodyRequest('/control/pause', { authorization: `Bearer ${TOKEN}` })),
        await rawConnection(url, stalledBodyRequest('/control/pause')),
      ];
      await new Promise((resolve) => setTimeout(resolve, 200));

      const signalledAt = Date.now();
      started.child.kill('SIGINT');
      expect(await started.exited).toBe(0);
      // Closing stops Node's request deadlines, so only the drain grace (5 s) ends these; the hard deadline is 30 s.
      expect(Date.now() - signalledAt).toBeLessThan(15_000);
      expect(started.output()).not.toContain('shutdown took too long');
      for (const connection of stalled) expect(connection.isOpen()).toBe(false);
      expect(isProcessRunning(temporalPid)).toBe(false);
      expect(await acceptsConnections('127.0.0.1', temporalPort)).toBe(false);
    }, 40_000);
  });

  describe('on a worker gate serving alone', () => {
    const MAX_CONNECTIONS = 3;
    let started: StartedProcess;
    let url: string;

    beforeAll(async () => {
      const configPath = join(dir, 'gate.json');
      await writeFile(
        configPath,
        JSON.stringify({ ...base, roles: ['worker_gate'], worker_wake_gate_bearer_token: GATE_TOKEN, http_max_connections: MAX_CONNECTIONS }),
      );
      started = startEntryPoint(configPath);
      url = await waitForBanner(started);
    }, 60_000);
    afterAll(async () => {
      started.child.kill('SIGTERM');
      expect(await started.exited).toBe(0);
    });

    it('closes connections beyond http_max_connections at once, and frees the slots of connections that send nothing', async () => {
      const held = await Promise.all(Array.from({ length: MAX_CONNECTIONS }, () => rawConnection(url)));
      // The server counts a connection once it has accepted it; give it a moment for the last one.
      await new Promise((resolve) => setTimeout(resolve, 100));
      const extra = await Promise.all([rawConnection(url), rawConnection(url)]);
      for (const connection of extra) {
        const { text, afterMs } = await connection.closed;
        expect(text).toBe('');
        expect(afterMs).toBeLessThan(SLACK_MS);
      }
      expect(held.every((connection) => connection.isOpen())).toBe(true);

      for (const connection of held) {
        const { text, afterMs } = await connection.closed;
        expect(text).toMatch(REQUEST_TIMEOUT_ANSWER);
        expect(afterMs).toBeLessThan(LIMIT_MS + SLACK_MS);
      }
      // The client sees the server's close before the server's own process has counted the slot free; give it that moment.
      expect(await healthzStatusWithin(url, SLACK_MS)).toBe(200);
    });

    it.each([
      ['not HTTP', 'GARBAGE\r\n\r\n', 400, 'bad request'],
      ['headers over 16 KiB', `GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Padding: ${'a'.repeat(20_000)}\r\n\r\n`, 431, 'request headers too large'],
    ])('answers a request it cannot read (%s) in the usual error shape and closes the connection', async (_, bytes, status, detail) => {
      const { text, afterMs } = await (await rawConnection(url, bytes)).closed;
      expect(text).toMatch(new RegExp(`^HTTP/1\\.1 ${status} [^\r]+\r\n`));
      expect(text.toLowerCase()).toContain('connection: close\r\n');
      expect(text).toMatch(/\r\nx-request-id: [0-9a-f-]{36}\r\n/);
      expect(text.slice(text.indexOf('\r\n\r\n') + 4)).toBe(JSON.stringify({ detail }));
      expect(afterMs).toBeLessThan(SLACK_MS);
    });

    it('answers a stalled body 408 within http_request_timeout_sec', async () => {
      const connection = await rawConnection(url, stalledBodyRequest('/dispatch', { authorization: `Bearer ${GATE_TOKEN}` }));
      const { text, afterMs } = await connection.closed;
      expect(text).toMatch(/^HTTP\/1\.1 408 /);
      expect(text).toMatch(REQUEST_TIMEOUT_ANSWER);
      expect(afterMs).toBeLessThan(LIMIT_MS + SLACK_MS);
    });
  });
});

/** The status of GET /healthz, asked again while the server resets the connection, until `withinMs` has passed. */
async function healthzStatusWithin(url: string, withinMs: number): Promise<number> {
  const deadline = Date.now() + withinMs;
  for (;;) {
    try {
      return (await fetch(`${url}/healthz`)).status;
    } catch (error) {
      if (Date.now() > deadline) throw error;
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  }
}
