import { Client, Connection } from '@temporalio/client';
import { inject } from 'vitest';
import { PROJECT_ID_ATTRIBUTE } from '../../workflows/messages.ts';

/** What an operator sees of a workflow in the Temporal UI's list, read from the shared dev server of the test run. */
export interface WorkflowListing {
  summary: string | undefined;
  project_id: string | undefined;
  task_timeout_sec: number | undefined;
}

export async function workflowListing(workflowId: string): Promise<WorkflowListing> {
  const connection = await Connection.connect({ address: inject('temporalAddress') });
  try {
    const description = await new Client({ connection }).workflow.getHandle(workflowId).describe();
    const timeout = description.raw.executionConfig?.defaultWorkflowTaskTimeout?.seconds;
    return {
      summary: await description.staticSummary(),
      project_id: description.typedSearchAttributes.get(PROJECT_ID_ATTRIBUTE),
      task_timeout_sec: timeout === undefined || timeout === null ? undefined : Number(timeout),
    };
  } finally {
    await connection.close();
  }
}
