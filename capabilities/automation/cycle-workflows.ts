import { WorkflowNotFoundError, type Client } from '@temporalio/client';
import { WorkflowExecutionAlreadyStartedError } from '@temporalio/common';
import { cycleWorkflowId } from './domain/cycle-policy.ts';
import { CycleNotStartedError, type CycleLauncher, type CycleProgress } from './cycle-launcher.ts';
import { cycleStagesQuery, RESEARCH_CYCLE_WORKFLOW_TYPE, type CycleReport } from '../../workflows/automation/cycle-messages.ts';
import type { researchCycleWorkflow } from '../../workflows/automation/research-cycle-workflow.ts';
import { cycleStartOptions } from '../../workflows/start-options.ts';

/** How long a running cycle's worker has to say which stages it has finished. */
const STAGES_QUERY_MS = 3_000;

/** Research-cycle workflows through the Temporal client: the HTTP layer's CycleLauncher. */
export function temporalCycleLauncher(client: Client, settings: { taskQueue: string }): CycleLauncher {
  return {
    async startCycle(input) {
      try {
        await client.workflow.start<typeof researchCycleWorkflow>(RESEARCH_CYCLE_WORKFLOW_TYPE, { ...cycleStartOptions(input), taskQueue: settings.taskQueue });
      } catch (error) {
        if (!(error instanceof WorkflowExecutionAlreadyStartedError)) throw new CycleNotStartedError(messageWithCause(error));
      }
    },

    async cycleProgress(cycleId): Promise<CycleProgress | null> {
      const handle = client.workflow.getHandle<typeof researchCycleWorkflow>(cycleWorkflowId(cycleId));
      let status: string;
      try {
        status = (await handle.describe()).status.name;
      } catch (error) {
        if (error instanceof WorkflowNotFoundError) return null;
        throw error;
      }
      switch (status) {
        case 'RUNNING':
          // The stages come from the cycle's worker; while none answers (a restart), the cycle is running all the same,
          // and the answer does not wait for one.
          return { status: 'running', stages: await client.connection.withDeadline(Date.now() + STAGES_QUERY_MS, () => handle.query(cycleStagesQuery)).catch(() => []) };
        case 'COMPLETED':
          return { status: 'completed', report: (await handle.result()) satisfies CycleReport };
        case 'FAILED':
          return { status: 'failed', reason: await handle.result().then(() => 'failed', (error: Error) => (error.cause instanceof Error ? error.cause.message : error.message)) };
        case 'CANCELLED':
          return { status: 'canceled', reason: 'the cycle was canceled' };
        case 'TIMED_OUT':
          return { status: 'timed_out', reason: 'the cycle ran past its timeout' };
        default:
          return { status: 'terminated', reason: `the cycle was ${status.toLowerCase().replaceAll('_', ' ')}` };
      }
    },
  };
}

/** The client's own words ("Failed to start Workflow") and the server's reason after them, which the client keeps as the cause. */
function messageWithCause(error: unknown): string {
  if (!(error instanceof Error)) return String(error);
  const cause = error.cause instanceof Error && error.cause.message ? `: ${error.cause.message}` : '';
  return `${error.message}${cause}`;
}
