import { WorkflowExecutionAlreadyStartedError } from '@temporalio/common';
import { CancellationScope, ChildWorkflowFailure, executeChild, isCancellation, ParentClosePolicy, patched } from '@temporalio/workflow';
import { paperStartOptions } from '../start-options.ts';
import { paperWorkflow } from './paper-workflow.ts';
import { paperWorkflowId, type PaperWorkflowResult, type RewriteBatchInput, type RewriteBatchResult } from './paper-messages.ts';
import { PAPER_PATCHES } from '../patches.ts';

/**
 * rewrite-batch (docs/papers.md#papers): rewrites the selected papers one after another, each as its own `paper:<paper_id>`
 * workflow, and answers what happened to each. One at a time keeps a batch from flooding the writer; a paper whose
 * rewrite cannot start (another step holds it) is reported as refused, one whose workflow failed or was canceled on
 * its own as failed, and the batch goes on. A canceled batch cancels the rewrite under way and ends canceled.
 */
export async function paperRewriteBatchWorkflow(input: RewriteBatchInput): Promise<RewriteBatchResult> {
  const results: PaperWorkflowResult[] = [];
  for (const paper of input.papers) {
    try {
      results.push(
        await executeChild(paperWorkflow, {
          ...paperStartOptions({ ...paper, purpose: 'rewrite', requested_by: input.requested_by, request_key: input.request_key }),
          parentClosePolicy: ParentClosePolicy.REQUEST_CANCEL,
        }),
      );
    } catch (error) {
      results.push(childOutcome(paper.paper_id, error));
    }
  }
  return { results };
}

/** What a rewrite that did not report an outcome of its own answers in the batch; the batch's own cancellation ends it. */
function childOutcome(paperId: string, error: unknown): PaperWorkflowResult {
  if (isCancellation(error) && CancellationScope.current().consideredCancelled && patched(PAPER_PATCHES.stepCancellation)) throw error;
  if (error instanceof WorkflowExecutionAlreadyStartedError) {
    return { outcome: 'refused', paper_id: paperId, reason: `a draft or rewrite of '${paperId}' is running now (workflow ${paperWorkflowId(paperId)})` };
  }
  if (isCancellation(error)) return { outcome: 'failed', paper_id: paperId, error: `the rewrite was canceled (workflow ${paperWorkflowId(paperId)})` };
  if (error instanceof ChildWorkflowFailure) return { outcome: 'failed', paper_id: paperId, error: error.cause?.message ?? error.message };
  throw error;
}
