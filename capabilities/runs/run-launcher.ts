import type { DispatchOutcome, RunAnswer, ResumeNow, RunCallback, RunWorkflowInput } from '../../workflows/runs/run-messages.ts';
import { CommandRefusedError } from '../../platform/command-errors.ts';

export type StartedRun = { started: false; reason: string } | { started: true; workflow_id: string; outcome: DispatchOutcome | null };

/** The run workflows as the services see them; `capabilities/runs/run-workflows.ts` implements it on the Temporal client. */
export interface RunLauncher {
  /**
   * Starts `run:<run_id>` and waits up to waitMs for its dispatch outcome (null when it has none by then). With
   * `attach`, a workflow of that id that already exists is not refused: the call waits for its outcome instead (the
   * retry of a keyed dispatch-next), read from its result once it has closed.
   */
  startRun(input: RunWorkflowInput, waitMs: number, options?: { attach?: boolean }): Promise<StartedRun>;
  /** Signals a callback to the run's workflow; `closed` when the workflow has already finished or never existed. */
  deliverCallback(runId: string, callback: RunCallback): Promise<'delivered' | 'closed'>;
  /** Signals the operator's answer to the run's workflow; `closed` when the workflow has already finished or never existed. */
  deliverAnswer(runId: string, answer: RunAnswer): Promise<'delivered' | 'closed'>;
  /** Signals an operator's request to resume a run waiting out a usage limit now; `closed` as for an answer. */
  deliverResumeNow(runId: string, request: ResumeNow): Promise<'delivered' | 'closed'>;
  /** Requests cancellation and waits up to waitMs for the workflow to close. */
  cancelRun(runId: string, waitMs: number): Promise<'canceled' | 'closed' | 'pending'>;
  /** The run's page in the Temporal UI, when the UI address is known. */
  workflowUiUrl(runId: string): string | null;
}

/**
 * A run whose workflow failed because the ledger could not record one of its steps (RunLedgerFailed: the database is
 * down past the step's retries, or refuses the write). The caller waiting for its dispatch outcome gets 503 naming the
 * step; the ledger keeps the run's last recorded state.
 */
export class RunLedgerFailedError extends CommandRefusedError {
  constructor(ids: { run_id: string; workflow_id: string }, failure: { step: string | null; reason: string }) {
    const step = failure.step ? `its ${failure.step} step` : 'a step';
    super(503, {
      message: `the ledger could not record ${step} of run ${ids.run_id} (${failure.reason}); the run keeps its last recorded state, and a cancel frees its lane`,
      step: failure.step,
      ...ids,
    });
    this.name = 'RunLedgerFailedError';
  }
}
