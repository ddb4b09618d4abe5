import { ScheduleAlreadyRunning, ScheduleNotFoundError, ScheduleOverlapPolicy, type Client } from '@temporalio/client';
import { retryingTransient } from './temporal-retry.ts';
import { QUEUE_ALERT_WORKFLOW_TYPE, QUEUE_PUMP_WORKFLOW_TYPE, queueAlertScheduleId, queuePumpScheduleId } from '../workflows/schedule-messages.ts';

/**
 * The control plane's Temporal Schedules (README "Queue pump", "Queue alerts"), created at every start-up or brought
 * in line with the config when they exist, so the config is the one source of their settings: the interval, the
 * workflow, overlapping runs skipped, paused (with a note saying why) while config turns them off.
 */

interface ScheduleSettings {
  scheduleId: string;
  workflowType: string;
  taskQueue: string;
  intervalSec: number;
  paused: boolean;
  note: string;
}

async function ensureSchedule(client: Client, settings: ScheduleSettings): Promise<void> {
  const action = {
    type: 'startWorkflow' as const,
    workflowType: settings.workflowType,
    taskQueue: settings.taskQueue,
    args: [],
    // Temporal appends each run's time to it: <schedule id>-<time>.
    workflowId: settings.scheduleId,
  };
  const spec = { intervals: [{ every: `${settings.intervalSec}s` }] };
  // SKIP: a run still going when the next is due makes that one a no-op, so runs never pile up or race.
  const policies = { overlap: ScheduleOverlapPolicy.SKIP, catchupWindow: '1 minute' };
  const state = { paused: settings.paused, note: settings.note };
  const update = () => client.schedule.getHandle(settings.scheduleId).update((previous) => ({ ...previous, spec, action, policies, state }));
  try {
    await update();
  } catch (error) {
    if (!(error instanceof ScheduleNotFoundError)) throw error;
    try {
      await client.schedule.create({ scheduleId: settings.scheduleId, spec, action, policies, state });
    } catch (raced) {
      // Another replica starting at the same moment created it between our two calls: bring it in line instead.
      if (!(raced instanceof ScheduleAlreadyRunning)) throw raced;
      await update();
    }
  }
}

export interface ControlPlaneSchedules {
  taskQueue: string;
  pump: { enabled: boolean; intervalSec: number };
  alerts: { enabled: boolean; intervalSec: number };
}

/**
 * A start-up on a busy machine may find the Temporal server slow to answer (a describe past its deadline): each
 * schedule, being brought to the same state however often, is tried again for this long before the start fails.
 */
const SCHEDULE_RETRY_MS = 60_000;

export async function ensureSchedules(client: Client, settings: ControlPlaneSchedules): Promise<void> {
  const ensure = (schedule: ScheduleSettings) => retryingTransient(() => ensureSchedule(client, schedule), SCHEDULE_RETRY_MS);
  await ensure({
    scheduleId: queuePumpScheduleId(settings.taskQueue),
    workflowType: QUEUE_PUMP_WORKFLOW_TYPE,
    taskQueue: settings.taskQueue,
    intervalSec: settings.pump.intervalSec,
    paused: !settings.pump.enabled,
    note: settings.pump.enabled ? 'queue_pump_enabled is true' : 'paused: queue_pump_enabled is false in the config',
  });
  await ensure({
    scheduleId: queueAlertScheduleId(settings.taskQueue),
    workflowType: QUEUE_ALERT_WORKFLOW_TYPE,
    taskQueue: settings.taskQueue,
    intervalSec: settings.alerts.intervalSec,
    paused: !settings.alerts.enabled,
    note: settings.alerts.enabled ? 'an alert channel is enabled' : 'paused: neither push_alerts_enabled nor chat_alert_webhook_enabled is true',
  });
}
