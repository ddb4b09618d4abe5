import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { READINESS_CRITERIA } from '../../capabilities/automation/domain/readiness-rules.ts';
import { workerRoutingFrom } from '../../capabilities/runs/domain/worker-lanes.ts';
import type { DispatchSettings } from '../../capabilities/runs/dispatch-settings.ts';
import { createPgStore } from '../../platform/store/pg-store.ts';
import { insertProject } from '../../capabilities/runs/projects.ts';
import { insertQueueItem } from '../../capabilities/runs/queue-items.ts';
import { insertWorkerObservation } from '../../capabilities/runs/worker-observations.ts';
import { NO_WORKERS, startTestApp, type TestApp } from '../support/app.ts';
import { FakeProvider, quotaBody } from '../support/fake-provider.ts';

let t: TestApp;
const settings: DispatchSettings = {
  ...NO_WORKERS,
  liveDispatchEnabled: true,
  routing: workerRoutingFrom({ worker_wake_gate_url: 'http://127.0.0.1:9/gate', worker_wake_gate_bearer_token: 'token-0123456789abcdef', worker_targets: {}, workload_machine_targets: {} }),
};
let temporalOk = true;
let provider: FakeProvider;

beforeAll(async () => {
  provider = await FakeProvider.start();
  t = await startTestApp({
    researchProvider: provider.settings(),
    dispatch: settings,
    temporalHealth: async () => ({ ok: temporalOk, address: 'test', namespace: 'default', worker_state: temporalOk ? 'RUNNING' : 'FAILED', ...(temporalOk ? {} : { error: 'worker failed' }) }),
  });
  await observeWorker(true);
});

afterAll(async () => {
  await t?.close();
  await provider?.close();
});

async function observeWorker(ok: boolean): Promise<void> {
  await insertWorkerObservation(t.store, {
    target: 'default',
    wake_gate_url: 'http://127.0.0.1:9/gate',
    ok,
    summary: ok ? 'all checks passed' : 'memory below the floor',
    checks: [{ name: 'worker_memory_available', ok, detail: ok ? 'enough memory available' : 'less memory than the floor', data: {} }],
  });
}

async function readiness(app = t) {
  const response = await app.app.inject({ method: 'GET', url: '/control/api/v1/automation-readiness', headers: app.auth });
  expect(response.statusCode, response.body).toBe(200);
  return response.json() as { status: string; first_failing: { criterion: string; detail: string } | null; criteria: { criterion: string; ok: boolean; checked: boolean }[] };
}

async function expectBlockedAt(criterion: string, detail: RegExp) {
  const body = await readiness();
  expect(body.status).toBe('BLOCKED');
  expect(body.first_failing).toMatchObject({ criterion, detail: expect.stringMatching(detail) });
  const failing = body.criteria.filter((result) => !result.ok).map((result) => result.criterion);
  expect(failing).toEqual([criterion]);
}

describe('GET /control/api/v1/automation-readiness', () => {
  it('is READY when every criterion passes, and lists them all in order', async () => {
    const body = await readiness();
    expect(body).toMatchObject({ status: 'READY', first_failing: null });
    expect(body.criteria.map((result) => result.criterion)).toEqual([...READINESS_CRITERIA]);
    expect(body.criteria.every((result) => result.ok && result.checked)).toBe(true);
  });

  it('turns BLOCKED at each criterion in turn, and READY again once it passes', async () => {
    provider.quota = quotaBody(1, 100);
    await expectBlockedAt('provider_budget', /remaining credit 1 is below/);
    provider.quota = quotaBody();

    await insertProject(t.store, { project_id: 'ready-waiting', project_name: 'waiting', project_dir: 'ready-waiting', workload_class: 'unknown' });
    await insertQueueItem(t.store, { project_id: 'ready-waiting', project_name: 'waiting', status: 'needs_review' });
    await expectBlockedAt('attention_items', /1 queue item/);
    await t.store.query(`UPDATE queue_items SET status = 'completed' WHERE project_id = 'ready-waiting'`);

    settings.liveDispatchEnabled = false;
    await expectBlockedAt('live_dispatch', /live_dispatch_enabled is false/);
    settings.liveDispatchEnabled = true;

    await insertProject(t.store, { project_id: 'ready-orphan', project_name: 'orphan', project_dir: 'ready-orphan', workload_class: 'unknown' });
    await insertQueueItem(t.store, { project_id: 'ready-orphan', project_name: 'orphan', status: 'running', lane: 'default' });
    await expectBlockedAt('conflicts', /ready-orphan.*no current run/);
    await t.store.query(`UPDATE queue_items SET status = 'completed' WHERE project_id = 'ready-orphan'`);

    const pause = await t.app.inject({ method: 'POST', url: '/control/pause', headers: t.auth, payload: { reason: 'readiness test', paused_by: 'test' } });
    expect(pause.statusCode, pause.body).toBe(200);
    await expectBlockedAt('pause_maintenance', /paused/);
    await t.app.inject({ method: 'POST', url: '/control/resume', headers: t.auth, payload: { resumed_by: 'test' } });

    await observeWorker(false);
    await expectBlockedAt('worker_freshness', /'default' failed its latest preflight/);
    await observeWorker(true);

    temporalOk = false;
    await expectBlockedAt('temporal', /worker failed/);
    temporalOk = true;

    expect((await readiness()).status).toBe('READY');
  });

  it('names the earliest criterion when several fail', async () => {
    settings.liveDispatchEnabled = false;
    temporalOk = false;
    const body = await readiness();
    settings.liveDispatchEnabled = true;
    temporalOk = true;
    expect(body.first_failing?.criterion).toBe('temporal');
    expect(body.criteria.filter((result) => !result.ok).map((result) => result.criterion)).toEqual(['temporal', 'live_dispatch']);
  });

  it('is BLOCKED at the store, judging nothing else, when the store does not answer', async () => {
    const unreachable = createPgStore({ connectionString: 'postgres://postgres@127.0.0.1:1/test' });
    const down = await startTestApp({ store: unreachable, researchProvider: provider.settings(), dispatch: settings, temporalHealth: async () => ({ ok: true, address: 'test', namespace: 'default', worker_state: 'RUNNING' }) });
    try {
      const body = await readiness(down);
      expect(body.first_failing).toMatchObject({ criterion: 'store', detail: expect.stringMatching(/does not answer/) });
      expect(body.criteria.slice(1).every((result) => !result.checked && !result.ok)).toBe(true);
    } finally {
      await down.close();
      await unreachable.close();
    }
  });
});

describe('the provider_budget criterion without a provider', () => {
  it('passes, saying provider generation stays off', async () => {
    const bare = await startTestApp({ dispatch: settings, temporalHealth: async () => ({ ok: true, address: 'test', namespace: 'default', worker_state: 'RUNNING' }) });
    try {
      const body = await readiness(bare);
      expect(body.criteria.find((result) => result.criterion === 'provider_budget')).toMatchObject({ ok: true, detail: expect.stringMatching(/no research provider is configured/) });
    } finally {
      await bare.close();
    }
  });
});
