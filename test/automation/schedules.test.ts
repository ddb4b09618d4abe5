import { randomUUID } from 'node:crypto';
import { Client, Connection } from '@temporalio/client';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { ensureSchedules, lastCompletedTicks, type ControlPlaneSchedules } from '../../capabilities/automation/schedules.ts';
import { queueAlertScheduleId, queuePumpScheduleId } from '../../workflows/automation/schedule-messages.ts';
import { waitUntil } from '../support/gate.ts';

/**
 * The control plane's schedules (capabilities/automation/schedules.ts) on the real Temporal dev server, as several control-plane
 * replicas set them up: each replica calls ensureSchedules at its start, and two that start at the same moment on a
 * task queue with no schedules yet both race to create them.
 */

let connection: Connection;
let client: Client;
const made: string[] = [];

beforeAll(async () => {
  connection = await Connection.connect({ address: inject('temporalAddress') });
  client = new Client({ connection });
});

afterAll(async () => {
  // The dev server outlives this file: no schedule may keep starting ticks for a task queue nobody polls.
  for (const id of made) await client.schedule.getHandle(id).delete().catch(() => undefined);
  await connection?.close();
});

const settingsFor = (taskQueue: string, pumpEnabled: boolean): ControlPlaneSchedules => ({
  taskQueue,
  pump: { enabled: pumpEnabled, intervalSec: 30 },
  alerts: { enabled: false, intervalSec: 60 },
});

describe('ensureSchedules', () => {
  it('brings both replicas up when two start at the same moment and the schedules do not exist yet (10 rounds)', { timeout: 60_000 }, async () => {
    for (let round = 0; round < 10; round++) {
      const taskQueue = `schedules-race-${randomUUID()}`;
      made.push(queuePumpScheduleId(taskQueue), queueAlertScheduleId(taskQueue));
      const starts = await Promise.allSettled([ensureSchedules(client, settingsFor(taskQueue, true)), ensureSchedules(client, settingsFor(taskQueue, true))]);
      expect(starts.map((start) => (start.status === 'rejected' ? String(start.reason) : 'up')), `round ${round}`).toEqual(['up', 'up']);
      const pump = await client.schedule.getHandle(queuePumpScheduleId(taskQueue)).describe();
      expect(pump.state.paused).toBe(false);
      expect(pump.spec.intervals?.map((interval) => interval.every)).toEqual([30_000]);
    }
  });

  it('leaves an existing schedule as the config of the last start says, however often it is called', { timeout: 30_000 }, async () => {
    const taskQueue = `schedules-update-${randomUUID()}`;
    made.push(queuePumpScheduleId(taskQueue), queueAlertScheduleId(taskQueue));
    await ensureSchedules(client, settingsFor(taskQueue, true));
    await ensureSchedules(client, settingsFor(taskQueue, false));
    await ensureSchedules(client, settingsFor(taskQueue, false));
    const pump = await client.schedule.getHandle(queuePumpScheduleId(taskQueue)).describe();
    expect(pump.state).toMatchObject({ paused: true, note: 'paused: queue_pump_enabled is false in the config' });
  });

  it('gives every tick a run timeout of a few intervals, so a tick that never ends frees the schedule', { timeout: 120_000 }, async () => {
    // Nobody polls this task queue: its first tick starts and never ends, and every later one is skipped behind it.
    const taskQueue = `schedules-wedged-${randomUUID()}`;
    made.push(queuePumpScheduleId(taskQueue), queueAlertScheduleId(taskQueue));
    const settings: ControlPlaneSchedules = { taskQueue, pump: { enabled: true, intervalSec: 1 }, alerts: { enabled: true, intervalSec: 120 } };
    await ensureSchedules(client, settings);
    const pump = client.schedule.getHandle(queuePumpScheduleId(taskQueue));
    const tickId = await waitUntil('the first tick to start', async () => (await pump.describe()).info.runningActions[0]?.workflow.workflowId, 10_000, 200);
    const tick = await client.workflow.getHandle(tickId).describe();
    // Three intervals, and at least a minute.
    expect(Number(tick.raw.executionConfig?.workflowRunTimeout?.seconds)).toBe(60);
    const check = await client.schedule.getHandle(queueAlertScheduleId(taskQueue)).describe();
    expect(check.action.type === 'startWorkflow' && check.action.workflowRunTimeout).toBe(360_000);
    // A minute on, the wedged tick has timed out and the schedule has started the next one.
    await waitUntil('the wedged tick to time out', async () => ((await client.workflow.getHandle(tickId).describe()).status.name === 'TIMED_OUT' ? true : undefined), 90_000, 1_000);
    const next = await waitUntil('the next tick', async () => (await pump.describe()).info.runningActions.find((action) => action.workflow.workflowId !== tickId), 15_000, 200);
    expect(next.workflow.workflowId).toMatch(/^queue-pump:/);
  });

  it('reports no completed tick while the only tick has not ended, and the age grows', { timeout: 30_000 }, async () => {
    const taskQueue = `schedules-age-${randomUUID()}`;
    made.push(queuePumpScheduleId(taskQueue), queueAlertScheduleId(taskQueue));
    const settings: ControlPlaneSchedules = { taskQueue, pump: { enabled: true, intervalSec: 1 }, alerts: { enabled: false, intervalSec: 60 } };
    await ensureSchedules(client, settings);
    const firstStartedAt = await waitUntil('the first tick to start', async () => (await client.schedule.getHandle(queuePumpScheduleId(taskQueue)).describe()).info.recentActions[0]?.takenAt, 10_000, 200);
    await new Promise((resolve) => setTimeout(resolve, 3_000));
    const ticks = await lastCompletedTicks(client, settings);
    // The paused queue check is left out; no pump tick completed, so the last could be no later than the first start.
    expect(ticks.map((tick) => tick.schedule)).toEqual(['queue_pump']);
    expect(ticks[0]!.lastCompletedAt.getTime()).toBeLessThanOrEqual(firstStartedAt.getTime());
    expect(Date.now() - ticks[0]!.lastCompletedAt.getTime()).toBeGreaterThanOrEqual(3_000);
  });
});
