import { rm } from 'node:fs/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createServer } from '../../api/create-server.ts';
import type { DispatchSettings } from '../../capabilities/runs/dispatch-settings.ts';
import { AGENT_DEFAULTS } from '../../capabilities/runs/dispatch-settings.ts';
import { createLogger } from '../../platform/observability/logger.ts';
import { testPort } from '../support/ports.ts';
import { workerRoutingFrom, type RoutingConfig } from '../../capabilities/runs/domain/worker-lanes.ts';
import { emptyPaperPipelineCounts } from '../../capabilities/papers/domain/paper-candidacy.ts';
import { QUEUE_STATUSES, type QueueStatus } from '../../capabilities/runs/domain/queue-status.ts';
import type { RunState } from '../../capabilities/runs/domain/run-state.ts';
import type { WorkloadClass } from '../../worker-gate/contract/workload.ts';
import { openStore } from '../../platform/store/open-store.ts';
import { insertProject } from '../../capabilities/runs/projects.ts';
import { insertQueueItem } from '../../capabilities/runs/queue-items.ts';
import type { Store } from '../../platform/store/store.ts';
import { insertWorkerObservation } from '../../capabilities/runs/worker-observations.ts';
import { httpOnlyDeps, LogCapture, startTestApp, TEST_TOKEN, type TestApp } from '../support/app.ts';
import { createTestDatabase } from '../support/database.ts';
import { CALLBACK_TOKEN, GATE_TOKEN, startGateProcess, writeGateConfig, type GateFixture, type GateProcess } from '../support/gate.ts';
import { jsonClient, seedWorkerCallback } from '../support/ledgers.ts';

const SECRET_A = 'status-test-worker-secret-aaaaaaaa';
const SECRET_B = 'status-test-worker-secret-bbbbbbbb';
const NO_GATE = 'http://127.0.0.1:9';

function dispatchSettings(routing: Partial<RoutingConfig>, liveDispatchEnabled = false): DispatchSettings {
  return {
    liveDispatchEnabled,
    routing: workerRoutingFrom({ worker_targets: {}, workload_machine_targets: {}, ...routing }),
    completionCallbackToken: CALLBACK_TOKEN,
    dispatchTimeoutSec: 5,
    maxWaitAfterIdleSec: 600,
    agent: AGENT_DEFAULTS,
  };
}

/** Every secret a response or a log line must never contain. */
const SECRETS = [TEST_TOKEN, GATE_TOKEN, CALLBACK_TOKEN, SECRET_A, SECRET_B];
const seen: string[] = [];

async function getJson(t: TestApp, url: string) {
  const response = await t.app.inject({ method: 'GET', url, headers: t.auth });
  seen.push(response.body);
  return { status: response.statusCode, body: response.json() as Record<string, any> };
}

function expectNoSecrets(text: string) {
  for (const secret of SECRETS) expect(text).not.toContain(secret);
}

interface SeedItem {
  status: QueueStatus;
  lane?: string;
  run?: { state: RunState } | 'missing';
  machine_target?: string;
  workload_class?: WorkloadClass;
  manual_review_required?: boolean;
}

const runIdOf = (projectId: string) => `${projectId}-20300101T000000Z`;

async function seed(store: Store, items: Record<string, SeedItem>) {
  await store.transaction(async (tx) => {
    for (const [projectId, item] of Object.entries(items)) {
      await insertProject(tx, { project_id: projectId, project_name: projectId, project_dir: projectId });
      await insertQueueItem(tx, {
        project_id: projectId,
        project_name: projectId,
        machine_target: item.machine_target ?? null,
        workload_class: item.workload_class ?? 'unknown',
        manual_review_required: item.manual_review_required ?? false,
      });
      if (item.run && item.run !== 'missing') {
        await tx.query(
          `INSERT INTO runs (run_id, project_id, workflow_id, state, lane, wake_gate_url, workload_class, requested_by, created_at)
           VALUES ($1, $2, $3, $4, $5, $6, 'unknown', 'seed', clock_timestamp() - interval '10 minutes')`,
          [runIdOf(projectId), projectId, `run:${runIdOf(projectId)}`, item.run.state, item.lane ?? 'default', NO_GATE],
        );
      }
      await tx.query('UPDATE queue_items SET status = $2, lane = $3, current_run_id = $4 WHERE project_id = $1', [
        projectId,
        item.status,
        item.lane ?? null,
        item.run ? runIdOf(projectId) : null,
      ]);
    }
  });
}

const seedCallback = (store: Store, key: string, runId: string, projectId: string, eventType: string, agoSec: number, ignoreReason?: string) =>
  seedWorkerCallback(store, { key, runId, projectId, eventType, agoSec, ignoreReason });

describe('without dispatch settings', () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await startTestApp();
  });
  afterAll(async () => {
    expectNoSecrets(t.logs.text);
    await t.close();
  });

  it('answers a zero-filled snapshot blocked by the missing worker and disabled live dispatch', async () => {
    const { status, body } = await getJson(t, '/control/api/status');
    expect(status).toBe(200);
    expect(body).toMatchObject({
      dispatch_safe: false,
      dispatch_blockers: [
        'live dispatch is disabled (live_dispatch_enabled is false)',
        expect.stringMatching(/^no worker target is configured/),
      ],
      flags: { queue_paused: false, maintenance_mode: false },
      live_dispatch_enabled: false,
      active_items: [],
      warnings: [],
      conflicts: [],
    });
    expect(body.counts).toEqual({ ...Object.fromEntries(QUEUE_STATUSES.map((s) => [s, 0])), papers: 0, paper_pipeline: emptyPaperPipelineCounts(), queue_total: 0 });
    expect(body.source_freshness).toEqual([
      { source: 'queue', observed_at: null, age_sec: null, stale: false, ok: null },
      { source: 'worker_callbacks', observed_at: null, age_sec: null, stale: false, ok: null },
    ]);
    expect(Date.parse(body.generated_at)).not.toBeNaN();
    expect(body).not.toHaveProperty('refreshed');
  });

  it('refreshes nothing when there is no worker to refresh', async () => {
    const { body } = await getJson(t, '/control/api/status?refresh_worker=true');
    expect(body.refreshed).toEqual([]);
    const health = await getJson(t, '/control/api/queue-health?refresh_worker=1');
    expect(health.body).toMatchObject({ workers: [], active_runs: [], recent_callbacks: [], refreshed: [] });
  });

  it('validates the query and needs the bearer token', async () => {
    for (const url of ['/control/api/status?refresh_worker=maybe', '/control/api/queue-health?verbose=true']) {
      const { status, body } = await getJson(t, url);
      expect(status).toBe(422);
      expect(body.detail[0].loc[0]).toBe('query');
    }
    for (const url of ['/control/api/status', '/control/api/queue-health']) {
      const response = await t.app.inject({ method: 'GET', url });
      expect(response.statusCode).toBe(401);
    }
  });
});

describe('a seeded queue', () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await startTestApp({
      dispatch: dispatchSettings({
        worker_wake_gate_url: NO_GATE,
        worker_wake_gate_bearer_token: SECRET_A,
        worker_targets: { cpu: { wake_gate_url: NO_GATE, bearer_token: SECRET_B, role: 'cpu_worker' } },
        workload_machine_targets: { cpu_only: 'cpu' },
      }),
    });
    await seed(t.store, {
      'act-ok': { status: 'running', lane: 'default', run: { state: 'running' } },
      'act-norun': { status: 'awaiting_wake', lane: 'cpu' },
      'act-missing': { status: 'dispatching', lane: 'lane-x', run: 'missing' },
      'act-finished': { status: 'reconciling', lane: 'lane-y', run: { state: 'canceled' } },
      'q-nowhere': { status: 'queued', machine_target: 'nowhere' },
      'q-flagged': { status: 'queued', manual_review_required: true },
      'q-cpu': { status: 'queued', workload_class: 'cpu_only' },
      'q-default': { status: 'queued' },
      'b-one': { status: 'blocked' },
      'nr-one': { status: 'needs_review' },
      'de-one': { status: 'dispatch_error' },
      'c-one': { status: 'completed' },
      'p-one': { status: 'paused' },
    });
    await t.store.transaction(async (tx) => {
      await insertWorkerObservation(tx, {
        target: 'default',
        wake_gate_url: NO_GATE,
        ok: false,
        summary: 'gate unreachable',
        checks: [
          { name: 'wake_gate_healthz', ok: false, detail: 'connection refused', data: {} },
          { name: 'control_maintenance_mode', ok: true, detail: 'off', data: {} },
        ],
      });
      const old = await insertWorkerObservation(tx, { target: 'cpu', wake_gate_url: NO_GATE, ok: true, summary: 'fine', checks: [] });
      await tx.query(`UPDATE worker_observations SET observed_at = clock_timestamp() - interval '20 minutes' WHERE observation_id = $1`, [
        old.observation_id,
      ]);
    });
    for (let i = 0; i < 24; i += 1) await seedCallback(t.store, `old-${i}`, 'old-run', 'c-one', 'session_started', 600 - i, i === 0 ? 'not the current run' : undefined);
    await seedCallback(t.store, 'act-ok:session_started', runIdOf('act-ok'), 'act-ok', 'session_started', 1);
    const paused = await jsonClient(t).post('/control/pause', { reason: 'driver upgrade', paused_by: 'ops@test' });
    expect(paused.status).toBe(200);
  });
  afterAll(async () => {
    expectNoSecrets(t.logs.text);
    await t.close();
  });

  it('counts every status, lists the active items with their run state, and blocks on pause, live switch and the failed worker', async () => {
    const { status, body } = await getJson(t, '/control/api/status');
    expect(status).toBe(200);
    expect(body.counts).toEqual({
      queued: 4,
      dispatching: 1,
      running: 1,
      awaiting_wake: 1,
      wake_received: 0,
      reconciling: 1,
      completed: 1,
      paused: 1,
      canceled: 0,
      dispatch_error: 1,
      blocked: 1,
      needs_review: 1,
      usage_limited: 0,
      papers: 0,
      paper_pipeline: emptyPaperPipelineCounts(),
      queue_total: 13,
    });
    expect(body.flags).toEqual({ queue_paused: true, maintenance_mode: false });
    expect(body.dispatch_safe).toBe(false);
    expect(body.dispatch_blockers).toEqual([
      'live dispatch is disabled (live_dispatch_enabled is false)',
      'queue is paused by ops@test: driver upgrade',
      expect.stringMatching(/^worker 'default' failed its latest preflight \(.+\): wake_gate_healthz$/),
    ]);
    const active = Object.fromEntries((body.active_items as any[]).map((item) => [item.project_id, item]));
    expect(Object.keys(active).sort()).toEqual(['act-finished', 'act-missing', 'act-norun', 'act-ok']);
    expect(active['act-ok']).toMatchObject({ status: 'running', lane: 'default', current_run_id: runIdOf('act-ok'), run_state: 'running' });
    expect(active['act-finished']).toMatchObject({ run_state: 'canceled' });
    expect(active['act-missing']).toMatchObject({ current_run_id: runIdOf('act-missing'), run_state: null });
    expect(active['act-norun']).toMatchObject({ current_run_id: null, run_state: null });
  });

  it('reports the ledger conflicts and the warnings', async () => {
    const { body } = await getJson(t, '/control/api/status');
    expect(body.conflicts).toEqual([
      expect.objectContaining({ severity: 'critical', source: 'queue_item:act-norun', message: expect.stringContaining('no current run') }),
      expect.objectContaining({ severity: 'critical', source: 'queue_item:act-missing', message: expect.stringContaining('no run record') }),
      expect.objectContaining({ severity: 'critical', source: `run:${runIdOf('act-finished')}`, message: expect.stringContaining('finished as canceled') }),
      expect.objectContaining({ severity: 'warning', source: 'queue', message: expect.stringContaining('machine_target "nowhere" is not a configured worker target (q-nowhere)') }),
    ]);
    for (const finding of [...body.conflicts, ...body.warnings]) {
      expect(Object.keys(finding).sort()).toEqual(['message', 'severity', 'source', 'suggested_action']);
    }
    expect(body.warnings).toEqual([
      expect.objectContaining({ severity: 'warning', source: 'worker:cpu', message: expect.stringMatching(/last observed \d+ s ago/) }),
      expect.objectContaining({
        source: 'queue',
        message: '4 queue items need attention (blocked 1, needs_review 1, dispatch_error 1, manual_review_required 1)',
      }),
      expect.objectContaining({ source: 'queue', message: expect.stringMatching(/^4 queued items but none is dispatchable/) }),
    ]);
  });

  it('reports the freshness of every source', async () => {
    const { body } = await getJson(t, '/control/api/status');
    expect(body.source_freshness).toEqual([
      { source: 'worker:default', observed_at: expect.any(String), age_sec: expect.any(Number), stale: false, ok: false },
      { source: 'worker:cpu', observed_at: expect.any(String), age_sec: expect.any(Number), stale: true, ok: true },
      { source: 'queue', observed_at: expect.any(String), age_sec: expect.any(Number), stale: false, ok: null },
      { source: 'worker_callbacks', observed_at: expect.any(String), age_sec: expect.any(Number), stale: false, ok: null },
    ]);
    expect(body.source_freshness[1].age_sec).toBeGreaterThanOrEqual(1200);
  });

  it('becomes safe to dispatch once the blockers and critical conflicts are gone', async () => {
    const settings = dispatchSettings({ worker_wake_gate_url: NO_GATE, worker_wake_gate_bearer_token: SECRET_A }, true);
    const clean = await startTestApp({ dispatch: settings });
    try {
      await seed(clean.store, { 'ok-run': { status: 'running', lane: 'default', run: { state: 'running' } }, waiting: { status: 'queued', machine_target: 'nowhere' } });
      await clean.store.transaction((tx) =>
        insertWorkerObservation(tx, { target: 'default', wake_gate_url: NO_GATE, ok: true, summary: 'ok', checks: [{ name: 'wake_gate_healthz', ok: true, detail: 'ok', data: {} }] }),
      );
      const { body } = await getJson(clean, '/control/api/status');
      expect(body).toMatchObject({ dispatch_safe: true, dispatch_blockers: [], live_dispatch_enabled: true });
      // A warning-level conflict does not make dispatch unsafe.
      expect(body.conflicts).toEqual([expect.objectContaining({ severity: 'warning' })]);
    } finally {
      await clean.close();
    }
  });

  it('shows queue health: workers, active runs with their last callback, no alerts, the latest 20 callbacks', async () => {
    const { status, body } = await getJson(t, '/control/api/queue-health');
    expect(status).toBe(200);
    expect(Object.keys(body).sort()).toEqual(['active_runs', 'alerts', 'generated_at', 'recent_callbacks', 'workers']);
    expect(body.workers).toEqual([
      {
        name: 'default',
        wake_gate_url: NO_GATE,
        role: 'gpu_worker',
        observation: { observed_at: expect.any(String), ok: false, summary: 'gate unreachable', checks: expect.any(Array) },
        age_sec: expect.any(Number),
        fresh: true,
      },
      {
        name: 'cpu',
        wake_gate_url: NO_GATE,
        role: 'cpu_worker',
        observation: { observed_at: expect.any(String), ok: true, summary: 'fine', checks: [] },
        age_sec: expect.any(Number),
        fresh: false,
      },
    ]);
    const runs = Object.fromEntries((body.active_runs as any[]).map((run) => [run.project_id, run]));
    expect(runs['act-ok']).toEqual({
      project_id: 'act-ok',
      status: 'running',
      run_id: runIdOf('act-ok'),
      state: 'running',
      lane: 'default',
      started: expect.any(String),
      age_sec: expect.any(Number),
      last_callback_event: 'session_started',
      last_callback_at: expect.any(String),
    });
    expect(runs['act-ok'].age_sec).toBeGreaterThanOrEqual(590);
    expect(runs['act-norun']).toMatchObject({ run_id: null, state: null, started: null, age_sec: null, last_callback_event: null });
    expect(body.alerts).toEqual({ enabled: false, channels: { push: false, webhook: false }, results: [] });

    expect(body.recent_callbacks).toHaveLength(20);
    expect(body.recent_callbacks[0]).toEqual({
      idempotency_key: 'act-ok:session_started',
      run_id: runIdOf('act-ok'),
      project_id: 'act-ok',
      event_type: 'session_started',
      ignored: false,
      ignore_reason: null,
      received_at: expect.any(String),
    });
    const times = (body.recent_callbacks as any[]).map((c) => Date.parse(c.received_at));
    expect([...times].sort((a, b) => b - a)).toEqual(times);
    // The oldest callbacks (the ignored one among them) fall outside the latest 20.
    expect((body.recent_callbacks as any[]).some((c) => c.idempotency_key === 'old-0')).toBe(false);
  });

  it('never shows a token', () => {
    expect(seen.length).toBeGreaterThan(0);
    for (const text of seen) expectNoSecrets(text);
  });
});

describe('refresh_worker against real worker gates', () => {
  let fixture: GateFixture;
  let gate: GateProcess;
  let downUrl: string;

  beforeAll(async () => {
    fixture = await writeGateConfig({ callbackUrl: `${NO_GATE}/control/api/worker-callback` });
    gate = await startGateProcess(fixture);
    downUrl = `http://127.0.0.1:${await testPort()}`;
  });
  afterAll(async () => {
    await gate?.kill('SIGTERM');
    if (fixture) await rm(fixture.dir, { recursive: true, force: true });
  });

  it('runs a non-strict preflight first, stores it, and is safe with a healthy gate', async () => {
    const t = await startTestApp({ dispatch: dispatchSettings({ worker_wake_gate_url: fixture.url, worker_wake_gate_bearer_token: GATE_TOKEN }, true) });
    try {
      const before = await getJson(t, '/control/api/status');
      expect(before.body.source_freshness[0]).toMatchObject({ source: 'worker:default', observed_at: null, stale: true });

      const { status, body } = await getJson(t, '/control/api/status?refresh_worker=true');
      expect(status).toBe(200);
      expect(body.refreshed).toEqual([expect.objectContaining({ ok: true, target: 'default', checks: expect.any(Array) })]);
      const checkNames = (body.refreshed[0].checks as any[]).map((c) => c.name);
      expect(checkNames).toContain('wake_gate_healthz');
      expect(checkNames).not.toContain('control_queue_paused');
      expect(body.source_freshness[0]).toMatchObject({ source: 'worker:default', stale: false, ok: true });
      expect(body.source_freshness[0].age_sec).toBeLessThanOrEqual(5);
      expect(body).toMatchObject({ dispatch_safe: true, dispatch_blockers: [], warnings: [], conflicts: [] });

      const stored = await t.store.query<{ n: number }>(`SELECT count(*)::int AS n FROM worker_observations WHERE target = 'default'`);
      expect(stored.rows[0]!.n).toBe(1);

      // A paused queue does not fail the refresh (require_paused is off), it is a blocker of its own.
      await jsonClient(t).post('/control/pause', { reason: 'check', paused_by: 'ops' });
      const paused = await getJson(t, '/control/api/status?refresh_worker=true');
      expect(paused.body.refreshed[0].ok).toBe(true);
      expect(paused.body.dispatch_blockers).toEqual(['queue is paused by ops: check']);
      expectNoSecrets(t.logs.text);
    } finally {
      await t.close();
    }
  });

  it('blocks on a worker that does not answer, naming the failing check, in status and queue health', { timeout: 60_000 }, async () => {
    const t = await startTestApp({
      dispatch: dispatchSettings(
        {
          worker_wake_gate_url: fixture.url,
          worker_wake_gate_bearer_token: GATE_TOKEN,
          worker_targets: { down: { wake_gate_url: downUrl, bearer_token: SECRET_B, role: 'cpu_worker', min_memory_available_mib: 1024 } },
        },
        true,
      ),
    });
    try {
      const { body } = await getJson(t, '/control/api/status?refresh_worker=true');
      const byTarget = Object.fromEntries((body.refreshed as any[]).map((result) => [result.target, result]));
      expect(byTarget.default.ok).toBe(true);
      expect(byTarget.down.ok).toBe(false);
      expect(body.dispatch_safe).toBe(false);
      expect(body.dispatch_blockers).toEqual([expect.stringMatching(/^worker 'down' failed its latest preflight \(.+\): .*wake_gate_healthz/)]);
      expect(body.source_freshness.slice(0, 2)).toEqual([
        expect.objectContaining({ source: 'worker:default', stale: false, ok: true }),
        expect.objectContaining({ source: 'worker:down', stale: false, ok: false }),
      ]);

      const health = await getJson(t, '/control/api/queue-health?refresh_worker=true');
      expect(health.body.refreshed).toHaveLength(2);
      expect(health.body.workers).toEqual([
        expect.objectContaining({ name: 'default', wake_gate_url: fixture.url, fresh: true, observation: expect.objectContaining({ ok: true }) }),
        expect.objectContaining({ name: 'down', wake_gate_url: downUrl, role: 'cpu_worker', fresh: true, observation: expect.objectContaining({ ok: false }) }),
      ]);
      for (const worker of health.body.workers as any[]) expect(worker).not.toHaveProperty('bearer_token');
      expectNoSecrets(t.logs.text);
      for (const text of seen) expectNoSecrets(text);
    } finally {
      await t.close();
    }
  });

  it('on a pg_readonly store, refreshes without storing and uses the fresh results', async () => {
    const database = await createTestDatabase();
    const store = await openStore({ backend: 'pg_readonly', pgDatabaseUrl: database.url });
    const logs = new LogCapture();
    const app = await createServer(
      httpOnlyDeps(store, {
        dispatch: dispatchSettings({ worker_wake_gate_url: fixture.url, worker_wake_gate_bearer_token: GATE_TOKEN }, true),
      }),
      createLogger({ level: 'info', secretConfigFields: [], destination: logs }),
    );
    try {
      const auth = { authorization: `Bearer ${TEST_TOKEN}` };
      const response = await app.inject({ method: 'GET', url: '/control/api/status?refresh_worker=true', headers: auth });
      expect(response.statusCode).toBe(200);
      const body = response.json();
      expect(body.refreshed).toEqual([expect.objectContaining({ ok: true })]);
      expect(body.source_freshness[0]).toMatchObject({ source: 'worker:default', stale: false, ok: true });
      expect(body.dispatch_safe).toBe(true);
      const stored = await store.query<{ n: number }>('SELECT count(*)::int AS n FROM worker_observations');
      expect(stored.rows[0]!.n).toBe(0);
      const health = await app.inject({ method: 'GET', url: '/control/api/queue-health', headers: auth });
      expect(health.statusCode).toBe(200);
      expectNoSecrets(response.body + health.body + logs.text);
    } finally {
      await app.close();
      await store.close();
      await database.drop();
    }
  });
});
