import { randomUUID } from 'node:crypto';
import { WorkflowIdConflictPolicy, type Client } from '@temporalio/client';
import { WorkflowExecutionAlreadyStartedError } from '@temporalio/common';
import type { PaperLauncher } from '../services/paper-launcher.ts';
import {
  DRAFT_NEXT_WORKFLOW_TYPE,
  draftNextWorkflowId,
  PAPER_WORKFLOW_TYPE,
  paperWorkflowId,
  REWRITE_BATCH_WORKFLOW_TYPE,
  rewriteBatchWorkflowId,
  type DraftNextResult,
  type PaperWorkflowResult,
  type RewriteBatchResult,
} from '../workflows/paper-messages.ts';
import { draftNextStartOptions, paperStartOptions, rewriteBatchStartOptions } from '../workflows/start-options.ts';


/** Paper workflows through the Temporal client: the services' PaperLauncher. */
export function temporalPaperLauncher(client: Client, settings: { taskQueue: string }): PaperLauncher {
  return {
    async startStep(input) {
      const workflowId = paperWorkflowId(input.paper_id);
      try {
        const handle = await client.workflow.start(PAPER_WORKFLOW_TYPE, {
          ...paperStartOptions(input),
          taskQueue: settings.taskQueue,
          workflowIdConflictPolicy: WorkflowIdConflictPolicy.FAIL,
        });
        return { started: true, workflow_run_id: handle.firstExecutionRunId };
      } catch (error) {
        if (error instanceof WorkflowExecutionAlreadyStartedError) {
          return { started: false, reason: `a draft or rewrite of '${input.paper_id}' is running now (workflow ${workflowId})` };
        }
        throw error;
      }
    },

    stepResult(paperId, workflowRunId) {
      return client.workflow.getHandle(paperWorkflowId(paperId), workflowRunId).result() as Promise<PaperWorkflowResult>;
    },

    async runRewriteBatch(input) {
      const workflowId = rewriteBatchWorkflowId(input.request_key);
      try {
        await client.workflow.start(REWRITE_BATCH_WORKFLOW_TYPE, {
          ...rewriteBatchStartOptions(input),
          taskQueue: settings.taskQueue,
          workflowIdConflictPolicy: WorkflowIdConflictPolicy.USE_EXISTING,
        });
      } catch (error) {
        // The batch of this key ran already: its result is the answer.
        if (!(error instanceof WorkflowExecutionAlreadyStartedError)) throw error;
      }
      return client.workflow.getHandle(workflowId).result() as Promise<RewriteBatchResult>;
    },

    async runDraftNext(input) {
      // draft-next has no idempotency key: each call is a draft-next of its own.
      const handle = await client.workflow.start(DRAFT_NEXT_WORKFLOW_TYPE, {
        ...draftNextStartOptions(input, draftNextWorkflowId(`request:${randomUUID()}`)),
        taskQueue: settings.taskQueue,
      });
      return handle.result() as Promise<DraftNextResult>;
    },
  };
}
