import { readRunEvidence } from '../../worker-gate/contract/callback-body.ts';
import { rankPaper } from './domain/paper-rank.ts';
import { readRankInputs, setRank } from './paper-ledger.ts';
import type { Queryable } from '../../platform/store/store.ts';

/** Recomputes a paper's rank_score and reasons from its current inputs, in the caller's transaction. */
export async function recomputePaperRank(tx: Queryable, paperId: string, now: Date): Promise<void> {
  const inputs = await readRankInputs(tx, paperId);
  if (!inputs) return;
  const evidence = readRunEvidence(inputs.evidence);
  await setRank(
    tx,
    paperId,
    rankPaper({
      run_notes: evidence?.run_notes ?? false,
      decision_file: evidence?.decision_file ?? false,
      results_json_files: evidence?.results_json_files ?? 0,
      decision: inputs.decision,
      review_status: inputs.review_status,
      failed_checklist_items: inputs.failed_checklist_items,
      finished_at: inputs.finished_at,
      now: now.toISOString(),
    }),
  );
}
