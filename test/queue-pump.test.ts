import { readFile, writeFile } from 'node:fs/promises';
import { Client, Connection } from '@temporalio/client';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { queueAlertScheduleId, queuePumpScheduleId } from '../workflows/schedule-messages.ts';
import { waitUntil } from './support/gate.ts';
import { Receiver } from './support/receiver.ts';
import { fetchRunHistory, maybeSaveHistory } from './support/histories.ts';
import { gateTarget, RUN_STACK_START_MS, startRunStack, type RunStack } from './support/run-stack.ts';

// expected duration: ~25 s (one control-plane restart)

/**
 * The control plane's schedules on real processes: a control plane whose config turns the queue pump and a webhook
 * alert channel on with 1 s intervals, and a worker gate running the fake agent on three lanes. Nothing but the
 * schedules call dispatch-next or the queue check here.
 */

let stack: RunStack;
let connection: Connection;
let webhook: Receiver;

beforeAll(async () => {
  webhook = await Receiver.start();
  stack = await startRunStack({
    defaultLane: false,
    controlPlaneOverrides: (gate) => ({
      queue_pump_enabled: true,
      queue_pump_interval_sec: 1,
      chat_alert_webhook_enabled: true,
      chat_alert_webhook_url: webhook.url,
      queue_alert_check_interval_sec: 1,
      worker_targets: { pumpA: gateTarget(gate), pumpB: gateTarget(gate), pumpC: gateTarget(gate) },
    }),
  });
  connection = await Connection.connect({ address: inject('temporalAddress') });
}, RUN_STACK_START_MS);

afterAll(async () => {
  // The dev server outlives this file: its schedule must not keep starting ticks for a task queue nobody polls.
  for (const id of [queuePumpScheduleId(stack.cpFixture.taskQueue), queueAlertScheduleId(stack.cpFixture.taskQueue)]) {
    await new Client({ connection }).schedule.getHandle(id).delete().catch(() => undefined);
  }
  await connection?.close();
  await stack?.close();
  await webhook?.close();
});

const queueStatus = async (projectId: string) =>
  (await stack.store.query<{ status: string }>('SELECT status FROM queue_items WHERE project_id = $1', [projectId])).rows[0]?.status;

const runOf = (projectId: string) =>
  waitUntil(`a run of ${projectId}`, async () => (await stack.store.query<{ run_id: string; requested_by: string }>('SELECT run_id, requested_by FROM runs WHERE project_id = $1', [projectId])).rows[0], 30_000, 200);

/** Three ticks at the 1 s interval. */
const SEVERAL_TICKS_MS = 3_500;
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe('the queue check schedule', () => {
  it('checks the queue on its own and posts what needs a person to the webhook', { timeout: 60_000 }, async () => {
    await stack.seed('alert-review', { projectName: 'Needs review', lane: 'pumpC', item: { status: 'needs_review' }, scenario: { scenario: 'normal' } });
    const posted = await waitUntil('a queue alert naming alert-review', () => webhook.received.find((request) => request.body.includes('"entity_id":"alert-review"')), 30_000);
    expect(JSON.parse(posted.body)).toMatchObject({ event: 'queue_alert', findings: [expect.objectContaining({ kind: 'needs_review', entity_id: 'alert-review' })] });
    // The check records itself once its sends have answered, a moment after the receiver got the post.
    const checks = await waitUntil('the check in the alerts ledger', async () => {
      const rows = await stack.store.query<{ trigger: string }>(`SELECT DISTINCT trigger FROM alert_checks`);
      return rows.rowCount ? rows.rows : undefined;
    }, 15_000);
    expect(checks).toEqual([{ trigger: 'schedule' }]);
    await stack.store.query(`UPDATE queue_items SET status = 'completed' WHERE project_id = 'alert-review'`);

    const client = new Client({ connection });
    const query = `WorkflowType = 'queueAlertWorkflow' AND TaskQueue = '${stack.cpFixture.taskQueue}' AND ExecutionStatus = 'Completed'`;
    const completed = await waitUntil('a completed scheduled check', async () => {
      for await (const info of client.workflow.list({ query })) return info.workflowId;
      return undefined;
    }, 30_000, 500);
    maybeSaveHistory('alert-check', await fetchRunHistory(completed));
  });
});

describe('the queue pump', () => {
  it('dispatches a queued item with no call, audits it, and does nothing while the queue is paused', { timeout: 90_000 }, async () => {
    await stack.seed('pumped-a', { projectName: 'Pumped A', lane: 'pumpA', scenario: { scenario: 'normal' } });
    const run = await runOf('pumped-a');
    expect(run.requested_by).toBe('queue-pump');
    // The tick audits the dispatch once dispatch-next has answered, a moment after the run row appears.
    const audit = await waitUntil('the audit event of the dispatch', async () => {
      const rows = await stack.store.query<{ actor: string; payload: { action: string; run_id: string }; entity_id: string }>(
        `SELECT actor, payload, entity_id FROM audit_events WHERE event_type = 'queue_pump.dispatch' AND payload->>'run_id' = $1`,
        [run.run_id],
      );
      return rows.rowCount ? rows.rows : undefined;
    }, 30_000);
    expect(audit).toEqual([{ actor: 'queue-pump', payload: expect.objectContaining({ action: 'live_dispatch', run_id: run.run_id }), entity_id: expect.stringMatching(/^queue-pump:/) }]);
    // The tick's workflow ID is the audit event's entity.
    const tick = new Client({ connection }).workflow.getHandle(audit[0]!.entity_id);
    await tick.result();
    maybeSaveHistory('pump-dispatched', await fetchRunHistory(audit[0]!.entity_id));

    const paused = await stack.api('POST', '/control/pause', { reason: 'pump test', paused_by: 'pump-test' });
    expect(paused.status).toBe(200);
    await stack.seed('pumped-b', { projectName: 'Pumped B', lane: 'pumpB', scenario: { scenario: 'normal' } });
    await sleep(SEVERAL_TICKS_MS);
    expect(await queueStatus('pumped-b')).toBe('queued');

    await stack.api('POST', '/control/resume', { resumed_by: 'pump-test' });
    expect((await runOf('pumped-b')).requested_by).toBe('queue-pump');
  });

  it('is paused when a restart finds queue_pump_enabled false, and then dispatches nothing', { timeout: 90_000 }, async () => {
    const config = JSON.parse(await readFile(stack.cpFixture.configPath, 'utf8')) as Record<string, unknown>;
    await writeFile(stack.cpFixture.configPath, JSON.stringify({ ...config, queue_pump_enabled: false }));
    await stack.cp.kill('SIGKILL');
    await stack.restartControlPlane();

    const described = await new Client({ connection }).schedule.getHandle(queuePumpScheduleId(stack.cpFixture.taskQueue)).describe();
    expect(described.state).toMatchObject({ paused: true, note: expect.stringMatching(/queue_pump_enabled is false/) });
    await stack.seed('pumped-c', { projectName: 'Pumped C', lane: 'pumpC', scenario: { scenario: 'normal' } });
    await sleep(SEVERAL_TICKS_MS);
    expect(await queueStatus('pumped-c')).toBe('queued');
  });
});
