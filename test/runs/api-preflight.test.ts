import { rm } from 'node:fs/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { dispatchSettingsFrom, type DispatchSettings } from '../../capabilities/runs/dispatch-settings.ts';
import { testPort } from '../support/ports.ts';
import { ConfigFileSchema } from '../../platform/config/schema.ts';
import { runWorkerPreflight } from '../../capabilities/runs/worker-preflight.ts';
import { DISPATCH_REQUIRED_CHECKS, PREFLIGHT_DEFAULTS, type PreflightCheck, type PreflightResult } from '../../capabilities/runs/domain/preflight-checks.ts';
import { setFlag } from '../../capabilities/runs/queue-flags.ts';
import { openStore } from '../../platform/store/open-store.ts';
import { startTestApp, TEST_TOKEN, type TestApp } from '../support/app.ts';
import { createTestDatabase } from '../support/database.ts';
import {
  CALLBACK_TOKEN,
  FAKE_GPU_BIN,
  GATE_TOKEN,
  startGateProcess,
  writeGateConfig,
  type GateFixture,
  type GateProcess,
} from '../support/gate.ts';

const PATH = '/control/api/preflight';
// Nothing listens here: the gates never call back during a preflight.
const UNUSED_CALLBACK_URL = 'http://127.0.0.1:9/control/api/worker-callback';
const WRONG_GATE_TOKEN = 'wrong-gate-token-fedcba9876543210';
const HUGE_FLOOR_MIB = 1_000_000_000;

interface RunningGate {
  fixture: GateFixture;
  process: GateProcess;
}

async function startGate(overrides: Record<string, unknown> = {}): Promise<RunningGate> {
  const fixture = await writeGateConfig({ callbackUrl: UNUSED_CALLBACK_URL, overrides });
  // The fake nvidia-smi reports one GPU at 3 %.
  const gateProcess = await startGateProcess(fixture, { PATH: `${FAKE_GPU_BIN}:${process.env.PATH ?? ''}` });
  return { fixture, process: gateProcess };
}

function settingsFor(fields: Record<string, unknown>): DispatchSettings {
  const file = ConfigFileSchema.parse({
    control_api_bearer_token: TEST_TOKEN,
    completion_callback_url: UNUSED_CALLBACK_URL,
    completion_callback_token: CALLBACK_TOKEN,
    dispatch_timeout_sec: 5,
    // Required by the schema, never touched by a preflight.
    state_dir: './unused-state',
    project_root: './unused-projects',
    dispatch_script_path: './unused-agent.sh',
    ...fields,
  });
  return dispatchSettingsFrom({ ...file, research_provider_api_key: undefined });
}

let healthy: RunningGate;
let otherCallbackToken: RunningGate;
let downUrl: string;
let settings: DispatchSettings;
let testApp: TestApp;

beforeAll(async () => {
  [healthy, otherCallbackToken] = await Promise.all([
    startGate(),
    startGate({ completion_callback_token: 'another-callback-token-0123456789abcdef' }),
  ]);
  downUrl = `http://127.0.0.1:${await testPort()}`;
  const target = (url: string, extra: Record<string, unknown> = {}) => ({ wake_gate_url: url, bearer_token: GATE_TOKEN, role: 'gpu_worker', ...extra });
  settings = settingsFor({
    worker_wake_gate_url: healthy.fixture.url,
    worker_wake_gate_bearer_token: GATE_TOKEN,
    worker_targets: {
      roomy: target(`${healthy.fixture.url}/`, { role: 'cpu_worker', min_memory_available_mib: 1 }),
      cramped: target(healthy.fixture.url, { min_memory_available_mib: HUGE_FLOOR_MIB }),
      mismatch: target(otherCallbackToken.fixture.url),
      down: target(downUrl),
    },
  });
  testApp = await startTestApp({ dispatch: settings });
}, 120_000);

afterAll(async () => {
  await testApp?.close();
  for (const gate of [healthy, otherCallbackToken]) {
    await gate?.process.kill('SIGTERM');
    if (gate) await rm(gate.fixture.dir, { recursive: true, force: true });
  }
});

async function preflight(body?: Record<string, unknown>, app: TestApp = testApp) {
  const response = await app.app.inject({
    method: 'POST',
    url: PATH,
    headers: app.auth,
    ...(body === undefined ? {} : { payload: body }),
  });
  return { status: response.statusCode, body: response.json() as PreflightResult & { detail?: unknown } };
}

function checkOf(result: PreflightResult, name: PreflightCheck['name']): PreflightCheck {
  const found = result.checks.find((c) => c.name === name);
  if (!found) throw new Error(`no ${name} check in ${JSON.stringify(result)}`);
  return found;
}

async function observationRows() {
  const result = await testApp.store.query<Record<string, unknown>>('SELECT * FROM worker_observations ORDER BY observation_id');
  return result.rows;
}

describe('preflight against a real worker gate', () => {
  it('passes in non-strict mode against the default worker', async () => {
    const { status, body } = await preflight({ require_paused: false });
    expect(status).toBe(200);
    expect(body).toMatchObject({ ok: true, target: 'default' });
    expect(body.summary).toMatch(/^worker default ready: \d\/9 checks passed/);
    expect(body.checks.map((c) => c.name)).toEqual([
      'control_maintenance_mode',
      'wake_gate_healthz',
      'wake_gate_dashboard_api',
      'worker_gpu_idle',
      'worker_memory_available',
      'worker_no_live_runs',
      'worker_callback_token_compatible',
      'worker_agent_isolation',
      'worker_capacity_matches',
    ]);
    expect(checkOf(body, 'wake_gate_healthz')).toMatchObject({ ok: true, data: { status: 200 } });
    expect(checkOf(body, 'wake_gate_dashboard_api')).toMatchObject({ ok: true, data: { status: 200 } });
    expect(checkOf(body, 'worker_memory_available').data).toMatchObject({ min_memory_available_mib: 16384 });
  });

  it('passes in strict mode when the thresholds fit the machine, with the gate figures in data', async () => {
    const { status, body } = await preflight({ require_paused: false, strict: true, min_memory_available_mib: 1 });
    expect(status).toBe(200);
    expect(body.checks.filter((c) => !c.ok)).toEqual([]);
    expect(body).toMatchObject({ ok: true, summary: 'worker default ready: 9/9 checks passed' });
    // The real gate sandboxes its agents (bwrap), so a strict preflight passes it.
    expect(checkOf(body, 'worker_agent_isolation')).toMatchObject({ ok: true, data: { sandboxed: true } });
    expect(checkOf(body, 'worker_gpu_idle').data).toMatchObject({ gpu_pct: 3, max_gpu_pct: 5 });
    expect(checkOf(body, 'worker_memory_available').data.memory_available_mib).toBeGreaterThan(0);
    expect(checkOf(body, 'worker_no_live_runs').data).toMatchObject({ live: 0 });
    expect(checkOf(body, 'worker_callback_token_compatible').data).toMatchObject({ matches: true });
    expect(checkOf(body, 'wake_gate_healthz').data.ms).toEqual(expect.any(Number));
  });

  it('fails strict mode when the GPU is busier than max_gpu_pct', async () => {
    const { body } = await preflight({ require_paused: false, strict: true, min_memory_available_mib: 1, max_gpu_pct: 2 });
    expect(body.ok).toBe(false);
    expect(checkOf(body, 'worker_gpu_idle')).toMatchObject({ ok: false, detail: 'GPU at 3% (limit 2%)' });
    expect(body.summary).toBe('worker default not ready: worker_gpu_idle failed (GPU at 3% (limit 2%))');
  });

  it('answers a POST without a body with the defaults', async () => {
    const { status, body } = await preflight();
    expect(status).toBe(200);
    expect(body.target).toBe('default');
    expect(body.checks[0]?.name).toBe('control_queue_paused');
  });

  it('fails require_paused while the queue runs, and passes it once paused', async () => {
    const running = await preflight({});
    expect(running.status).toBe(200);
    expect(running.body.ok).toBe(false);
    expect(checkOf(running.body, 'control_queue_paused')).toMatchObject({ ok: false, data: { queue_paused: false } });
    expect(running.body.summary).toMatch(/^worker default not ready: control_queue_paused failed/);

    await testApp.store.transaction((tx) => setFlag(tx, 'queue_paused', true, 'preflight-test'));
    try {
      const paused = await preflight({ require_paused: true });
      expect(paused.body.ok).toBe(true);
      expect(checkOf(paused.body, 'control_queue_paused')).toMatchObject({ ok: true, data: { queue_paused: true } });
    } finally {
      await testApp.store.transaction((tx) => setFlag(tx, 'queue_paused', false, 'preflight-test'));
    }
  });

  it('reports a refused bearer token from the body, and never logs, stores or echoes it', async () => {
    const before = (await observationRows()).length;
    const response = await testApp.app.inject({
      method: 'POST',
      url: PATH,
      headers: testApp.auth,
      payload: { wake_gate_url: healthy.fixture.url, bearer_token: WRONG_GATE_TOKEN, require_paused: false, strict: true },
    });
    expect(response.statusCode).toBe(200);
    const body = response.json() as PreflightResult;
    expect(body.ok).toBe(false);
    const dashboard = checkOf(body, 'wake_gate_dashboard_api');
    // The gate's identity proof, keyed by its own token, does not match the one given: that token is never sent.
    expect(dashboard).toMatchObject({ ok: false });
    expect(dashboard.detail).toContain('holds another token (its proof does not match the token); its token was not sent');
    expect(checkOf(body, 'worker_callback_token_compatible').ok).toBe(false);
    expect(checkOf(body, 'wake_gate_healthz').ok).toBe(true);

    const rows = await observationRows();
    expect(rows).toHaveLength(before + 1);
    expect(rows.at(-1)).toMatchObject({ target: 'default', wake_gate_url: healthy.fixture.url, ok: false, summary: body.summary });
    expect(JSON.stringify(rows)).not.toContain(WRONG_GATE_TOKEN);
    expect(JSON.stringify(rows)).not.toContain(GATE_TOKEN);
    expect(response.body).not.toContain(WRONG_GATE_TOKEN);
    expect(testApp.logs.lines.length).toBeGreaterThan(0);
    expect(testApp.logs.text).not.toContain(WRONG_GATE_TOKEN);
    expect(testApp.logs.text).not.toContain(GATE_TOKEN);

    // The configured token is back for the next call.
    const next = await preflight({ wake_gate_url: healthy.fixture.url, require_paused: false });
    expect(checkOf(next.body, 'wake_gate_dashboard_api')).toMatchObject({ ok: true, data: { status: 200 } });
  });

  it('fails worker_callback_token_compatible for a gate with another completion_callback_token', async () => {
    const { status, body } = await preflight({ machine_target: 'mismatch', require_paused: false, strict: true, min_memory_available_mib: 1 });
    expect(status).toBe(200);
    expect(body).toMatchObject({ ok: false, target: 'mismatch' });
    expect(checkOf(body, 'worker_callback_token_compatible')).toMatchObject({ ok: false, data: { matches: false } });
    expect(body.checks.filter((c) => !c.ok).map((c) => c.name)).toEqual(['worker_callback_token_compatible']);
    expect(body.summary).toMatch(/^worker mismatch not ready: worker_callback_token_compatible failed/);
  });

  it('reports a worker that is down as not ready, still with 200, and caches the observation', async () => {
    for (const body of [{ machine_target: 'down' }, { wake_gate_url: downUrl }]) {
      const before = (await observationRows()).length;
      const response = await preflight({ ...body, require_paused: false });
      expect(response.status).toBe(200);
      expect(response.body).toMatchObject({ ok: false, target: 'down' });
      const healthz = checkOf(response.body, 'wake_gate_healthz');
      expect(healthz).toMatchObject({ ok: false, data: { status: null } });
      expect(healthz.detail).toContain('connection refused');
      expect(checkOf(response.body, 'wake_gate_dashboard_api').ok).toBe(false);
      expect(response.body.summary).toMatch(/^worker down not ready: wake_gate_healthz failed \(.*connection refused/);
      const rows = await observationRows();
      expect(rows).toHaveLength(before + 1);
      expect(rows.at(-1)).toMatchObject({ target: 'down', wake_gate_url: downUrl, ok: false, run_id: null });
      expect(rows.at(-1)?.checks).toEqual(response.body.checks);
    }
  });
});

describe('target resolution', () => {
  it('uses the memory floor of machine_target unless the body sets one', async () => {
    const roomy = await preflight({ machine_target: 'roomy', require_paused: false, strict: true });
    expect(roomy.body).toMatchObject({ ok: true, target: 'roomy' });
    expect(checkOf(roomy.body, 'worker_memory_available')).toMatchObject({ ok: true, data: { min_memory_available_mib: 1 } });

    const cramped = await preflight({ machine_target: 'cramped', require_paused: false, strict: true });
    expect(cramped.body).toMatchObject({ ok: false, target: 'cramped' });
    expect(checkOf(cramped.body, 'worker_memory_available')).toMatchObject({ ok: false, data: { min_memory_available_mib: HUGE_FLOOR_MIB } });

    const overridden = await preflight({ machine_target: 'cramped', require_paused: false, strict: true, min_memory_available_mib: 1 });
    expect(checkOf(overridden.body, 'worker_memory_available')).toMatchObject({ ok: true, data: { min_memory_available_mib: 1 } });
  });

  it('accepts machine_target together with its own URL, and refuses another URL', async () => {
    const same = await preflight({ machine_target: 'roomy', wake_gate_url: healthy.fixture.url, require_paused: false });
    expect(same).toMatchObject({ status: 200, body: { target: 'roomy' } });
    const other = await preflight({ machine_target: 'roomy', wake_gate_url: downUrl });
    expect(other.status).toBe(400);
    expect(other.body.detail).toBe("wake_gate_url is not the URL of machine_target 'roomy'");
  });

  it('answers 404 for an unknown machine_target', async () => {
    const { status, body } = await preflight({ machine_target: 'nowhere' });
    expect(status).toBe(404);
    expect(body).toEqual({ detail: "unknown machine_target 'nowhere'" });
  });

  it('matches a configured wake_gate_url regardless of a trailing slash, preferring the default worker', async () => {
    const { body } = await preflight({ wake_gate_url: `${healthy.fixture.url}/`, require_paused: false });
    expect(body.target).toBe('default');
    const mismatch = await preflight({ wake_gate_url: `${otherCallbackToken.fixture.url}/`, require_paused: false });
    expect(mismatch.body.target).toBe('mismatch');
  });

  it('refuses a wake_gate_url that is not a configured worker URL, calling nothing', async () => {
    const before = (await observationRows()).length;
    const { status, body } = await preflight({ wake_gate_url: 'http://169.254.169.254/latest' });
    expect(status).toBe(400);
    expect(body).toEqual({ detail: 'wake_gate_url is not a configured worker URL' });
    expect(await observationRows()).toHaveLength(before);
  });

  it('answers 400 when no default worker is configured, or no dispatch settings at all', async () => {
    const withoutDefault = await startTestApp({
      dispatch: settingsFor({ worker_targets: { solo: { wake_gate_url: healthy.fixture.url, bearer_token: GATE_TOKEN, role: 'gpu_worker' } } }),
    });
    const bare = await startTestApp();
    try {
      for (const app of [withoutDefault, bare]) {
        const { status, body } = await preflight({}, app);
        expect(status).toBe(400);
        expect(body).toEqual({ detail: 'wake_gate_url is not configured' });
      }
      expect((await preflight({ machine_target: 'solo', require_paused: false }, withoutDefault)).body).toMatchObject({ ok: true, target: 'solo' });
      expect((await preflight({ wake_gate_url: healthy.fixture.url }, bare)).status).toBe(400);
      expect((await preflight({ machine_target: 'solo' }, bare)).status).toBe(404);
    } finally {
      await withoutDefault.close();
      await bare.close();
    }
  });
});

describe('request validation and auth', () => {
  it('rejects unknown fields with 422 and a body loc', async () => {
    const { status, body } = await preflight({ require_paused: false, surprise: 1 });
    expect(status).toBe(422);
    expect(body.detail).toEqual([expect.objectContaining({ loc: ['body', 'surprise'] })]);
  });

  it('rejects out-of-range and wrongly typed values with 422', async () => {
    const cases: [Record<string, unknown>, string][] = [
      [{ max_gpu_pct: 101 }, 'max_gpu_pct'],
      [{ min_memory_available_mib: 1.5 }, 'min_memory_available_mib'],
      [{ min_memory_available_mib: -1 }, 'min_memory_available_mib'],
      [{ strict: 'yes' }, 'strict'],
      [{ wake_gate_url: 'ftp://example.com' }, 'wake_gate_url'],
    ];
    for (const [payload, field] of cases) {
      const { status, body } = await preflight(payload);
      expect(status, field).toBe(422);
      expect(body.detail).toEqual([expect.objectContaining({ loc: ['body', field] })]);
    }
  });

  it('answers 401 without the bearer token, calling nothing', async () => {
    const before = (await observationRows()).length;
    const response = await testApp.app.inject({ method: 'POST', url: PATH, payload: { require_paused: false } });
    expect(response.statusCode).toBe(401);
    expect(response.headers['www-authenticate']).toBe('Bearer');
    expect(response.json()).toEqual({ detail: 'invalid bearer token' });
    expect(await observationRows()).toHaveLength(before);
  });
});

describe('runWorkerPreflight', () => {
  const defaultTarget = () => settings.routing.targets.get('default')!;

  it('records the run it was taken for, and decides ok by the required checks alone', async () => {
    const runId = 'preflight-probe-20250101T000000Z';
    const result = await runWorkerPreflight(
      { store: testApp.store, settings },
      { ...PREFLIGHT_DEFAULTS, require_paused: false, max_gpu_pct: 0, min_memory_available_mib: HUGE_FLOOR_MIB, required: DISPATCH_REQUIRED_CHECKS, target: defaultTarget(), run_id: runId },
    );
    expect(result.ok).toBe(true);
    expect(result.checks.filter((c) => !c.ok).map((c) => c.name)).toEqual(['worker_gpu_idle', 'worker_memory_available']);
    const rows = await testApp.store.query('SELECT target, ok, run_id FROM worker_observations WHERE run_id = $1', [runId]);
    expect(rows.rows).toEqual([{ target: 'default', ok: true, run_id: runId }]);
  });

  it('answers on a read-only store without caching the observation', async () => {
    const database = await createTestDatabase();
    const store = await openStore({ backend: 'pg_readonly', pgDatabaseUrl: database.url });
    try {
      const result = await runWorkerPreflight({ store, settings }, { ...PREFLIGHT_DEFAULTS, require_paused: false, target: defaultTarget() });
      expect(result).toMatchObject({ ok: true, target: 'default' });
      const rows = await store.query('SELECT count(*)::int AS n FROM worker_observations');
      expect(rows.rows).toEqual([{ n: 0 }]);
    } finally {
      await store.close();
      await database.drop();
    }
  });
});
