/**
 * Where a paper stands as a person reads it, and the commands it takes now (docs/papers.md#papers). Pure. Every paper the
 * API answers carries both (`stage`, `operator_actions`), so the dashboard and rcp show what this decides rather than
 * deciding it again, and the commands refuse what it refuses.
 *
 * paper_status stays where the last drafting step left it (`draft_review`, `publication_draft`, …) when the review is
 * finalized and when the paper is imported, so on its own it reads "draft review" for a paper that is long done. The
 * stage says `imported` once a corpus import is recorded, `finalized` once the review is, and paper_status before.
 */
import { FINAL_REVIEW_STATUSES, startStep } from './paper-steps.ts';
import { PAPER_STATUSES, REVIEW_STATUS_MOVES, type PaperStatus, type ReviewStatus } from './paper-status.ts';

export const PAPER_STAGES = [...PAPER_STATUSES, 'finalized', 'imported'] as const;
export type PaperStage = (typeof PAPER_STAGES)[number];

/** The commands on one paper: rewrite_draft (route rewrite-draft), set_checklist_item (checklist), move_review (status), and the two named as their routes. */
export const PAPER_ACTIONS = ['rewrite_draft', 'set_checklist_item', 'move_review', 'prepare_finalization_package', 'record_import'] as const;
export type PaperAction = (typeof PAPER_ACTIONS)[number];

export interface PaperFacts {
  paper_id: string;
  paper_status: PaperStatus;
  review_status: ReviewStatus;
  /** A corpus import is recorded for the paper. */
  imported: boolean;
  draft_artifacts: readonly unknown[];
}

export function paperStage(paper: Pick<PaperFacts, 'paper_status' | 'review_status' | 'imported'>): PaperStage {
  if (paper.imported) return 'imported';
  if (paper.review_status === 'finalized') return 'finalized';
  return paper.paper_status;
}

/** Why the paper does not take this command now, or null when it does. An imported paper takes none: it is done. */
export function paperActionRefusal(action: PaperAction, paper: PaperFacts): string | null {
  const id = paper.paper_id;
  if (paper.imported) return `'${id}' is imported into a corpus: it is done, and takes no ${action.replaceAll('_', ' ')}`;
  const finalReview = FINAL_REVIEW_STATUSES.includes(paper.review_status);
  switch (action) {
    case 'rewrite_draft': {
      const start = startStep('rewrite', paper);
      return start.ok ? null : start.reason;
    }
    case 'set_checklist_item':
      return finalReview ? `the review of '${id}' is ${paper.review_status}, which is final: its checklist is settled` : null;
    case 'move_review':
      return REVIEW_STATUS_MOVES[paper.review_status].length === 0 ? `the review of '${id}' is ${paper.review_status}, which is final` : null;
    case 'prepare_finalization_package':
      if (paper.draft_artifacts.length === 0) return `'${id}' has no draft yet: draft it first (draft-next)`;
      return paper.review_status === 'rejected' ? `the review of '${id}' was rejected` : null;
    case 'record_import':
      return paper.review_status === 'finalized' ? null : `'${id}' is not finalized (review_status ${paper.review_status}); only a finalized paper is imported`;
  }
}

/** The commands the paper takes now: what the dashboard and rcp offer for it. */
export function paperActions(paper: PaperFacts): PaperAction[] {
  return PAPER_ACTIONS.filter((action) => paperActionRefusal(action, paper) === null);
}
