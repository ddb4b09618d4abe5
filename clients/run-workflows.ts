import { WorkflowFailedError, WorkflowNotFoundError, type Client } from '@temporalio/client';
import { CancelledFailure, WorkflowExecutionAlreadyStartedError, WorkflowIdReusePolicy } from '@temporalio/common';
import type { RunLauncher } from '../services/run-launcher.ts';
import { workflowIdForRun } from '../domain/run-state.ts';
import {
  dispatchOutcomeUpdate,
  PROJECT_ID_ATTRIBUTE,
  QUEUE_STATUS_ATTRIBUTE,
  RUN_WORKFLOW_TYPE,
  workerCallbackSignal,
  type DispatchOutcome,
} from '../workflows/messages.ts';
import type { runWorkflow } from '../workflows/run.ts';

export interface RunLauncherSettings {
  taskQueue: string;
  namespace: string;
  /** Base URL of the Temporal UI, when one is known. */
  uiUrl?: string | undefined;
}

const isTimeout = (error: unknown) => (error as Error).name === 'AbortError' || (error as { code?: number }).code === 4 || (error as { code?: number }).code === 1;

/** Run workflows through the Temporal client: the HTTP layer's RunLauncher. */
export function temporalRunLauncher(client: Client, settings: RunLauncherSettings): RunLauncher {
  const handleOf = (runId: string) => client.workflow.getHandle<typeof runWorkflow>(workflowIdForRun(runId));

  /** The dispatch outcome: from the update while the workflow runs, from its result once it has closed. */
  async function awaitOutcome(runId: string, waitMs: number): Promise<DispatchOutcome | null> {
    const handle = handleOf(runId);
    const deadline = Date.now() + waitMs;
    try {
      return await client.withDeadline(deadline, () => handle.executeUpdate(dispatchOutcomeUpdate));
    } catch (error) {
      if (Date.now() >= deadline || isTimeout(error)) return null;
      // The workflow closed before the update reached it (a lost claim ends it at once): read its result instead.
      try {
        const result = await client.withDeadline(deadline, () => handle.result());
        return result.dispatch;
      } catch (resultError) {
        if (resultError instanceof WorkflowFailedError && resultError.cause instanceof CancelledFailure) {
          return { action: 'canceled', reason: 'the run was canceled before the worker accepted it' };
        }
        if (Date.now() >= deadline || isTimeout(resultError)) return null;
        throw resultError;
      }
    }
  }

  return {
    async startRun(input, waitMs) {
      const workflowId = workflowIdForRun(input.run_id);
      try {
        await client.workflow.start(RUN_WORKFLOW_TYPE, {
          taskQueue: settings.taskQueue,
          workflowId,
          args: [input],
          workflowIdReusePolicy: WorkflowIdReusePolicy.REJECT_DUPLICATE,
          typedSearchAttributes: [
            { key: PROJECT_ID_ATTRIBUTE, value: input.project_id },
            { key: QUEUE_STATUS_ATTRIBUTE, value: 'queued' },
          ],
        });
      } catch (error) {
        if (error instanceof WorkflowExecutionAlreadyStartedError) {
          return { started: false, reason: `run ${input.run_id} was already started by another dispatch` };
        }
        throw error;
      }
      return { started: true, workflow_id: workflowId, outcome: await awaitOutcome(input.run_id, waitMs) };
    },

    async deliverCallback(runId, callback) {
      try {
        await handleOf(runId).signal(workerCallbackSignal, callback);
        return 'delivered';
      } catch (error) {
        if (error instanceof WorkflowNotFoundError) return 'closed';
        throw error;
      }
    },

    async cancelRun(runId, waitMs) {
      const handle = handleOf(runId);
      try {
        await handle.cancel();
      } catch (error) {
        if (error instanceof WorkflowNotFoundError) return 'closed';
        throw error;
      }
      try {
        await client.withDeadline(Date.now() + waitMs, () => handle.result());
        return 'closed';
      } catch (error) {
        if (error instanceof WorkflowFailedError && error.cause instanceof CancelledFailure) return 'canceled';
        if (isTimeout(error)) return 'pending';
        throw error;
      }
    },

    workflowUiUrl(runId) {
      if (!settings.uiUrl) return null;
      return `${settings.uiUrl}/namespaces/${encodeURIComponent(settings.namespace)}/workflows/${encodeURIComponent(workflowIdForRun(runId))}`;
    },
  };
}
