import { describe, expect, it } from 'vitest';
import { paperCandidacy, paperPipelineCount, type CandidatePaper, type CandidateRun } from '../../capabilities/papers/domain/paper-candidacy.ts';
import { rankPaper, type RankInputs } from '../../capabilities/papers/domain/paper-rank.ts';
import {
  canMovePaper,
  canMoveReview,
  CHECKLIST_ITEM_IDS,
  CHECKLIST_STATUSES,
  checklistEntryProblem,
  PAPER_STATUS_MOVES,
  PAPER_STATUSES,
  paperIdFor,
  REVIEW_STATUSES,
  type PaperStatus,
  type ReviewStatus,
} from '../../capabilities/papers/domain/paper-status.ts';

describe('review_status moves', () => {
  // Written out pair by pair, so a changed table fails here rather than agreeing with itself.
  const LEGAL = new Set([
    'unreviewed>triage_ready', 'unreviewed>blocked', 'unreviewed>rejected',
    'triage_ready>in_review', 'triage_ready>blocked', 'triage_ready>rejected',
    'in_review>changes_requested', 'in_review>blocked', 'in_review>approved_for_finalization', 'in_review>rejected',
    'changes_requested>in_review', 'changes_requested>blocked', 'changes_requested>rejected',
    'blocked>triage_ready', 'blocked>in_review', 'blocked>rejected',
    'approved_for_finalization>finalized', 'approved_for_finalization>in_review',
  ]);

  it('allows exactly the moves of the transition table, for every pair of the eight values', () => {
    for (const from of REVIEW_STATUSES) {
      for (const to of REVIEW_STATUSES) expect(canMoveReview(from, to), `${from} → ${to}`).toBe(LEGAL.has(`${from}>${to}`));
    }
  });

  it('keeps finalized and rejected terminal', () => {
    for (const to of REVIEW_STATUSES) {
      expect(canMoveReview('finalized', to)).toBe(false);
      expect(canMoveReview('rejected', to)).toBe(false);
    }
  });
});

describe('paper_status moves', () => {
  const reachable = (start: PaperStatus) => {
    const seen = new Set<PaperStatus>([start]);
    const queue = [start];
    while (queue.length > 0) for (const next of PAPER_STATUS_MOVES[queue.shift()!]) if (!seen.has(next)) seen.add(next), queue.push(next);
    return seen;
  };

  it('reaches every status from eligible, and leaves archived never', () => {
    expect([...reachable('eligible')].sort()).toEqual([...PAPER_STATUSES].sort());
    expect(PAPER_STATUS_MOVES.archived).toEqual([]);
  });

  it('lets every status but archived be archived, and no status move to itself', () => {
    for (const status of PAPER_STATUSES) {
      expect(canMovePaper(status, 'archived')).toBe(status !== 'archived');
      expect(canMovePaper(status, status)).toBe(false);
    }
  });

  it('returns a failed draft or rewrite to any status the step could have started from', () => {
    for (const from of PAPER_STATUSES) {
      if (canMovePaper(from, 'draft_generating')) expect(canMovePaper('draft_generating', from), from).toBe(true);
      if (canMovePaper(from, 'publication_generating')) expect(canMovePaper('publication_generating', from), from).toBe(true);
    }
  });
});

describe('checklist entries', () => {
  it('has the nine items and the five statuses', () => {
    expect(CHECKLIST_ITEM_IDS).toHaveLength(9);
    expect([...CHECKLIST_STATUSES].sort()).toEqual(['accepted_risk', 'fail', 'not_applicable', 'pass', 'pending']);
  });

  it('needs a note for fail and accepted_risk only', () => {
    for (const status of CHECKLIST_STATUSES) {
      const needsNote = status === 'fail' || status === 'accepted_risk';
      expect(checklistEntryProblem(status, null) !== null, status).toBe(needsNote);
      expect(checklistEntryProblem(status, '   ') !== null, status).toBe(needsNote);
      expect(checklistEntryProblem(status, 'seen by a reviewer')).toBeNull();
    }
  });
});

describe('paper candidacy and the pipeline counts', () => {
  const completed = (overrides: Partial<CandidateRun> = {}): CandidateRun => ({
    state: 'reconciled',
    decision: 'finalize_positive',
    sufficient_for_paper: true,
    ...overrides,
  });
  const paper = (overrides: Partial<CandidatePaper> = {}): CandidatePaper => ({
    paper_status: 'draft_review',
    review_status: 'unreviewed' as ReviewStatus,
    imported: false,
    ...overrides,
  });

  it('writes up a completed run with evidence and a positive finalize decision', () => {
    expect(paperCandidacy(completed())).toEqual({ writable: true });
  });

  it('says why a run is not writable', () => {
    expect(paperCandidacy(completed({ state: 'gate_error' }))).toMatchObject({ writable: false, reason: 'run_not_completed' });
    expect(paperCandidacy(completed({ sufficient_for_paper: false }))).toMatchObject({
      writable: false,
      reason: 'missing_evidence',
      detail: expect.stringContaining('run_notes.md'),
    });
    for (const decision of ['negative', 'inconclusive', null]) {
      expect(paperCandidacy(completed({ decision }))).toMatchObject({
        writable: false,
        reason: 'decision_not_writable',
        detail: expect.stringContaining(decision ?? 'missing'),
      });
    }
  });

  it('counts each completed run in at most one of the five counts', () => {
    expect(paperPipelineCount(completed(), null)).toBe('write_needed');
    expect(paperPipelineCount(completed(), paper({ paper_status: 'eligible' }))).toBe('write_needed');
    expect(paperPipelineCount(completed(), paper())).toBeNull();
    expect(paperPipelineCount(completed({ sufficient_for_paper: false }), null)).toBe('raw_completed_no_paper_candidates');
    expect(paperPipelineCount(completed({ decision: 'negative' }), null)).toBe('not_writable_by_decision_gate');
    expect(paperPipelineCount(completed(), paper({ review_status: 'finalized' }))).toBe('publish_ready');
    expect(paperPipelineCount(completed(), paper({ review_status: 'finalized', imported: true }))).toBe('published_imported');
    expect(paperPipelineCount(completed({ state: 'running' }), null)).toBeNull();
  });
});

describe('rank', () => {
  const inputs = (overrides: Partial<RankInputs> = {}): RankInputs => ({
    run_notes: true,
    decision_file: true,
    results_json_files: 2,
    decision: 'finalize_positive',
    review_status: 'unreviewed',
    failed_checklist_items: 0,
    finished_at: '2026-11-20T10:00:00Z',
    now: '2026-11-22T10:00:00Z',
    ...overrides,
  });

  it('is the same for the same inputs, and its reasons add up to it', () => {
    const first = rankPaper(inputs());
    expect(rankPaper(inputs())).toEqual(first);
    const points = first.rank_reasons.map((reason) => Number(/\(([+-]\d+)/.exec(reason)![1]));
    expect(points.reduce((a, b) => a + b, 0)).toBe(first.rank_score);
    expect(first.rank_reasons).toEqual([
      'evidence: run notes and decision file (+20)',
      'result files: 2 results JSON files (+8)',
      'decision: finalize_positive (+25)',
      'recency: finished 2 days before ranking (+15)',
      'review: unreviewed (+0)',
    ]);
  });

  it('ranks stronger evidence, a positive decision, recency and a better review higher', () => {
    const base = rankPaper(inputs()).rank_score;
    expect(rankPaper(inputs({ results_json_files: 5 })).rank_score).toBeGreaterThan(base);
    expect(rankPaper(inputs({ results_json_files: 9 })).rank_score).toBe(rankPaper(inputs({ results_json_files: 5 })).rank_score);
    expect(rankPaper(inputs({ decision: 'inconclusive' })).rank_score).toBeLessThan(base);
    expect(rankPaper(inputs({ now: '2027-03-01T00:00:00Z' })).rank_score).toBeLessThan(base);
    expect(rankPaper(inputs({ review_status: 'approved_for_finalization' })).rank_score).toBeGreaterThan(base);
    expect(rankPaper(inputs({ review_status: 'rejected' })).rank_score).toBeLessThan(base);
    expect(rankPaper(inputs({ failed_checklist_items: 2 })).rank_score).toBe(base - 10);
  });
});

it('names a paper after its project and run', () => {
  expect(paperIdFor('alpha', 'alpha-20261122T100000Z')).toBe('alpha:alpha-20261122T100000Z:draft');
});
