/**
 * Which completed runs become papers, and the five paper-pipeline counts (docs/papers.md#papers). Pure; the store's count
 * query (capabilities/papers/paper-counts.ts) is this rule in SQL, and a test holds the two together.
 */
import type { ReviewStatus } from './paper-status.ts';

/** Agent decisions (`.research/decision.json`) the decision gate lets through to a paper: a positive finalize. */
export const WRITABLE_DECISIONS = ['finalize_positive'] as const;

/** The run state of a run that ended normally (the agent finished and the gate saw the project quiet). */
export const COMPLETED_RUN_STATE = 'reconciled';

export const PAPER_PIPELINE_COUNTS = [
  'write_needed',
  'raw_completed_no_paper_candidates',
  'not_writable_by_decision_gate',
  'publish_ready',
  'published_imported',
] as const;
export type PaperPipelineCount = (typeof PAPER_PIPELINE_COUNTS)[number];
export type PaperPipelineCounts = Record<PaperPipelineCount, number>;

export interface CandidateRun {
  state: string;
  decision: string | null;
  /** Whether the run's evidence is enough for a paper: run_notes.md plus decision.json or results JSON. */
  sufficient_for_paper: boolean;
}

export interface CandidatePaper {
  paper_status: string;
  review_status: ReviewStatus;
  /** A corpus-import row exists for the paper. */
  imported: boolean;
}

export type Candidacy =
  | { writable: true }
  | { writable: false; reason: 'run_not_completed' | 'missing_evidence' | 'decision_not_writable'; detail: string };

export function isWritableDecision(decision: string | null): boolean {
  return decision !== null && (WRITABLE_DECISIONS as readonly string[]).includes(decision);
}

/** Whether a run may have a paper drafted, and if not, why, in words an operator can act on. */
export function paperCandidacy(run: CandidateRun): Candidacy {
  if (run.state !== COMPLETED_RUN_STATE) {
    return { writable: false, reason: 'run_not_completed', detail: `the run is ${run.state}, not completed` };
  }
  if (!run.sufficient_for_paper) {
    return {
      writable: false,
      reason: 'missing_evidence',
      detail: 'the run left no paper evidence: run_notes.md plus .research/decision.json or non-empty results/**/*.json',
    };
  }
  if (!isWritableDecision(run.decision)) {
    return {
      writable: false,
      reason: 'decision_not_writable',
      detail: `the agent's decision is ${run.decision ?? 'missing'}; only ${WRITABLE_DECISIONS.join(', ')} is written up`,
    };
  }
  return { writable: true };
}

/**
 * The one count a run (with its paper, if any) falls in, or null for none; only completed runs are counted:
 * - published_imported: its paper has a corpus-import row.
 * - publish_ready: its paper's review is finalized and not yet imported.
 * - write_needed: a writable run whose paper is not drafted yet (no paper, or one still `eligible`).
 * - not_writable_by_decision_gate: evidence enough, but a decision the gate does not write up; no paper.
 * - raw_completed_no_paper_candidates: completed without paper evidence; no paper.
 * A paper being drafted or reviewed is in none of them: it is the reviewers' work, counted by status.
 */
export function paperPipelineCount(run: CandidateRun, paper: CandidatePaper | null): PaperPipelineCount | null {
  if (run.state !== COMPLETED_RUN_STATE) return null;
  if (paper?.imported) return 'published_imported';
  if (paper?.review_status === 'finalized') return 'publish_ready';
  const candidacy = paperCandidacy(run);
  if (candidacy.writable) return paper === null || paper.paper_status === 'eligible' ? 'write_needed' : null;
  if (paper !== null) return null;
  if (candidacy.reason === 'missing_evidence') return 'raw_completed_no_paper_candidates';
  if (candidacy.reason === 'decision_not_writable') return 'not_writable_by_decision_gate';
  return null;
}

export function emptyPaperPipelineCounts(): PaperPipelineCounts {
  return Object.fromEntries(PAPER_PIPELINE_COUNTS.map((name) => [name, 0])) as PaperPipelineCounts;
}
