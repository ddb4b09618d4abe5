import type { Client } from '@temporalio/client';
import { WorkflowExecutionAlreadyStartedError } from '@temporalio/common';
import { cycleWorkflowId } from '../domain/research-cycle.ts';
import { CycleNotStartedError, type CycleLauncher } from '../services/cycle-launcher.ts';
import { RESEARCH_CYCLE_WORKFLOW_TYPE, type CycleReport } from '../workflows/cycle-messages.ts';
import type { researchCycleWorkflow } from '../workflows/research-cycle.ts';
import { cycleStartOptions } from '../workflows/start-options.ts';

/** Research-cycle workflows through the Temporal client: the HTTP layer's CycleLauncher. */
export function temporalCycleLauncher(client: Client, settings: { taskQueue: string }): CycleLauncher {
  return {
    async runCycle(input) {
      const workflowId = cycleWorkflowId(input.cycle_id);
      try {
        await client.workflow.start<typeof researchCycleWorkflow>(RESEARCH_CYCLE_WORKFLOW_TYPE, { ...cycleStartOptions(input), taskQueue: settings.taskQueue });
      } catch (error) {
        if (!(error instanceof WorkflowExecutionAlreadyStartedError)) throw new CycleNotStartedError((error as Error).message);
      }
      return (await client.workflow.getHandle<typeof researchCycleWorkflow>(workflowId).result()) satisfies CycleReport;
    },
  };
}
