/** Names of the queue pump, shared by its schedule (the client side) and its workflow. */

/** One schedule per task queue: control planes sharing a Temporal namespace (each on its own task queue) keep apart. */
export const queuePumpScheduleId = (taskQueue: string): string => `queue-pump:${taskQueue}`;
export const QUEUE_PUMP_WORKFLOW_TYPE = 'queuePumpWorkflow';

/** One step of a tick: what it did, and why. */
export interface PumpStep {
  step: 'gate' | 'dispatch' | 'followup' | 'paper_draft';
  action: string;
  reason: string;
  [detail: string]: unknown;
}

export interface PumpTickReport {
  tick_id: string;
  steps: PumpStep[];
}
