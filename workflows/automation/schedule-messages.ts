/** Names of the scheduled workflows (the queue pump, the queue check), shared by their schedules and the workflows. */

/** One schedule per task queue: control planes sharing a Temporal namespace (each on its own task queue) keep apart. */
export const queuePumpScheduleId = (taskQueue: string): string => `queue-pump:${taskQueue}`;
export const QUEUE_PUMP_WORKFLOW_TYPE = 'queuePumpWorkflow';

export const queueAlertScheduleId = (taskQueue: string): string => `queue-alerts:${taskQueue}`;
export const QUEUE_ALERT_WORKFLOW_TYPE = 'queueAlertWorkflow';

/** One step of a tick: what it did, and why. */
export interface PumpStep {
  step: 'gate' | 'dispatch' | 'followup' | 'paper_sweep' | 'paper_draft';
  action: string;
  reason: string;
  [detail: string]: unknown;
}

export interface PumpTickReport {
  tick_id: string;
  steps: PumpStep[];
}
