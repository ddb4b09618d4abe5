/**
 * The paper vocabularies and the moves between their values (docs/papers.md#papers). Pure.
 *
 * A paper has two statuses. `paper_status` is where the paper is in the operator flow (write, then finalize, then
 * publish/import); this service moves it. `review_status` is the older raw review state, moved by a person through
 * the review routes; the moves between its values are fixed by REVIEW_STATUS_MOVES.
 */

export const PAPER_STATUSES = [
  'eligible',
  'draft_generating',
  'draft_review',
  'publication_generating',
  'publication_draft',
  'human_review_required',
  'archived',
] as const;
export type PaperStatus = (typeof PAPER_STATUSES)[number];

export const REVIEW_STATUSES = [
  'unreviewed',
  'triage_ready',
  'in_review',
  'changes_requested',
  'blocked',
  'approved_for_finalization',
  'finalized',
  'rejected',
] as const;
export type ReviewStatus = (typeof REVIEW_STATUSES)[number];

export const CHECKLIST_STATUSES = ['pending', 'pass', 'fail', 'accepted_risk', 'not_applicable'] as const;
export type ChecklistStatus = (typeof CHECKLIST_STATUSES)[number];

/** The checklist every paper carries, in the order a reviewer reads it. */
export const CHECKLIST_ITEM_IDS = [
  'artifact_readability',
  'title_abstract_quality',
  'claim_evidence_alignment',
  'novelty_significance',
  'reproducibility',
  'limitations_ethics',
  'formatting_quality',
  'target_venue_fit',
  'final_human_approval',
] as const;
export type ChecklistItemId = (typeof CHECKLIST_ITEM_IDS)[number];

/** Items a person must judge: the automated checklist leaves them pending. */
export const HUMAN_CHECKLIST_ITEM_IDS = ['novelty_significance', 'target_venue_fit', 'final_human_approval'] as const satisfies readonly ChecklistItemId[];

/** A checklist status that records a problem, so it must say what the problem is. */
export const CHECKLIST_STATUSES_NEEDING_A_NOTE = ['fail', 'accepted_risk'] as const satisfies readonly ChecklistStatus[];

/** Where a review may go from each status; finalized and rejected are terminal. */
export const REVIEW_STATUS_MOVES: Readonly<Record<ReviewStatus, readonly ReviewStatus[]>> = {
  unreviewed: ['triage_ready', 'blocked', 'rejected'],
  triage_ready: ['in_review', 'blocked', 'rejected'],
  in_review: ['changes_requested', 'blocked', 'approved_for_finalization', 'rejected'],
  changes_requested: ['in_review', 'blocked', 'rejected'],
  blocked: ['triage_ready', 'in_review', 'rejected'],
  approved_for_finalization: ['finalized', 'in_review'],
  finalized: [],
  rejected: [],
};

/**
 * Where this service moves `paper_status`:
 * - eligible → draft_generating: a first draft starts (draft-next); draft_review and human_review_required →
 *   draft_generating: a forced redraft (draft-next with `force`).
 * - draft_generating → draft_review: the draft is stored and every automated checklist item passed or needs a person;
 *   → human_review_required instead when an automated item failed.
 * - draft_review, publication_draft, human_review_required → publication_generating: a rewrite starts (rewrite-draft).
 * - publication_generating → publication_draft, or → human_review_required when an automated item failed.
 * - A step that fails (writer error, evidence missing) returns the paper to the status it had before the step.
 * - Any status but archived → archived: the review was rejected. archived is terminal.
 * - Any status but archived → human_review_required: a step found this service's secret values in the evidence
 *   (capabilities/papers/paper-secret-hold.ts).
 */
export const PAPER_STATUS_MOVES: Readonly<Record<PaperStatus, readonly PaperStatus[]>> = {
  eligible: ['draft_generating', 'human_review_required', 'archived'],
  draft_generating: ['draft_review', 'human_review_required', 'eligible', 'archived'],
  draft_review: ['draft_generating', 'publication_generating', 'human_review_required', 'archived'],
  publication_generating: ['publication_draft', 'human_review_required', 'draft_review', 'archived'],
  publication_draft: ['publication_generating', 'human_review_required', 'archived'],
  human_review_required: ['draft_generating', 'publication_generating', 'archived'],
  archived: [],
};

function member<T extends string>(values: readonly T[]) {
  return (value: unknown): value is T => typeof value === 'string' && (values as readonly string[]).includes(value);
}

export const isPaperStatus = member(PAPER_STATUSES);
export const isReviewStatus = member(REVIEW_STATUSES);
export const isChecklistStatus = member(CHECKLIST_STATUSES);
export const isChecklistItemId = member(CHECKLIST_ITEM_IDS);

export function canMoveReview(from: ReviewStatus, to: ReviewStatus): boolean {
  return REVIEW_STATUS_MOVES[from].includes(to);
}

export function canMovePaper(from: PaperStatus, to: PaperStatus): boolean {
  return PAPER_STATUS_MOVES[from].includes(to);
}

/** Null when the checklist entry may be recorded; otherwise why not. */
export function checklistEntryProblem(status: ChecklistStatus, note: string | null | undefined): string | null {
  const needsNote = (CHECKLIST_STATUSES_NEEDING_A_NOTE as readonly string[]).includes(status);
  return needsNote && !note?.trim() ? `a checklist item marked ${status} needs a note saying why` : null;
}

/** `<project_id>:<run_id>:draft`: one paper per run. */
export function paperIdFor(projectId: string, runId: string): string {
  return `${projectId}:${runId}:draft`;
}
