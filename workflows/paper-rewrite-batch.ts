import { executeChild, ParentClosePolicy } from '@temporalio/workflow';
import { paperStartOptions } from './start-options.ts';
import { paperWorkflow } from './paper.ts';
import { type PaperWorkflowResult, type RewriteBatchInput, type RewriteBatchResult } from './paper-messages.ts';

/**
 * rewrite-batch (README "Papers"): rewrites the selected papers one after another, each as its own `paper:<paper_id>`
 * workflow, and answers what happened to each. One at a time keeps a batch from flooding the writer; a paper whose
 * rewrite cannot start (another step holds it) is reported and the batch goes on.
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
      results.push({ outcome: 'failed', paper_id: paper.paper_id, error: (error as Error).message });
    }
  }
  return { results };
}
