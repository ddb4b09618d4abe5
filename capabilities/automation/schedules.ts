import { ScheduleAlreadyRunning, ScheduleNotFoundError, ScheduleOverlapPolicy, type Client } from '@temporalio/client';
import { retryingTransient } from '../../platform/temporal/temporal-retry.ts';
import { QUEUE_ALERT_WORKFLOW_TYPE, QUEUE_PUMP_WORKFLOW_TYPE, queueAlertScheduleId, queuePumpScheduleId } from '../../workflows/automation/schedule-messages.ts';

/**
 * The control plane's Temporal Schedules (docs/automation.md#queue-pump, docs/automation.md#queue-alerts), created at every start-up or brought
 * in line with the config when they exist, so the config is the one source of their settings: the interval, the
 * workflow, overlapping runs skipped, paused (with a note saying why) while config turns them off.
 *
 * Because overlapping ticks are skipped, a tick that never ends would silence its schedule for good: each tick gets a
 * run timeout of a few intervals, and `lastCompletedTicks` tells the metrics how long ago a tick last completed.
 */

/** A tick runs for at most this many intervals (and at least a minute, so a short interval still leaves it time). */
const TICK_RUN_TIMEOUT_INTERVALS = 3;
const TICK_RUN_TIMEOUT_MIN_SEC = 60;

export const tickRunTimeoutSec = (intervalSec: number): number => Math.max(TICK_RUN_TIMEOUT_INTERVALS * intervalSec, TICK_RUN_TIMEOUT_MIN_SEC);

export interface ScheduleSettings {
  /** The name metrics know it by. */
  name: ScheduleName;
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
    workflowRunTimeout: `${tickRunTimeoutSec(settings.intervalSec)}s`,
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

export type ScheduleName = 'queue_pump' | 'queue_check';

/** Each schedule as ensureSchedules sets it up (the freeze test of Temporal names reads their ids from here). */
export function scheduleSettings(settings: ControlPlaneSchedules): ScheduleSettings[] {
  return [
    {
      name: 'queue_pump',
      scheduleId: queuePumpScheduleId(settings.taskQueue),
      workflowType: QUEUE_PUMP_WORKFLOW_TYPE,
      taskQueue: settings.taskQueue,
      intervalSec: settings.pump.intervalSec,
      paused: !settings.pump.enabled,
      note: settings.pump.enabled ? 'queue_pump_enabled is true' : 'paused: queue_pump_enabled is false in the config',
    },
    {
      name: 'queue_check',
      scheduleId: queueAlertScheduleId(settings.taskQueue),
      workflowType: QUEUE_ALERT_WORKFLOW_TYPE,
      taskQueue: settings.taskQueue,
      intervalSec: settings.alerts.intervalSec,
      paused: !settings.alerts.enabled,
      note: settings.alerts.enabled ? 'an alert channel is enabled' : 'paused: neither push_alerts_enabled nor chat_alert_webhook_enabled is true',
    },
  ];
}

/** Each schedule's name and interval, paused or not. */
export const scheduleIntervals = (settings: ControlPlaneSchedules): { schedule: ScheduleName; intervalSec: number }[] =>
  scheduleSettings(settings).map((schedule) => ({ schedule: schedule.name, intervalSec: schedule.intervalSec }));

export async function ensureSchedules(client: Client, settings: ControlPlaneSchedules): Promise<void> {
  for (const schedule of scheduleSettings(settings)) await retryingTransient(() => ensureSchedule(client, schedule), SCHEDULE_RETRY_MS);
}

export interface ScheduleTicks {
  schedule: ScheduleName;
  /**
   * When a tick last completed. When none of the ticks the schedule still lists did, the earliest time it could have
   * been: the oldest of those ticks' start, or the schedule's last update when it lists none.
   */
  lastCompletedAt: Date;
}

/**
 * The unpaused schedules' latest completed tick (docs/operations.md#metrics-and-observability), from the ticks each schedule
 * lists (its last ten): one describe of a tick per schedule when the newest closed one completed, more while ticks fail.
 */
export async function lastCompletedTicks(client: Client, settings: ControlPlaneSchedules): Promise<ScheduleTicks[]> {
  const unpaused = scheduleSettings(settings).filter((schedule) => !schedule.paused);
  return Promise.all(unpaused.map(async (schedule) => ({ schedule: schedule.name, lastCompletedAt: await lastCompletedAt(client, schedule.scheduleId) })));
}

async function lastCompletedAt(client: Client, scheduleId: string): Promise<Date> {
  const { info } = await client.schedule.getHandle(scheduleId).describe();
  const running = new Set(info.runningActions.map((action) => action.workflow.workflowId));
  const newestFirst = [...info.recentActions].sort((a, b) => b.takenAt.getTime() - a.takenAt.getTime());
  for (const { action } of newestFirst) {
    const { workflowId, firstExecutionRunId } = action.workflow;
    if (running.has(workflowId)) continue;
    const tick = await client.workflow.getHandle(workflowId, firstExecutionRunId).describe();
    if (tick.status.name === 'COMPLETED' && tick.closeTime) return tick.closeTime;
  }
  return newestFirst.at(-1)?.takenAt ?? info.lastUpdatedAt ?? info.createdAt;
}
