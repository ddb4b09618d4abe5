import { COMPLETED_RUN_STATE, WRITABLE_DECISIONS } from '../domain/paper-candidacy.ts';
import type { PaperStatus } from '../domain/paper-status.ts';
import { getPaper, type PaperRow } from './papers.ts';
import type { Queryable } from './store.ts';

/** The paper ledger's drafting writes (migration 0007) and draft-next's candidate read. */

export interface DraftCandidateRow {
  run_id: string;
  project_id: string;
  project_name: string;
  project_dir: string;
  decision: string | null;
  decision_summary: string | null;
  evidence: Record<string, unknown> | null;
  finished_at: string | null;
  /** The run's paper, when it has one already. */
  paper_id: string | null;
  paper_status: PaperStatus | null;
}

/** Statuses whose paper draft-next redrafts when asked with `force`: drafted, and not in a step or archived. */
export const REDRAFTABLE_STATUSES: readonly PaperStatus[] = ['draft_review', 'human_review_required'];

/**
 * Completed runs with a writable decision and enough evidence (by the gate's summary), whose paper is not drafted yet
 * (none, or one still `eligible`); with `force`, also runs whose paper may be redrafted. Undrafted runs come first,
 * then the run that finished first. Papers whose review is final are never redrafted.
 */
export async function listDraftCandidates(q: Queryable, options: { force: boolean; limit: number }): Promise<DraftCandidateRow[]> {
  const result = await q.query<DraftCandidateRow>(
    `SELECT r.run_id, r.project_id, pr.project_name, pr.project_dir, r.decision, r.decision_summary, r.evidence,
            r.finished_at, p.paper_id, p.paper_status
       FROM runs r
       JOIN projects pr ON pr.project_id = r.project_id
       LEFT JOIN papers p ON p.run_id = r.run_id
      WHERE r.state = $1
        AND r.decision = ANY ($2::text[])
        AND jsonb_typeof(r.evidence -> 'sufficient_for_paper') = 'boolean'
        AND (r.evidence ->> 'sufficient_for_paper')::boolean
        AND (p.paper_id IS NULL OR p.paper_status = 'eligible'
             OR ($3 AND p.paper_status = ANY ($4::text[]) AND p.review_status NOT IN ('finalized', 'rejected')))
      ORDER BY (p.paper_id IS NOT NULL AND p.paper_status <> 'eligible'), r.finished_at ASC NULLS LAST, r.run_id
      LIMIT $5`,
    [COMPLETED_RUN_STATE, [...WRITABLE_DECISIONS], options.force, [...REDRAFTABLE_STATUSES], options.limit],
  );
  return result.rows;
}

/** The run's paper, created `eligible` when it has none yet. */
export async function ensurePaper(tx: Queryable, paper: { paper_id: string; project_id: string; run_id: string }): Promise<PaperRow> {
  await tx.query(
    `INSERT INTO papers (paper_id, project_id, run_id, paper_status) VALUES ($1, $2, $3, 'eligible')
     ON CONFLICT (paper_id) DO NOTHING`,
    [paper.paper_id, paper.project_id, paper.run_id],
  );
  return (await getPaper(tx, paper.paper_id, { forUpdate: true }))!;
}

export interface StoredDraft {
  paper_status: PaperStatus;
  title: string;
  writer: 'deterministic' | 'hosted';
  writer_fallback_reason: string | null;
  draft_dir: string;
  draft_artifacts: { path: string; sha256: string; bytes: number }[];
  evidence_summary: Record<string, unknown>;
  rewrite: boolean;
}

/** Records a finished draft or rewrite on the paper. */
export async function recordDraft(tx: Queryable, paperId: string, draft: StoredDraft): Promise<void> {
  await tx.query(
    `UPDATE papers
        SET paper_status = $2, title = $3, writer = $4, writer_fallback_reason = $5, draft_dir = $6,
            draft_artifacts = $7::jsonb, evidence_summary = $8::jsonb, draft_count = draft_count + 1,
            drafted_at = clock_timestamp(),
            rewrite_count = rewrite_count + CASE WHEN $9 THEN 1 ELSE 0 END,
            rewritten_at = CASE WHEN $9 THEN clock_timestamp() ELSE rewritten_at END
      WHERE paper_id = $1`,
    [
      paperId,
      draft.paper_status,
      draft.title,
      draft.writer,
      draft.writer_fallback_reason,
      draft.draft_dir,
      JSON.stringify(draft.draft_artifacts),
      JSON.stringify(draft.evidence_summary),
      draft.rewrite,
    ],
  );
}
