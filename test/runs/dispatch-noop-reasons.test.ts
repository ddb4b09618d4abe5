import { afterEach, describe, expect, it } from 'vitest';
import type { DispatchSettings } from '../../capabilities/runs/dispatch-settings.ts';
import { workerRoutingFrom } from '../../capabilities/runs/domain/worker-lanes.ts';
import { insertProject } from '../../capabilities/runs/projects.ts';
import { insertQueueItem, type QueueItemInsert } from '../../capabilities/runs/queue-items.ts';
import { NO_WORKERS, startTestApp, TEST_TOKEN, type TestApp } from '../support/app.ts';

/**
 * A dispatch that finds nothing says why, over HTTP: an empty queue, live dispatch off, items waiting for review,
 * items no lane takes (naming the lane they lack), and a lane busy with a run.
 */
const GATE = { wake_gate_url: 'http://127.0.0.1:9', bearer_token: 'noop-test-gate-token-0123456789', role: 'gpu_worker' as const };

function settings(routing: Parameters<typeof workerRoutingFrom>[0], liveDispatchEnabled: boolean): DispatchSettings {
  return { ...NO_WORKERS, liveDispatchEnabled, routing: workerRoutingFrom(routing) };
}

let t: TestApp | undefined;
afterEach(async () => {
  await t?.close();
  t = undefined;
});

async function seed(app: TestApp, items: (Partial<QueueItemInsert> & { project_id: string })[]) {
  await app.store.transaction(async (tx) => {
    for (const item of items) {
      await insertProject(tx, { project_id: item.project_id, project_name: item.project_id, project_dir: item.project_id, workload_class: item.workload_class ?? 'unknown' });
      await insertQueueItem(tx, { project_name: item.project_id, ...item });
    }
  });
}

async function dryRun(app: TestApp): Promise<{ action: string; reason: string; live_dispatch_enabled: boolean }> {
  const response = await app.app.inject({
    method: 'POST',
    url: '/control/dispatch-next',
    headers: { authorization: `Bearer ${TEST_TOKEN}` },
    payload: { dry_run: true, requested_by: 'noop-test' },
  });
  expect(response.statusCode).toBe(200);
  return response.json();
}

describe('a dispatch that finds nothing says why', () => {
  it('an empty queue with live dispatch off: both are said, and how to queue an item', async () => {
    t = await startTestApp({ dispatch: settings({ worker_wake_gate_url: GATE.wake_gate_url, worker_wake_gate_bearer_token: GATE.bearer_token, worker_targets: {}, workload_machine_targets: {} }, false) });
    const answer = await dryRun(t);
    expect(answer).toMatchObject({ action: 'noop', live_dispatch_enabled: false });
    expect(answer.reason).toBe(
      'no queued item is eligible on an idle lane: the queue holds no queued item (promote a candidate to queue one); live dispatch is off (live_dispatch_enabled is false)',
    );
  });

  it('items without machine_target and no default lane: names the lane they lack; review and a busy lane are said too', async () => {
    // Only a training lane, as a cluster of named workers without worker_wake_gate_url has.
    t = await startTestApp({
      dispatch: settings({ worker_targets: { 'gpu-a': GATE }, workload_machine_targets: { training: 'gpu-a' } }, true),
    });
    await seed(t, [
      { project_id: 'noop-eval-1', workload_class: 'inference_eval' },
      { project_id: 'noop-eval-2', workload_class: 'inference_eval' },
      { project_id: 'noop-review', workload_class: 'training', manual_review_required: true },
      { project_id: 'noop-train-running', workload_class: 'training', status: 'running', lane: 'gpu-a' },
      { project_id: 'noop-train-next', workload_class: 'training' },
    ]);
    const answer = await dryRun(t);
    expect(answer.action).toBe('noop');
    expect(answer.reason).toMatch(/^no queued item is eligible on an idle lane: /);
    expect(answer.reason).toContain('2 queued items have no lane: no worker target for workload class inference_eval and no default worker (worker_wake_gate_url) configured');
    expect(answer.reason).toContain('1 queued item waits for manual review');
    expect(answer.reason).toContain('1 queued item waits for lane gpu-a, which is busy with a run');
    expect(answer.reason).not.toContain('live dispatch is off');
  });

  it('every queued item waits for manual review: says so, and not that the queue is empty', async () => {
    t = await startTestApp({ dispatch: settings({ worker_wake_gate_url: GATE.wake_gate_url, worker_wake_gate_bearer_token: GATE.bearer_token, worker_targets: {}, workload_machine_targets: {} }, true) });
    await seed(t, [
      { project_id: 'noop-review-1', manual_review_required: true },
      { project_id: 'noop-review-2', manual_review_required: true },
    ]);
    const answer = await dryRun(t);
    expect(answer.action).toBe('noop');
    expect(answer.reason).toBe('no queued item is eligible on an idle lane: 2 queued items wait for manual review');
  });
});
