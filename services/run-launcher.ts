import type { DispatchOutcome, RunCallback, RunWorkflowInput } from '../workflows/messages.ts';

export type StartedRun = { started: false; reason: string } | { started: true; workflow_id: string; outcome: DispatchOutcome | null };

/** The run workflows as the services see them; `clients/run-workflows.ts` implements it on the Temporal client. */
export interface RunLauncher {
  /**
   * Starts `run:<run_id>` and waits up to waitMs for its dispatch outcome (null when it has none by then). With
   * `attach`, a workflow of that id that already exists is not refused: the call waits for its outcome instead (the
   * retry of a keyed dispatch-next), read from its result once it has closed.
   */
  startRun(input: RunWorkflowInput, waitMs: number, options?: { attach?: boolean }): Promise<StartedRun>;
  /** Signals a callback to the run's workflow; `closed` when the workflow has already finished or never existed. */
  deliverCallback(runId: string, callback: RunCallback): Promise<'delivered' | 'closed'>;
  /** Requests cancellation and waits up to waitMs for the workflow to close. */
  cancelRun(runId: string, waitMs: number): Promise<'canceled' | 'closed' | 'pending'>;
  /** The run's page in the Temporal UI, when the UI address is known. */
  workflowUiUrl(runId: string): string | null;
}
