import { randomUUID } from 'node:crypto';
import { WorkflowFailedError, WorkflowIdConflictPolicy, WorkflowNotFoundError, type Client } from '@temporalio/client';
import { CancelledFailure, ChildWorkflowFailure, WorkflowExecutionAlreadyStartedError } from '@temporalio/common';
import { PaperWorkflowCanceledError, type PaperLauncher, type PaperStepWorkflowStatus } from './paper-launcher.ts';
import {
  DRAFT_NEXT_WORKFLOW_TYPE,
  draftNextOwner,
  draftNextWorkflowId,
  PAPER_WORKFLOW_TYPE,
  paperWorkflowId,
  REWRITE_BATCH_WORKFLOW_TYPE,
  rewriteBatchWorkflowId,
  type DraftNextResult,
  type PaperWorkflowResult,
  type RewriteBatchResult,
} from '../../workflows/papers/paper-messages.ts';
import { draftNextStartOptions, paperStartOptions, rewriteBatchStartOptions } from '../../workflows/start-options.ts';

/**
 * A workflow's result, or PaperWorkflowCanceledError naming the workflow whose cancellation ended it: the one waited
 * for, or a paper workflow under it.
 */
async function resultOf<T>(workflowId: string, result: Promise<unknown>): Promise<T> {
  try {
    return (await result) as T;
  } catch (error) {
    if (!(error instanceof WorkflowFailedError)) throw error;
    if (error.cause instanceof CancelledFailure) throw new PaperWorkflowCanceledError(workflowId);
    if (error.cause instanceof ChildWorkflowFailure && error.cause.cause instanceof CancelledFailure) {
      throw new PaperWorkflowCanceledError(error.cause.execution.workflowId ?? workflowId);
    }
    throw error;
  }
}

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
      return resultOf<PaperWorkflowResult>(paperWorkflowId(paperId), client.workflow.getHandle(paperWorkflowId(paperId), workflowRunId).result());
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
      return resultOf<RewriteBatchResult>(workflowId, client.workflow.getHandle(workflowId).result());
    },

    async runDraftNext(input) {
      // draft-next has no idempotency key: each call is a draft-next of its own.
      const handle = await client.workflow.start(DRAFT_NEXT_WORKFLOW_TYPE, {
        ...draftNextStartOptions(input, draftNextWorkflowId(draftNextOwner.request(randomUUID()))),
        taskQueue: settings.taskQueue,
      });
      return resultOf<DraftNextResult>(handle.workflowId, handle.result());
    },

    async stepWorkflowStatus(workflowId, workflowRunId) {
      try {
        const { status } = await client.workflow.getHandle(workflowId, workflowRunId).describe();
        if (status.name === 'CANCELLED') return 'canceled';
        return (status.name === 'UNSPECIFIED' ? 'unknown' : status.name.toLowerCase()) as PaperStepWorkflowStatus;
      } catch (error) {
        if (error instanceof WorkflowNotFoundError) return 'not_found';
        throw error;
      }
    },
  };
}
