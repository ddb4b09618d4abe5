import { status } from '@grpc/grpc-js';
import {
  isGrpcCancelledError,
  isGrpcServiceError,
  isGrpcDeadlineError,
  WithStartWorkflowOperation,
  WorkflowFailedError,
  WorkflowNotFoundError,
  type Client,
  type WorkflowHandle,
} from '@temporalio/client';
import { ApplicationFailure, CancelledFailure, WorkflowExecutionAlreadyStartedError, type SignalDefinition } from '@temporalio/common';
import { RunLedgerFailedError, type RunLauncher } from './run-launcher.ts';
import { RUN_LEDGER_FAILED, runLedgerFailureDetails } from './domain/run-failures.ts';
import { workflowIdForRun } from './domain/run-state.ts';
import {
  dispatchOutcomeUpdate,
  RUN_WORKFLOW_TYPE,
  answerSignal,
  resumeNowSignal,
  workerCallbackSignal,
  type DispatchOutcome,
} from '../../workflows/runs/run-messages.ts';
import type { runWorkflow } from '../../workflows/runs/run-workflow.ts';
import { runStartOptions } from '../../workflows/start-options.ts';

export interface RunLauncherSettings {
  taskQueue: string;
  namespace: string;
  /** Base URL of the Temporal UI, when one is known. */
  uiUrl?: string | undefined;
}

type RunHandle = WorkflowHandle<typeof runWorkflow>;

/**
 * A search attribute registered moments ago (the first start on a new namespace) is refused until each Temporal
 * service's namespace cache refreshes, up to some 10 s on a real server; the start is tried again meanwhile.
 */
const isSearchAttributeNotYetKnown = (error: unknown) =>
  isGrpcServiceError(error) && error.code === status.INVALID_ARGUMENT && /no mapping defined for search attribute/.test(`${error.message} ${error.details}`);
const SEARCH_ATTRIBUTE_RETRY_MS = 500;

/** The wait ran out: the deadline passed, or the call was given up on its way. */
const isWaitOver = (error: unknown) => isGrpcDeadlineError(error) || isGrpcCancelledError(error);

const CANCELED_OUTCOME: DispatchOutcome = { action: 'canceled', reason: 'the run was canceled before the worker accepted it' };

/** Run workflows through the Temporal client: the HTTP layer's RunLauncher. */
export function temporalRunLauncher(client: Client, settings: RunLauncherSettings): RunLauncher {
  const handleOf = (runId: string): RunHandle => client.workflow.getHandle<typeof runWorkflow>(workflowIdForRun(runId));
  /** Signals the run's workflow; `closed` when it has already finished or never existed. */
  const signalRun = async <T>(runId: string, signal: SignalDefinition<[T]>, value: T): Promise<'delivered' | 'closed'> => {
    try {
      await handleOf(runId).signal(signal, value);
      return 'delivered';
    } catch (error) {
      if (error instanceof WorkflowNotFoundError) return 'closed';
      throw error;
    }
  };

  /**
   * The outcome of a workflow that closed without answering the update (a canceled run closes at once): read from its
   * result. Null when the wait runs out first. A run that failed because its ledger could not record a step throws
   * RunLedgerFailedError, naming the step.
   */
  async function outcomeFromResult(runId: string, deadline: number): Promise<DispatchOutcome | null> {
    const handle = handleOf(runId);
    try {
      return (await client.withDeadline(deadline, () => handle.result())).dispatch;
    } catch (error) {
      if (error instanceof WorkflowFailedError && error.cause instanceof CancelledFailure) return CANCELED_OUTCOME;
      if (error instanceof WorkflowFailedError && error.cause instanceof ApplicationFailure && error.cause.type === RUN_LEDGER_FAILED) {
        const details = runLedgerFailureDetails(error.cause.details);
        throw new RunLedgerFailedError({ run_id: runId, workflow_id: handle.workflowId }, details ?? { step: null, reason: error.cause.message });
      }
      if (Date.now() >= deadline || isWaitOver(error)) return null;
      throw error;
    }
  }

  return {
    async startRun(input, waitMs, options = {}) {
      const workflowId = workflowIdForRun(input.run_id);
      const deadline = Date.now() + waitMs;
      for (;;) {
        // One call starts the run and asks for its dispatch outcome, which the workflow answers once the worker accepted
        // the run or the attempt failed.
        const start = new WithStartWorkflowOperation<typeof runWorkflow>(RUN_WORKFLOW_TYPE, {
          ...runStartOptions(input),
          taskQueue: settings.taskQueue,
          workflowIdConflictPolicy: options.attach ? 'USE_EXISTING' : 'FAIL',
        });
        try {
          const outcome = await client.withDeadline(deadline, () =>
            client.workflow.executeUpdateWithStart(dispatchOutcomeUpdate, { startWorkflowOperation: start }),
          );
          return { started: true, workflow_id: workflowId, outcome };
        } catch (error) {
          // Nothing was started: the refusal is atomic, so trying again cannot start the run twice.
          if (isSearchAttributeNotYetKnown(error) && Date.now() + SEARCH_ATTRIBUTE_RETRY_MS < deadline) {
            await new Promise((resolve) => setTimeout(resolve, SEARCH_ATTRIBUTE_RETRY_MS));
            continue;
          }
          const handle = await start.workflowHandle().catch((startError: unknown) => startError);
          if (handle instanceof WorkflowExecutionAlreadyStartedError) {
            // Attaching to a run whose workflow has closed: its outcome is in its result.
            if (options.attach) return { started: true, workflow_id: workflowId, outcome: await outcomeFromResult(input.run_id, deadline) };
            return { started: false, reason: `run ${input.run_id} was already started by another dispatch` };
          }
          // Whether the start went through is unknown only when the wait ran out before the server answered; the run
          // may then be on its way, as with any run whose outcome is late.
          if (handle instanceof Error && !isWaitOver(handle)) throw handle;
          if (Date.now() >= deadline || isWaitOver(error)) return { started: true, workflow_id: workflowId, outcome: null };
          return { started: true, workflow_id: workflowId, outcome: await outcomeFromResult(input.run_id, deadline) };
        }
      }
    },

    deliverCallback: (runId, callback) => signalRun(runId, workerCallbackSignal, callback),
    deliverAnswer: (runId, answer) => signalRun(runId, answerSignal, answer),
    deliverResumeNow: (runId, request) => signalRun(runId, resumeNowSignal, request),

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
        if (isWaitOver(error)) return 'pending';
        throw error;
      }
    },

    workflowUiUrl(runId) {
      if (!settings.uiUrl) return null;
      return `${settings.uiUrl}/namespaces/${encodeURIComponent(settings.namespace)}/workflows/${encodeURIComponent(workflowIdForRun(runId))}`;
    },
  };
}
