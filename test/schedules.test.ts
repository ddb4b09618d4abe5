import { randomUUID } from 'node:crypto';
import { Client, Connection } from '@temporalio/client';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { ensureSchedules, type ControlPlaneSchedules } from '../clients/schedules.ts';
import { queueAlertScheduleId, queuePumpScheduleId } from '../workflows/schedule-messages.ts';

/**
 * The control plane's schedules (clients/schedules.ts) on the real Temporal dev server, as several control-plane
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
});
