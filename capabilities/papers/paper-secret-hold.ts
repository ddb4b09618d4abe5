import { SECRET_FOUND_EVENT, secretFindingReason, type SecretFinding, type SecretScanStage } from './domain/evidence-secrets.ts';
import { canMovePaper, canMoveReview, type PaperStatus, type ReviewStatus } from './domain/paper-status.ts';
import { appendAuditEvent, findAuditEventByKey } from '../../platform/store/audit-events.ts';
import { ensurePaper } from './store/draft-ledger.ts';
import { getPaper, insertReviewHistory, setPaperStatus, setReviewStatus, upsertChecklistItem } from './paper-ledger.ts';
import type { Queryable, Store } from '../../platform/store/store.ts';
import { recomputePaperRank } from './paper-rerank.ts';

/**
 * A paper whose evidence holds this service's secret values is held for a person (docs/security.md#security-model): its
 * paper_status goes to human_review_required, its review to blocked with the finding as the blocker (an approval
 * for finalization is withdrawn on the way), final_human_approval fails with the finding as its note (so no package
 * goes out until a person passes it again), and an audit event names the files and the secrets' fields, never a
 * value. Once per `key`: a retried step finds its own event and changes nothing again.
 */

export interface SecretHold {
  paper: { paper_id: string; project_id: string; run_id: string };
  stage: SecretScanStage;
  findings: SecretFinding[];
  requested_by: string;
  /** Names this refusal: the paper step's key, or the package request's idempotency key. */
  key: string;
  request_key: string | null;
  request_id?: string | null;
}

export interface HeldPaper {
  reason: string;
  paper_status: PaperStatus;
  review_status: ReviewStatus;
}

/** Who the checklist and the review history name as having recorded the finding. */
export const SECRET_SCAN_ACTOR = 'evidence-secret-scan';

/** The review moves that bring a review to blocked: an approval is withdrawn first. */
function reviewPathToBlocked(from: ReviewStatus): ReviewStatus[] {
  if (canMoveReview(from, 'blocked')) return ['blocked'];
  if (from === 'approved_for_finalization') return ['in_review', 'blocked'];
  return [];
}

export function holdPaperForSecrets(store: Store, hold: SecretHold): Promise<HeldPaper> {
  const reason = secretFindingReason(hold.stage, hold.findings);
  return store.transaction(async (tx: Queryable) => {
    const earlier = await findAuditEventByKey(tx, SECRET_FOUND_EVENT, hold.key);
    if (earlier) {
      const to = earlier.payload as { paper_status: { to: PaperStatus }; review_status: { to: ReviewStatus } };
      return { reason, paper_status: to.paper_status.to, review_status: to.review_status.to };
    }
    const paper = (await getPaper(tx, hold.paper.paper_id, { forUpdate: true })) ?? (await ensurePaper(tx, hold.paper));
    const paperTo: PaperStatus = canMovePaper(paper.paper_status, 'human_review_required') ? 'human_review_required' : paper.paper_status;
    if (paperTo !== paper.paper_status) await setPaperStatus(tx, paper.paper_id, paperTo);
    let review = paper.review_status;
    for (const to of reviewPathToBlocked(paper.review_status)) {
      await insertReviewHistory(tx, {
        paper_id: paper.paper_id,
        from_status: review,
        to_status: to,
        note: to === 'blocked' ? null : 'approval withdrawn: the evidence holds secret values of this service',
        blocker: to === 'blocked' ? reason : null,
        requested_by: SECRET_SCAN_ACTOR,
      });
      review = to;
    }
    if (review !== paper.review_status) await setReviewStatus(tx, paper.paper_id, review);
    await upsertChecklistItem(tx, paper.paper_id, { item_id: 'final_human_approval', status: 'fail', note: reason, judged_by: SECRET_SCAN_ACTOR });
    await recomputePaperRank(tx, paper.paper_id, new Date());
    await appendAuditEvent(tx, {
      entity_type: 'paper',
      entity_id: paper.paper_id,
      event_type: SECRET_FOUND_EVENT,
      payload: {
        stage: hold.stage,
        files: hold.findings,
        paper_status: { from: paper.paper_status, to: paperTo },
        review_status: { from: paper.review_status, to: review },
        request_key: hold.request_key,
      },
      idempotency_key: hold.key,
      actor: hold.requested_by,
      request_id: hold.request_id ?? null,
    });
    return { reason, paper_status: paperTo, review_status: review };
  });
}

/** Whether a step's refusal held its paper: its abandonment then leaves the paper where the hold put it. */
export async function heldForSecrets(q: Queryable, key: string): Promise<boolean> {
  return (await findAuditEventByKey(q, SECRET_FOUND_EVENT, key)) !== undefined;
}
