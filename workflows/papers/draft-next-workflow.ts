import { WorkflowExecutionAlreadyStartedError } from '@temporalio/common';
import { executeChild, ParentClosePolicy, patched, proxyActivities } from '@temporalio/workflow';
import type { PaperActivities } from '../../activities/papers/paper-activities.ts';
import { draftNextNoopReason } from '../../capabilities/papers/domain/paper-steps.ts';
import { paperWorkflowId, type DraftNextInput, type DraftNextResult, type SkippedCandidate } from './paper-messages.ts';
import { paperWorkflow } from './paper-workflow.ts';
import { PAPER_PATCHES } from '../patches.ts';
import { paperStartOptions } from '../start-options.ts';

/**
 * draft-next (docs/papers.md#papers): the candidates in order, each drafted as its own `paper:<paper_id>` child until one is
 * drafted. A candidate whose evidence turns out missing, or whose paper another step holds, is reported and the next is
 * tried. An HTTP call waits for this workflow; the queue pump starts it and goes on; a research cycle waits for it as
 * its paper stage, so the stage reports the draft's real outcome, a crash in between included.
 */

const select = proxyActivities<Pick<PaperActivities, 'selectDraftCandidates'>>({
  startToCloseTimeout: '1 minute',
  retry: { maximumAttempts: 5, initialInterval: '1 second' },
});

/**
 * Candidates asked for at a time: most draft-nexts draft the first, and each candidate screened reads its evidence, so
 * twenty draft-nexts at once do not read twenty candidates each.
 */
const CANDIDATES_AT_A_TIME = 2;

export async function paperDraftNextWorkflow(input: DraftNextInput): Promise<DraftNextResult> {
  const passedOver: SkippedCandidate[] = [];
  const tried: string[] = [];
  for (;;) {
    const { candidates, skipped } = await select.selectDraftCandidates({ force: input.force, up_to: CANDIDATES_AT_A_TIME, exclude: tried });
    passedOver.push(...skipped);
    tried.push(...skipped.map((candidate) => candidate.paper_id));
    if (candidates.length === 0) break;
    for (const ref of candidates) {
      tried.push(ref.paper_id);
      let result;
      try {
        result = await executeChild(paperWorkflow, {
          ...paperStartOptions({ ...ref, purpose: 'draft', requested_by: input.requested_by, request_key: input.request_key }),
          // The draft is this draft-next's work: canceling the draft-next cancels it.
          parentClosePolicy: ParentClosePolicy.REQUEST_CANCEL,
        });
      } catch (error) {
        if (!(error instanceof WorkflowExecutionAlreadyStartedError)) throw error;
        passedOver.push({ ...ref, reason: 'in_progress', detail: `a draft or rewrite of '${ref.paper_id}' is running now (workflow ${paperWorkflowId(ref.paper_id)})` });
        continue;
      }
      switch (result.outcome) {
        case 'drafted':
          return { action: 'drafted', ...ref, result, skipped: passedOver };
        case 'failed':
          return { action: 'failed', ...ref, error: result.error, skipped: passedOver };
        case 'evidence_missing':
          passedOver.push({ ...ref, reason: 'missing_evidence', detail: `evidence missing in ${result.project_path}`, missing: result.missing, evidence_sync: result.evidence_sync });
          break;
        case 'refused':
          passedOver.push({ ...ref, reason: 'refused', detail: result.reason });
          break;
        case 'held_for_review':
          // Its evidence holds the service's secrets: the draft-next is refused on it, so a person hears of it now.
          if (patched(PAPER_PATCHES.evidenceSecrets)) return { action: 'held_for_review', ...ref, reason: result.reason, secrets: result.secrets, skipped: passedOver };
          passedOver.push({ ...ref, reason: 'refused', detail: result.reason });
          break;
      }
    }
  }
  return { action: 'noop', reason: draftNextNoopReason(tried.length, input.force), skipped: passedOver };
}
