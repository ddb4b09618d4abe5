import { proxyActivities } from '@temporalio/workflow';
import type { AlertActivities } from '../../activities/automation/queue-check-activities.ts';

/** One scheduled queue check (docs/automation.md#queue-alerts); a check that fails waits for the next, it is not retried at length. */
const check = proxyActivities<AlertActivities>({ startToCloseTimeout: '2 minutes', retry: { maximumAttempts: 2, initialInterval: '5 seconds' } });

export async function queueAlertWorkflow() {
  return check.queueAlertCheck();
}
