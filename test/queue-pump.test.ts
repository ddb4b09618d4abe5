import { readFile, writeFile } from 'node:fs/promises';
import { Client, Connection } from '@temporalio/client';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { queuePumpScheduleId } from '../workflows/pump-messages.ts';
import { waitUntil } from './support/gate.ts';
import { fetchRunHistory, maybeSaveHistory } from './support/histories.ts';
import { gateTarget, RUN_STACK_START_MS, startRunStack, type RunStack } from './support/run-stack.ts';

// expected duration: ~20 s (one control-plane restart)

/**
 * The queue pump on real processes: a control plane whose config turns the pump on with a 1 s interval, and a worker
 * gate running the fake agent on three lanes. Nothing but the pump's Temporal Schedule calls dispatch-next here.
 */

let stack: RunStack;
let connection: Connection;

beforeAll(async () => {
  stack = await startRunStack({
    defaultLane: false,
    controlPlaneOverrides: (gate) => ({
      queue_pump_enabled: true,
      queue_pump_interval_sec: 1,
      worker_targets: { pumpA: gateTarget(gate), pumpB: gateTarget(gate), pumpC: gateTarget(gate) },
    }),
  });
  connection = await Connection.connect({ address: inject('temporalAddress') });
}, RUN_STACK_START_MS);

afterAll(async () => {
  // The dev server outlives this file: its schedule must not keep starting ticks for a task queue nobody polls.
  await new Client({ connection }).schedule.getHandle(queuePumpScheduleId(stack.cpFixture.taskQueue)).delete().catch(() => undefined);
  await connection?.close();
  await stack?.close();
});

const queueStatus = async (projectId: string) =>
  (await stack.store.query<{ status: string }>('SELECT status FROM queue_items WHERE project_id = $1', [projectId])).rows[0]?.status;

const runOf = (projectId: string) =>
  waitUntil(`a run of ${projectId}`, async () => (await stack.store.query<{ run_id: string; requested_by: string }>('SELECT run_id, requested_by FROM runs WHERE project_id = $1', [projectId])).rows[0], 30_000, 200);

/** Three ticks at the 1 s interval. */
const SEVERAL_TICKS_MS = 3_500;
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

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
