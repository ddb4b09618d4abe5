import { WorkflowExecutionAlreadyStartedError } from '@temporalio/common';
import { ParentClosePolicy, startChild, type ChildWorkflowHandle } from '@temporalio/workflow';
import type { RunWorkflowInput } from './run-messages.ts';
import { runWorkflow } from './run-workflow.ts';
import { runStartOptions, type StartedBy } from '../start-options.ts';

/**
 * Starts a run as the calling workflow's child (a queue pump tick, a research cycle). The start is a command in the
 * parent's history: a retried or replayed parent never starts a second run, and the Temporal UI links parent and run.
 */
export async function startRunChild(input: RunWorkflowInput, startedBy: StartedBy = {}): Promise<{ started: true; handle: ChildWorkflowHandle<typeof runWorkflow> } | { started: false; reason: string }> {
  try {
    const handle = await startChild(runWorkflow, {
      ...runStartOptions(input, startedBy),
      // The run is work of its own: it goes on (and can be canceled on its own) whatever happens to its parent.
      parentClosePolicy: ParentClosePolicy.ABANDON,
    });
    return { started: true, handle };
  } catch (error) {
    // run_id has one-second resolution: a dispatch-next that started the same id in the same second wins.
    if (!(error instanceof WorkflowExecutionAlreadyStartedError)) throw error;
    return { started: false, reason: `run ${input.run_id} was already started by another dispatch` };
  }
}
