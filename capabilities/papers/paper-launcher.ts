import type { DraftNextInput, DraftNextResult, PaperWorkflowInput, PaperWorkflowResult, RewriteBatchInput, RewriteBatchResult } from '../../workflows/papers/paper-messages.ts';

/** The status of a paper step's workflow, as Temporal names it in lower case; `not_found` once Temporal no longer knows it. */
export type PaperStepWorkflowStatus = 'running' | 'paused' | 'completed' | 'failed' | 'canceled' | 'terminated' | 'continued_as_new' | 'timed_out' | 'unknown' | 'not_found';

/** A paper workflow the caller waited for was canceled (by an operator, or by its parent): it has no outcome. */
export class PaperWorkflowCanceledError extends Error {
  readonly workflowId: string;

  constructor(workflowId: string) {
    super(`workflow ${workflowId} was canceled before it finished`);
    this.workflowId = workflowId;
    this.name = 'PaperWorkflowCanceledError';
  }
}

export type StartedPaperStep = { started: true; workflow_run_id: string } | { started: false; reason: string };

/**
 * The paper workflows as the services see them; `capabilities/papers/paper-workflows.ts` implements it on the Temporal client. A
 * wait for a result throws PaperWorkflowCanceledError when the workflow waited for, or a paper workflow under it, was
 * canceled.
 */
export interface PaperLauncher {
  /** Starts `paper:<paper_id>`; not started when a step of that paper is running already. */
  startStep(input: PaperWorkflowInput): Promise<StartedPaperStep>;
  /** The result of that step (the one with this workflow run id), waiting for it as long as it takes. */
  stepResult(paperId: string, workflowRunId: string): Promise<PaperWorkflowResult>;
  /** Starts the batch named by its key, or finds it when it already started, and waits for its result. */
  runRewriteBatch(input: RewriteBatchInput): Promise<RewriteBatchResult>;
  /** Runs a draft-next of its own (an HTTP call's) as the paper-draft-next workflow, and waits for its result. */
  runDraftNext(input: DraftNextInput): Promise<DraftNextResult>;
  /** The status of one execution of a paper step's workflow (`paper:<paper_id>` and its run id). */
  stepWorkflowStatus(workflowId: string, workflowRunId: string): Promise<PaperStepWorkflowStatus>;
}
