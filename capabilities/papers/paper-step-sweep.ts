import type { Store } from '../../platform/store/store.ts';
import { createPaperDrafts } from './paper-drafts.ts';
import type { PaperLauncher, PaperStepWorkflowStatus } from './paper-launcher.ts';

/**
 * The sweep of paper steps whose workflow closed without finishing or abandoning them (docs/papers.md#papers): a paper
 * workflow gives its paper back when it fails or is canceled, but a terminated or timed-out one runs no more code, and
 * its paper would stay in draft_generating or publication_generating for good. The queue pump sweeps on each tick.
 */

/** Statuses of a workflow that may still finish its step. */
const STILL_OPEN: readonly PaperStepWorkflowStatus[] = ['running', 'paused', 'unknown'];

/** A paper given back: by a step whose workflow closed, or (workflow_id null) one no step held. */
export interface SweptPaperStep {
  paper_id: string;
  workflow_id: string | null;
  workflow_status: PaperStepWorkflowStatus | null;
}

const NO_STEP_REASON = 'no drafting step holds it (no step recorded starting it), so none will give it back';

export async function sweepClosedPaperSteps(deps: { store: Store; launcher: PaperLauncher }): Promise<SweptPaperStep[]> {
  const drafts = createPaperDrafts(deps.store);
  const swept: SweptPaperStep[] = [];
  const { steps, unheld } = await drafts.papersInGeneration();
  for (const paper of unheld) {
    if (await drafts.giveBackUnheldPaper(paper.paper_id, NO_STEP_REASON)) swept.push({ paper_id: paper.paper_id, workflow_id: null, workflow_status: null });
  }
  for (const held of steps) {
    const status = await deps.launcher.stepWorkflowStatus(held.workflow_id, held.workflow_run_id);
    if (STILL_OPEN.includes(status)) continue;
    const reason = `its workflow ${held.workflow_id} closed (${status.replaceAll('_', ' ')}) without finishing the ${held.step.purpose}`;
    await drafts.abandonStep(held.step, held.from, reason);
    swept.push({ paper_id: held.step.paper_id, workflow_id: held.workflow_id, workflow_status: status });
  }
  return swept;
}
