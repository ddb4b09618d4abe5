import { COMPLETED_RUN_STATE, WRITABLE_DECISIONS } from '../domain/paper-candidacy.ts';
import type { PaperStatus } from '../domain/paper-status.ts';
import { getPaper, type EvidenceSummary, type PaperRow } from '../paper-ledger.ts';
import type { Queryable } from '../../../platform/store/store.ts';

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

const CANDIDATE_COLUMNS = `r.run_id, r.project_id, pr.project_name, pr.project_dir, r.decision, r.decision_summary, r.evidence,
       r.finished_at, p.paper_id, p.paper_status`;

/** A completed run with a writable decision and enough evidence by the gate's summary. */
const WRITABLE_RUN = `r.state = $1 AND r.decision = ANY ($2::text[]) AND r.evidence -> 'sufficient_for_paper' = 'true'::jsonb`;

/**
 * Completed runs with a writable decision and enough evidence, whose paper is not drafted yet (none, or one still
 * `eligible`), the run that finished first first; with `force`, then papers that may be redrafted. Papers whose review
 * is final are never redrafted.
 *
 * The first read walks the partial index runs_awaiting_draft (migration 0008), whose predicate this WHERE implies:
 * runs.paper_status is the trigger-kept copy of the paper's status, so drafted runs are not in the index at all.
 */
export async function listDraftCandidates(q: Queryable, options: { force: boolean; limit: number }): Promise<DraftCandidateRow[]> {
  const writable = [COMPLETED_RUN_STATE, [...WRITABLE_DECISIONS]];
  const waiting = await q.query<DraftCandidateRow>(
    `SELECT ${CANDIDATE_COLUMNS}
       FROM runs r
       JOIN projects pr ON pr.project_id = r.project_id
       LEFT JOIN papers p ON p.run_id = r.run_id
      WHERE ${WRITABLE_RUN} AND (r.paper_status IS NULL OR r.paper_status = 'eligible')
      ORDER BY r.finished_at ASC NULLS LAST, r.run_id
      LIMIT $3`,
    [...writable, options.limit],
  );
  const room = options.limit - waiting.rows.length;
  if (!options.force || room <= 0) return waiting.rows;
  const redraftable = await q.query<DraftCandidateRow>(
    `SELECT ${CANDIDATE_COLUMNS}
       FROM papers p
       JOIN runs r ON r.run_id = p.run_id
       JOIN projects pr ON pr.project_id = r.project_id
      WHERE ${WRITABLE_RUN} AND p.paper_status = ANY ($3::text[]) AND p.review_status NOT IN ('finalized', 'rejected')
      ORDER BY r.finished_at ASC NULLS LAST, r.run_id
      LIMIT $4`,
    [...writable, [...REDRAFTABLE_STATUSES], room],
  );
  return [...waiting.rows, ...redraftable.rows];
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
  evidence_summary: EvidenceSummary;
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

/** A paper in draft_generating or publication_generating, with the latest of its started steps' audit events. */
export interface GeneratingPaperRow {
  paper_id: string;
  project_id: string;
  run_id: string;
  paper_status: PaperStatus;
  /**
   * The started event: its type names the step's purpose, its key the step, its payload where the paper came from. All
   * null when no step left one (a paper put there outside a step).
   */
  event_type: string | null;
  idempotency_key: string | null;
  payload: Record<string, unknown> | null;
  actor: string | null;
}

/** The papers a step holds now, each with the started event of its latest step (none when no step left one). */
export async function listGeneratingPapers(q: Queryable, startedEvents: readonly string[]): Promise<GeneratingPaperRow[]> {
  const { rows } = await q.query<GeneratingPaperRow>(
    `SELECT p.paper_id, p.project_id, p.run_id, p.paper_status, e.event_type, e.idempotency_key, e.payload, e.actor
       FROM papers p
       LEFT JOIN LATERAL (SELECT event_type, idempotency_key, payload, actor FROM audit_events
                      WHERE entity_id = p.paper_id AND event_type = ANY ($1::text[]) AND idempotency_key IS NOT NULL
                      ORDER BY id DESC LIMIT 1) e ON true
      WHERE p.paper_status IN ('draft_generating', 'publication_generating')
      ORDER BY p.paper_id`,
    [[...startedEvents]],
  );
  return rows;
}
