import type { DraftNextInput, DraftNextResult, PaperWorkflowInput, PaperWorkflowResult, RewriteBatchInput, RewriteBatchResult } from '../workflows/paper-messages.ts';

export type StartedPaperStep = { started: true; workflow_run_id: string } | { started: false; reason: string };

/** The paper workflows as the services see them; `clients/paper-workflows.ts` implements it on the Temporal client. */
export interface PaperLauncher {
  /** Starts `paper:<paper_id>`; not started when a step of that paper is running already. */
  startStep(input: PaperWorkflowInput): Promise<StartedPaperStep>;
  /** The result of that step (the one with this workflow run id), waiting for it as long as it takes. */
  stepResult(paperId: string, workflowRunId: string): Promise<PaperWorkflowResult>;
  /** Starts the batch named by its key, or finds it when it already started, and waits for its result. */
  runRewriteBatch(input: RewriteBatchInput): Promise<RewriteBatchResult>;
  /** Runs a draft-next of its own (an HTTP call's) as the paper-draft-next workflow, and waits for its result. */
  runDraftNext(input: DraftNextInput): Promise<DraftNextResult>;
}
