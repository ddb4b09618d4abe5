import { ScheduleNotFoundError, ScheduleOverlapPolicy, type Client, type ScheduleOptionsStartWorkflowAction } from '@temporalio/client';
import { QUEUE_PUMP_WORKFLOW_TYPE, queuePumpScheduleId } from '../workflows/pump-messages.ts';
import type { queuePumpWorkflow } from '../workflows/queue-pump.ts';

export interface QueuePumpScheduleSettings {
  enabled: boolean;
  intervalSec: number;
  taskQueue: string;
}

const note = (enabled: boolean) => (enabled ? 'queue_pump_enabled is true' : 'paused: queue_pump_enabled is false in the config');

/**
 * Creates the queue pump's Temporal Schedule, or brings an existing one in line with the config (README "Queue
 * pump"): its interval, its workflow, overlapping ticks skipped, paused unless queue_pump_enabled. Called at every
 * start-up, so the config is the one source of the schedule's settings.
 */
export async function ensureQueuePumpSchedule(client: Client, settings: QueuePumpScheduleSettings): Promise<void> {
  const action: ScheduleOptionsStartWorkflowAction<typeof queuePumpWorkflow> = {
    type: 'startWorkflow',
    workflowType: QUEUE_PUMP_WORKFLOW_TYPE,
    taskQueue: settings.taskQueue,
    args: [],
    // Temporal appends each tick's time to it: queue-pump:<task queue>-<time>.
    workflowId: queuePumpScheduleId(settings.taskQueue),
  };
  const spec = { intervals: [{ every: `${settings.intervalSec}s` }] };
  // SKIP: a tick still running when the next is due makes that one a no-op, so ticks never pile up or race.
  const policies = { overlap: ScheduleOverlapPolicy.SKIP, catchupWindow: '1 minute' };
  const state = { paused: !settings.enabled, note: note(settings.enabled) };
  const scheduleId = queuePumpScheduleId(settings.taskQueue);
  try {
    await client.schedule.getHandle(scheduleId).update((previous) => ({ ...previous, spec, action, policies, state }));
  } catch (error) {
    if (!(error instanceof ScheduleNotFoundError)) throw error;
    await client.schedule.create({ scheduleId, spec, action, policies, state });
  }
}
