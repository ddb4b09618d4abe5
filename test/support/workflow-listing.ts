import { Client, Connection } from '@temporalio/client';
import { inject } from 'vitest';
import { CYCLE_ID_ATTRIBUTE, PAPER_ID_ATTRIBUTE, PROJECT_ID_ATTRIBUTE } from '../../workflows/runs/run-messages.ts';

/** What an operator sees of a workflow in the Temporal UI's list, read from the shared dev server of the test run. */
export interface WorkflowListing {
  summary: string | undefined;
  project_id: string | undefined;
  paper_id: string | undefined;
  cycle_id: string | undefined;
  task_timeout_sec: number | undefined;
}

async function describe(workflowId: string) {
  const connection = await Connection.connect({ address: inject('temporalAddress') });
  try {
    return await new Client({ connection }).workflow.getHandle(workflowId).describe();
  } finally {
    await connection.close();
  }
}

/** The workflow ID of the workflow that started this one as its child (the Temporal UI's parent link), if any. */
export async function parentOf(workflowId: string): Promise<string | undefined> {
  return (await describe(workflowId)).parentExecution?.workflowId ?? undefined;
}

export async function workflowListing(workflowId: string): Promise<WorkflowListing> {
  const description = await describe(workflowId);
  const timeout = description.raw.executionConfig?.defaultWorkflowTaskTimeout?.seconds;
  return {
    summary: await description.staticSummary(),
    project_id: description.typedSearchAttributes.get(PROJECT_ID_ATTRIBUTE),
    paper_id: description.typedSearchAttributes.get(PAPER_ID_ATTRIBUTE),
    cycle_id: description.typedSearchAttributes.get(CYCLE_ID_ATTRIBUTE),
    task_timeout_sec: timeout === undefined || timeout === null ? undefined : Number(timeout),
  };
}
