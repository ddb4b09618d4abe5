import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { DispatchSettings } from '../../capabilities/runs/dispatch-settings.ts';
import { workerRoutingFrom } from '../../capabilities/runs/domain/worker-lanes.ts';
import { insertProject } from '../../capabilities/runs/projects.ts';
import { insertQueueItem, type QueueItemInsert } from '../../capabilities/runs/queue-items.ts';
import { NO_WORKERS, startTestApp, TEST_TOKEN, type TestApp } from '../support/app.ts';
import { queueItemRow, RUN_STACK_START_MS, startRunStack, type RunStack } from '../support/run-stack.ts';

// expected duration: ~20 s

/**
 * Dispatch-next for the item the operator chose (`project_id`): the dry run shows that item and where it would go,
 * whatever comes first in dispatch order; an item that may not go now is a noop that says why; a live call dispatches
 * that item, keyed like any live call.
 */
const GATE = { wake_gate_url: 'http://127.0.0.1:9', bearer_token: 'choice-test-gate-token-0123456789', role: 'gpu_worker' as const };
const ROUTING = { worker_targets: { 'gpu-a': GATE, 'gpu-b': { ...GATE, slots: 2 } }, workload_machine_targets: { training: 'gpu-a' } };

function settings(): DispatchSettings {
  return { ...NO_WORKERS, liveDispatchEnabled: true, routing: workerRoutingFrom(ROUTING) };
}

async function seed(app: TestApp, items: (Partial<QueueItemInsert> & { project_id: string })[]) {
  await app.store.transaction(async (tx) => {
    for (const item of items) {
      await insertProject(tx, { project_id: item.project_id, project_name: item.project_id, project_dir: item.project_id, workload_class: item.workload_class ?? 'unknown' });
      await insertQueueItem(tx, { project_name: item.project_id, ...item });
    }
  });
}

async function dispatchNext(app: TestApp, body: Record<string, unknown>) {
  const response = await app.app.inject({
    method: 'POST',
    url: '/control/dispatch-next',
    headers: { authorization: `Bearer ${TEST_TOKEN}` },
    payload: { dry_run: true, requested_by: 'choice-test', ...body },
  });
  return { status: response.statusCode, body: response.json() };
}

describe('a dry run of the item you chose', () => {
  let t: TestApp | undefined;
  afterEach(async () => {
    await t?.close();
    t = undefined;
  });

  it('shows the chosen item and its lane though another comes first; an item that may not go is a noop saying why', async () => {
    t = await startTestApp({ dispatch: settings() });
    await seed(t, [
      { project_id: 'choice-first', workload_class: 'training', dispatch_priority: 1 },
      { project_id: 'choice-later', workload_class: 'training', dispatch_priority: 90 },
      { project_id: 'choice-on-b', machine_target: 'gpu-b', dispatch_priority: 90 },
      { project_id: 'choice-flagged', workload_class: 'training', manual_review_required: true },
      { project_id: 'choice-parked', workload_class: 'training', status: 'paused' },
      { project_id: 'choice-done', workload_class: 'training', status: 'completed' },
      { project_id: 'choice-laneless', workload_class: 'inference_eval' },
    ]);

    const next = await dispatchNext(t, {});
    expect(next.body).toMatchObject({ action: 'dry_run_dispatch', candidate: { project_id: 'choice-first' } });
    const chosen = await dispatchNext(t, { project_id: 'choice-later' });
    expect(chosen.status).toBe(200);
    expect(chosen.body).toMatchObject({ ok: true, action: 'dry_run_dispatch', reason: 'would dispatch choice-later to gpu-a', candidate: { project_id: 'choice-later' }, dispatch_route: { machine_target: 'gpu-a' } });
    expect((await dispatchNext(t, { project_id: 'choice-on-b' })).body).toMatchObject({ action: 'dry_run_dispatch', dispatch_route: { machine_target: 'gpu-b', lane: 'gpu-b' } });

    const refusals: [string, string][] = [
      ['choice-flagged', 'choice-flagged is flagged for manual review (requeue it to clear the flag)'],
      ['choice-parked', 'choice-parked is paused, not queued (requeue it first)'],
      ['choice-done', 'choice-done is completed, not queued'],
      ['choice-laneless', 'choice-laneless has no lane: no worker target for workload class inference_eval and no default worker (worker_wake_gate_url) configured'],
    ];
    for (const [projectId, reason] of refusals) {
      expect((await dispatchNext(t, { project_id: projectId })).body, projectId).toMatchObject({ ok: false, action: 'noop', reason, candidate: null });
    }
  });

  it('says the chosen item waits while its lane is busy, and answers 404 for an unknown project and 422 for an empty one', async () => {
    t = await startTestApp({ dispatch: settings() });
    await seed(t, [
      { project_id: 'choice-running', workload_class: 'training', status: 'running', lane: 'gpu-a' },
      { project_id: 'choice-waiting', workload_class: 'training' },
      { project_id: 'choice-b-1', machine_target: 'gpu-b', status: 'running', lane: 'gpu-b' },
      { project_id: 'choice-b-2', machine_target: 'gpu-b', status: 'running', lane: 'gpu-b/2' },
      { project_id: 'choice-b-3', machine_target: 'gpu-b' },
    ]);
    expect((await dispatchNext(t, { project_id: 'choice-waiting' })).body).toMatchObject({ action: 'noop', reason: 'choice-waiting waits: its lane gpu-a is busy with a run' });
    expect((await dispatchNext(t, { project_id: 'choice-b-3' })).body).toMatchObject({ action: 'noop', reason: 'choice-b-3 waits: all 2 slots of its worker target gpu-b are busy with runs' });
    expect((await dispatchNext(t, { project_id: 'choice-running' })).body).toMatchObject({ action: 'noop', reason: 'choice-running is running, not queued' });

    const unknown = await dispatchNext(t, { project_id: 'no-such-project' });
    expect(unknown.status).toBe(404);
    expect(JSON.stringify(unknown.body)).toContain("unknown project 'no-such-project'");
    expect((await dispatchNext(t, { project_id: '' })).status).toBe(422);
  });
});

describe('a live dispatch of the item you chose', () => {
  let stack: RunStack;
  beforeAll(async () => {
    stack = await startRunStack();
  }, RUN_STACK_START_MS);
  afterAll(() => stack?.close());

  it('dispatches that item, not the first in order; its key replays the answer and refuses another item', { timeout: 120_000 }, async () => {
    await stack.seed('choice-live-first', { projectName: 'First in order', scenario: { scenario: 'normal' }, item: { dispatch_priority: 1 } });
    await stack.seed('choice-live-chosen', { projectName: 'The chosen one', scenario: { scenario: 'normal' }, item: { dispatch_priority: 90 } });
    const body = { dry_run: false, requested_by: 'choice-test', project_id: 'choice-live-chosen', idempotency_key: 'choice-live-1' };
    const live = await stack.api('POST', '/control/dispatch-next', body);
    stack.agents.remember(live.body);
    expect(live.status, JSON.stringify(live.body)).toBe(200);
    expect(live.body).toMatchObject({ action: 'live_dispatch', candidate: { project_id: 'choice-live-chosen' } });
    expect(live.body.run_id).toMatch(/^choice-live-chosen-\d{8}T\d{6}Z$/);
    expect(await queueItemRow(stack.store, 'choice-live-first')).toMatchObject({ status: 'queued', current_run_id: null });

    const again = await stack.api('POST', '/control/dispatch-next', body);
    expect(again.status).toBe(200);
    expect(again.body.run_id).toBe(live.body.run_id);
    const other = await stack.api('POST', '/control/dispatch-next', { ...body, project_id: 'choice-live-first' });
    expect(other.status).toBe(409);

    // The lane now runs the chosen item: the first one, chosen in its turn, waits for it.
    const first = await stack.api('POST', '/control/dispatch-next', { dry_run: true, requested_by: 'choice-test', project_id: 'choice-live-first' });
    expect(first.body).toMatchObject({ action: 'noop', reason: 'choice-live-first waits: its lane default is busy with a run' });
  });
});
