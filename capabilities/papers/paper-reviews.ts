import {
  canMovePaper,
  canMoveReview,
  CHECKLIST_ITEM_IDS,
  checklistEntryProblem,
  REVIEW_STATUS_MOVES,
  type ChecklistItemId,
  type ChecklistStatus,
  type ReviewStatus,
} from './domain/paper-status.ts';
import { paperActionRefusal } from './domain/paper-stage.ts';
import { appendAuditEvent } from '../../platform/store/audit-events.ts';
import { runIdempotent } from '../../platform/store/idempotency-keys.ts';
import {
  getChecklist,
  getCorpusImport,
  getPaper,
  hasFinalizationPackage,
  insertCorpusImport,
  insertReviewHistory,
  setPaperStatus,
  setReviewStatus,
  upsertChecklistItem,
  type ChecklistItemRow,
  type PaperRow,
} from './paper-ledger.ts';
import type { Queryable, Store } from '../../platform/store/store.ts';
import { CommandRefusedError } from '../../platform/command-errors.ts';
import { recomputePaperRank } from './paper-rerank.ts';

/**
 * The review commands on a paper (docs/papers.md#papers): move its review_status, set a checklist item, the compatibility
 * approve-finalization, and record its corpus import. Each runs in one transaction with its audit event, once per
 * idempotency key: the same key and body answer the first answer, a different body is 409. A refused command writes
 * nothing, its key included, so it can be sent again once the paper allows it.
 */

interface Command {
  idempotency_key: string;
  requested_by: string;
}

export interface StatusRequest extends Command {
  review_status: ReviewStatus;
  note?: string | undefined;
  blocker?: string | undefined;
}

export interface ApproveRequest extends Command {
  note?: string | undefined;
}

export interface ChecklistRequest extends Command {
  status: ChecklistStatus;
  note?: string | undefined;
}

export interface ImportRequest extends Command {
  corpus_repo: string;
  commit_sha: string;
  manifest_sha256: string;
}

export interface RequestContext {
  request_id?: string | undefined;
}

const TERMINAL_REVIEW_STATUSES: readonly ReviewStatus[] = ['finalized', 'rejected'];

/** The paper with its whole checklist, items never judged shown as pending. */
export async function paperWithChecklist(q: Queryable, paper: PaperRow): Promise<PaperRow & { checklist: ChecklistItemRow[] }> {
  const stored = new Map((await getChecklist(q, paper.paper_id)).map((item) => [item.item_id, item]));
  const checklist = CHECKLIST_ITEM_IDS.map(
    (item_id): ChecklistItemRow => stored.get(item_id) ?? { item_id, status: 'pending', note: null, judged_by: null, updated_at: paper.created_at },
  );
  return { ...paper, checklist };
}

export function createPaperReviews(store: Store, clock: () => Date = () => new Date()) {
  const recomputeRank = (tx: Queryable, paperId: string) => recomputePaperRank(tx, paperId, clock());

  /** Runs `body` on the locked paper, once per idempotency key of this command. */
  async function command<T>(
    scope: string,
    paperId: string,
    request: Command & Record<string, unknown>,
    body: (tx: Queryable, paper: PaperRow) => Promise<T>,
  ): Promise<T> {
    const { idempotency_key: key, ...payload } = request;
    return store.transaction(async (tx) => {
      const run = async () => {
        const paper = await getPaper(tx, paperId, { forUpdate: true });
        if (!paper) throw new CommandRefusedError(404, `paper '${paperId}' does not exist`);
        return body(tx, paper);
      };
      return (await runIdempotent(tx, { scope, key, payload: { paper_id: paperId, ...payload } }, run)).response;
    });
  }

  async function answer<Extra extends Record<string, unknown>>(tx: Queryable, paperId: string, extra: Extra) {
    const paper = (await getPaper(tx, paperId))!;
    return { ok: true as const, paper_id: paperId, ...extra, paper: await paperWithChecklist(tx, paper) };
  }

  async function moveReview(
    tx: Queryable,
    paper: PaperRow,
    move: { to: ReviewStatus; note: string | null; blocker: string | null; requested_by: string; event_type: string; key: string },
    context: RequestContext,
  ) {
    const from = paper.review_status;
    await setReviewStatus(tx, paper.paper_id, move.to);
    const history = await insertReviewHistory(tx, {
      paper_id: paper.paper_id,
      from_status: from,
      to_status: move.to,
      note: move.note,
      blocker: move.blocker,
      requested_by: move.requested_by,
    });
    // A rejected review archives the paper: it leaves the operator flow for good.
    const archived = move.to === 'rejected' && canMovePaper(paper.paper_status, 'archived');
    if (archived) await setPaperStatus(tx, paper.paper_id, 'archived');
    await recomputeRank(tx, paper.paper_id);
    await appendAuditEvent(tx, {
      entity_type: 'paper_review',
      entity_id: paper.paper_id,
      event_type: move.event_type,
      payload: { from, to: move.to, note: move.note, blocker: move.blocker, ...(archived ? { paper_status: { from: paper.paper_status, to: 'archived' } } : {}) },
      idempotency_key: move.key,
      actor: move.requested_by,
      request_id: context.request_id ?? null,
    });
    return answer(tx, paper.paper_id, { changed: true, review_status: { from, to: move.to }, history });
  }

  return {
    /** A move of the review transition table; any other move is 400 and changes nothing. */
    moveReviewStatus(paperId: string, request: StatusRequest, context: RequestContext = {}) {
      return command('paper-review.status', paperId, { ...request }, async (tx, paper) => {
        if (!canMoveReview(paper.review_status, request.review_status)) {
          const allowed = REVIEW_STATUS_MOVES[paper.review_status];
          throw new CommandRefusedError(
            400,
            `review_status cannot move from ${paper.review_status} to ${request.review_status}; from ${paper.review_status} it may move to ${allowed.length > 0 ? allowed.join(', ') : 'nothing (terminal)'}`,
          );
        }
        return moveReview(tx, paper, {
          to: request.review_status,
          note: request.note ?? null,
          blocker: request.blocker ?? null,
          requested_by: request.requested_by,
          event_type: 'paper_review.status_changed',
          key: request.idempotency_key,
        }, context);
      });
    },

    /** The compatibility path: marks the review approved for finalization from any status that is not terminal. */
    approveFinalization(paperId: string, request: ApproveRequest, context: RequestContext = {}) {
      return command('paper-review.approve-finalization', paperId, { ...request }, async (tx, paper) => {
        if (TERMINAL_REVIEW_STATUSES.includes(paper.review_status)) {
          throw new CommandRefusedError(409, `the review of '${paperId}' is ${paper.review_status}, which is final`);
        }
        if (paper.review_status === 'approved_for_finalization') {
          return answer(tx, paperId, { changed: false, review_status: { from: paper.review_status, to: paper.review_status } });
        }
        return moveReview(tx, paper, {
          to: 'approved_for_finalization',
          note: request.note ?? null,
          blocker: null,
          requested_by: request.requested_by,
          event_type: 'paper_review.finalization_approved',
          key: request.idempotency_key,
        }, context);
      });
    },

    /** One checklist item set by a person; fail and accepted_risk need a note. */
    setChecklistItem(paperId: string, itemId: ChecklistItemId, request: ChecklistRequest, context: RequestContext = {}) {
      return command('paper-review.checklist', paperId, { ...request, item_id: itemId }, async (tx, paper) => {
        const refused = paperActionRefusal('set_checklist_item', paper);
        if (refused) throw new CommandRefusedError(409, refused);
        const note = request.note?.trim() ? request.note : null;
        const problem = checklistEntryProblem(request.status, note);
        if (problem) throw new CommandRefusedError(422, [{ loc: ['body', 'note'], msg: problem, type: 'missing' }]);
        const before = (await getChecklist(tx, paperId)).find((item) => item.item_id === itemId);
        const item = await upsertChecklistItem(tx, paperId, { item_id: itemId, status: request.status, note, judged_by: request.requested_by });
        await recomputeRank(tx, paperId);
        await appendAuditEvent(tx, {
          entity_type: 'paper_review',
          entity_id: paperId,
          event_type: 'paper_review.checklist_item_set',
          payload: { item_id: itemId, from: before?.status ?? 'pending', to: request.status, note },
          idempotency_key: request.idempotency_key,
          actor: request.requested_by,
          request_id: context.request_id ?? null,
        });
        return answer(tx, paper.paper_id, { item });
      });
    },

    /**
     * Records that a finalized paper's package is in a corpus: once per paper, and only for a manifest this service
     * wrote for that paper. From then on the paper counts as published_imported.
     */
    recordImport(paperId: string, request: ImportRequest, context: RequestContext = {}) {
      return command('paper.record-import', paperId, { ...request }, async (tx, paper) => {
        const existing = await getCorpusImport(tx, paperId);
        if (existing) {
          throw new CommandRefusedError(409, `'${paperId}' is already recorded as imported into ${existing.corpus_repo} at ${existing.commit_sha}`);
        }
        const refused = paperActionRefusal('record_import', paper);
        if (refused) throw new CommandRefusedError(409, refused);
        if (!(await hasFinalizationPackage(tx, paperId, request.manifest_sha256))) {
          throw new CommandRefusedError(409, `no finalization package of '${paperId}' has the manifest sha256 ${request.manifest_sha256}`);
        }
        const imported = await insertCorpusImport(tx, {
          paper_id: paperId,
          corpus_repo: request.corpus_repo,
          commit_sha: request.commit_sha,
          manifest_sha256: request.manifest_sha256,
          requested_by: request.requested_by,
        });
        await appendAuditEvent(tx, {
          entity_type: 'paper',
          entity_id: paperId,
          event_type: 'paper.imported',
          payload: { corpus_repo: imported.corpus_repo, commit_sha: imported.commit_sha, manifest_sha256: imported.manifest_sha256 },
          idempotency_key: request.idempotency_key,
          actor: request.requested_by,
          request_id: context.request_id ?? null,
        });
        return answer(tx, paperId, { corpus_import: imported });
      });
    },
  };
}

export type PaperReviews = ReturnType<typeof createPaperReviews>;
