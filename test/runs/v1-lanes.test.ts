import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { workerRoutingFrom } from '../../capabilities/runs/domain/worker-lanes.ts';
import { insertProject } from '../../capabilities/runs/projects.ts';
import { insertQueueItem, type QueueItemInsert } from '../../capabilities/runs/queue-items.ts';
import type { Queryable } from '../../platform/store/store.ts';
import { NO_WORKERS, startTestApp, type TestApp } from '../support/app.ts';
import { seedWorkerCallback } from '../support/ledgers.ts';

let t: TestApp;

const routing = workerRoutingFrom({
  worker_wake_gate_url: 'http://127.0.0.1:9/default',
  worker_wake_gate_bearer_token: 'default-token-0123456789',
  worker_targets: { cpu: { wake_gate_url: 'http://127.0.0.1:9/cpu', bearer_token: '', role: 'cpu_worker' } },
  workload_machine_targets: { cpu_only: 'cpu' },
});

async function item(q: Queryable, projectId: string, fields: Partial<QueueItemInsert>): Promise<void> {
  await insertProject(q, { project_id: projectId, project_name: projectId, project_dir: projectId, workload_class: fields.workload_class ?? 'unknown' });
  await insertQueueItem(q, { project_id: projectId, project_name: projectId, ...fields });
}

beforeAll(async () => {
  t = await startTestApp({ dispatch: { ...NO_WORKERS, routing } });
  await t.store.transaction(async (q) => {
    // The default lane is busy; two items wait for it, the second first in dispatch order.
    await item(q, 'lanes-busy', { status: 'running', lane: 'default' });
    await item(q, 'lanes-gpu-later', { dispatch_priority: 60 });
    await item(q, 'lanes-gpu-first', { dispatch_priority: 10 });
    // The cpu lane is idle: one routed by its workload class, one by its machine_target, one flagged (not eligible).
    await item(q, 'lanes-cpu-class', { workload_class: 'cpu_only', dispatch_priority: 30 });
    await item(q, 'lanes-cpu-target', { machine_target: 'cpu', dispatch_priority: 20 });
    await item(q, 'lanes-cpu-flagged', { machine_target: 'cpu', dispatch_priority: 1, manual_review_required: true });
    // A lane no longer configured, with a finished item claimed on it.
    await item(q, 'lanes-old', { status: 'completed', lane: 'retired' });
  });
});

afterAll(async () => {
  await t?.close();
});

describe('GET /control/api/v1/lanes', () => {
  it('lists each configured lane, then lanes found only on queue rows, with the active item, the next candidate and counts', async () => {
    const response = await t.app.inject({ method: 'GET', url: '/control/api/v1/lanes', headers: t.auth });
    expect(response.statusCode, response.body).toBe(200);
    const body = response.json();
    expect(body.lanes.map((lane: { lane: string }) => lane.lane)).toEqual(['default', 'cpu', 'retired']);
    const [gpu, cpu, retired] = body.lanes;

    expect(gpu).toMatchObject({ configured: true, idle: false, route: { machine_target: 'default', token_configured: true } });
    expect(gpu.route).not.toHaveProperty('bearer_token');
    expect(gpu.active.item).toMatchObject({ project_id: 'lanes-busy', status: 'running' });
    expect(gpu.next_candidate.project_id).toBe('lanes-gpu-first');
    expect(gpu.counts).toEqual({ claimed_by_status: { running: 1 }, eligible_queued: 2 });

    expect(cpu).toMatchObject({ configured: true, idle: true, active: null, route: { worker_role: 'cpu_worker', token_configured: false } });
    expect(cpu.next_candidate.project_id).toBe('lanes-cpu-target');
    expect(cpu.counts.eligible_queued).toBe(2);

    expect(retired).toMatchObject({ configured: false, route: null, next_candidate: null, counts: { claimed_by_status: { completed: 1 }, eligible_queued: 0 } });
    expect(body.dispatch).toEqual({ queue_paused: false, maintenance_mode: false, live_dispatch_enabled: false });
    expect(body.truncated).toBe(false);
  });

  it('names as the idle lane\'s next candidate the item a dispatch-next dry run picks', async () => {
    const dryRun = await t.app.inject({ method: 'POST', url: '/control/dispatch-next', headers: t.auth, payload: { dry_run: true, requested_by: 'test' } });
    expect(dryRun.statusCode, dryRun.body).toBe(200);
    const lanes = (await t.app.inject({ method: 'GET', url: '/control/api/v1/lanes', headers: t.auth })).json();
    const idle = lanes.lanes.filter((lane: { idle: boolean; configured: boolean }) => lane.idle && lane.configured);
    expect(idle.map((lane: { lane: string }) => lane.lane)).toEqual(['cpu']);
    expect(dryRun.json()).toMatchObject({ action: 'dry_run_dispatch', candidate: { project_id: idle[0].next_candidate.project_id } });
  });

  it('shows the run in flight on a lane with the newest callback its worker sent and the gate state it reported', async () => {
    const lane = async () => (await t.app.inject({ method: 'GET', url: '/control/api/v1/lanes', headers: t.auth })).json().lanes[0];
    const runId = 'lanes-busy-20261124T090000Z';
    await t.store.query(
      `INSERT INTO runs (run_id, project_id, workflow_id, state, lane, wake_gate_url, workload_class, requested_by)
       VALUES ($1, 'lanes-busy', $2, 'running', 'default', 'http://127.0.0.1:9/default', 'unknown', 'test')`,
      [runId, `run:${runId}`],
    );
    await t.store.query(`UPDATE queue_items SET current_run_id = $1 WHERE project_id = 'lanes-busy'`, [runId]);
    expect((await lane()).active).toMatchObject({ run: { run_id: runId, state: 'running' }, last_callback: null });

    const callback = (key: string, eventType: string, gateState: string, agoSec: number) =>
      seedWorkerCallback(t.store, { key, runId, projectId: 'lanes-busy', eventType, agoSec, payload: { gate_state: gateState } });
    await callback('lanes-cb-old', 'session_started', 'running', 120);
    await callback('lanes-cb-new', 'question_pending', 'question_pending', 30);
    const { last_callback: last } = (await lane()).active;
    expect(last).toEqual({ event_type: 'question_pending', gate_state: 'question_pending', received_at: expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/) });
    expect(Date.now() - Date.parse(last.received_at)).toBeGreaterThanOrEqual(29_000);
  });
});
