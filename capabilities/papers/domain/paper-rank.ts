/**
 * A paper's `rank_score` and the reasons for it (docs/papers.md#papers): the review queue is sorted by it, highest first.
 * Pure and deterministic: the same inputs give the same score and reasons. The store recomputes it whenever one of
 * its inputs changes (evidence, decision, review status, checklist); recency is measured at that moment.
 */
import type { ReviewStatus } from './paper-status.ts';
import { isWritableDecision } from './paper-candidacy.ts';

export interface RankInputs {
  run_notes: boolean;
  decision_file: boolean;
  results_json_files: number;
  decision: string | null;
  review_status: ReviewStatus;
  /** Automated checklist items that failed. */
  failed_checklist_items: number;
  /** When the run finished (ISO 8601), or null. */
  finished_at: string | null;
  /** When the rank is computed (ISO 8601). */
  now: string;
}

export interface Rank {
  rank_score: number;
  rank_reasons: string[];
}

const RESULT_FILE_POINTS = 4;
const RESULT_FILES_COUNTED = 5;
const DAY_MS = 86_400_000;

const REVIEW_POINTS: Readonly<Record<ReviewStatus, number>> = {
  unreviewed: 0,
  triage_ready: 5,
  in_review: 8,
  changes_requested: -5,
  blocked: -15,
  approved_for_finalization: 15,
  finalized: 20,
  rejected: -50,
};

function recencyPoints(finishedAt: string | null, now: string): [number, string] {
  if (finishedAt === null) return [0, 'recency: finish time unknown (+0)'];
  const days = Math.max(0, Math.floor((Date.parse(now) - Date.parse(finishedAt)) / DAY_MS));
  const points = days < 7 ? 15 : days < 30 ? 8 : 0;
  return [points, `recency: finished ${days} day${days === 1 ? '' : 's'} before ranking (+${points})`];
}

const signed = (points: number) => (points < 0 ? `${points}` : `+${points}`);

export function rankPaper(inputs: RankInputs): Rank {
  const parts: [number, string][] = [];

  const files = Math.min(inputs.results_json_files, RESULT_FILES_COUNTED);
  const evidence = (inputs.run_notes ? 10 : 0) + (inputs.decision_file ? 10 : 0);
  const found = [inputs.run_notes && 'run notes', inputs.decision_file && 'decision file'].filter(Boolean).join(' and ') || 'no notes or decision file';
  parts.push([evidence, `evidence: ${found} (${signed(evidence)})`]);
  parts.push([files * RESULT_FILE_POINTS, `result files: ${inputs.results_json_files} results JSON file${inputs.results_json_files === 1 ? '' : 's'} (${signed(files * RESULT_FILE_POINTS)}${inputs.results_json_files > RESULT_FILES_COUNTED ? `, ${RESULT_FILES_COUNTED} counted` : ''})`]);

  const decisionPoints = isWritableDecision(inputs.decision) ? 25 : 0;
  parts.push([decisionPoints, `decision: ${inputs.decision ?? 'none'} (${signed(decisionPoints)})`]);

  parts.push(recencyPoints(inputs.finished_at, inputs.now));

  const review = REVIEW_POINTS[inputs.review_status];
  parts.push([review, `review: ${inputs.review_status} (${signed(review)})`]);

  if (inputs.failed_checklist_items > 0) {
    const points = -5 * inputs.failed_checklist_items;
    parts.push([points, `checklist: ${inputs.failed_checklist_items} automated item${inputs.failed_checklist_items === 1 ? '' : 's'} failed (${points})`]);
  }

  return { rank_score: parts.reduce((sum, [points]) => sum + points, 0), rank_reasons: parts.map(([, reason]) => reason) };
}
