import { proxyActivities, workflowInfo } from '@temporalio/workflow';
import type { PumpActivities } from '../activities/queue-pump.ts';
import type { PumpTickReport } from './schedule-messages.ts';

/**
 * One tick of the queue pump (README "Queue pump"), started by its Temporal Schedule: nothing while the queue is
 * paused or in maintenance; else dispatch-next live, then a follow-up launch and a draft-next when config lets the
 * pump do them. Each step is an activity of its own, so a tick reads step by step in the Temporal UI.
 */

const pump = proxyActivities<PumpActivities>({
  startToCloseTimeout: '10 minutes',
  heartbeatTimeout: '10 seconds',
  // A tick that fails is not retried at length: the next tick is only an interval away.
  retry: { maximumAttempts: 2, initialInterval: '2 seconds' },
});

export async function queuePumpWorkflow(): Promise<PumpTickReport> {
  const tickId = workflowInfo().workflowId;
  const gate = await pump.pumpGate();
  if (gate.action !== 'open') return { tick_id: tickId, steps: [gate] };
  const steps = [gate, await pump.pumpDispatch(tickId), await pump.pumpFollowup(tickId), await pump.pumpPaperDraft(tickId)];
  return { tick_id: tickId, steps };
}
