/**
 * The paper_status moves of a drafting step (docs/papers.md#papers): a first draft or forced redraft (draft-next), or a
 * rewrite (rewrite-draft, rewrite-batch). Pure; every move named here is in PAPER_STATUS_MOVES.
 */
import { canMovePaper, type PaperStatus, type ReviewStatus } from './paper-status.ts';

export type DraftPurpose = 'draft' | 'rewrite';

/** Where a paper may be when a step of this purpose starts. */
export const STEP_STARTS_FROM: Readonly<Record<DraftPurpose, readonly PaperStatus[]>> = {
  draft: ['eligible', 'draft_review', 'human_review_required'],
  rewrite: ['draft_review', 'publication_draft', 'human_review_required'],
};

const GENERATING: Readonly<Record<DraftPurpose, PaperStatus>> = { draft: 'draft_generating', rewrite: 'publication_generating' };
const WRITTEN: Readonly<Record<DraftPurpose, PaperStatus>> = { draft: 'draft_review', rewrite: 'publication_draft' };

/** A review that is over: its paper's draft is not written again. */
export const FINAL_REVIEW_STATUSES: readonly ReviewStatus[] = ['finalized', 'rejected'];

export type StepStart = { ok: true; to: PaperStatus } | { ok: false; reason: string };

/** The status a step moves the paper to as it starts, or why it may not start. */
export function startStep(purpose: DraftPurpose, paper: { paper_status: PaperStatus; review_status: ReviewStatus }): StepStart {
  if (FINAL_REVIEW_STATUSES.includes(paper.review_status)) {
    return { ok: false, reason: `the review is ${paper.review_status}, which is final: the draft is not written again` };
  }
  const to = GENERATING[purpose];
  if (!STEP_STARTS_FROM[purpose].includes(paper.paper_status) || !canMovePaper(paper.paper_status, to)) {
    const verb = purpose === 'draft' ? 'drafted' : 'rewritten';
    return { ok: false, reason: `a paper in ${paper.paper_status} is not ${verb}; it may be from ${STEP_STARTS_FROM[purpose].join(', ')}` };
  }
  return { ok: true, to };
}

/** Where the paper goes once its draft is stored and judged: a failed automated item needs a person. */
export function finishStep(purpose: DraftPurpose, checklistPassed: boolean): PaperStatus {
  return checklistPassed ? WRITTEN[purpose] : 'human_review_required';
}

/** Failure types of the paper workflow's activities that no retry can mend. */
export const PAPER_FAILURE_TYPES = {
  writerFailed: 'PaperWriterFailed',
  evidenceMissing: 'PaperEvidenceMissing',
  /** The evidence holds this service's secret values; the details carry the findings (files and fields, no values). */
  evidenceSecret: 'PaperEvidenceSecret',
  unknownPaper: 'PaperUnknown',
} as const;

/** Why a draft-next drafted nothing, given how many candidates it looked at. */
export function draftNextNoopReason(lookedAt: number, force: boolean): string {
  return lookedAt === 0
    ? `no completed run with a positive decision and paper evidence is waiting for a draft${force ? ' or may be redrafted' : ''}`
    : `every candidate looked at (${lookedAt}) was skipped`;
}
