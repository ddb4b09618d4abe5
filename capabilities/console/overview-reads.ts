import type { PaperStatus, ReviewStatus } from '../papers/domain/paper-status.ts';
import { RUN_OWNED_QUEUE_STATUSES, type QueueStatus } from '../runs/domain/queue-status.ts';
import type { Queryable } from '../../platform/store/store.ts';

/**
 * The reads behind `GET /control/api/v1/overview`: rows counted by the columns the lane rules look at
 * (capabilities/console/domain/operator-lanes.ts), and the few rows a person should see first. Every list is LIMITed.
 */

export interface QueueFactGroup {
  status: QueueStatus;
  manual_review_required: boolean;
  n: number;
}

/** From the counts kept by triggers (migration 0011). */
export async function queueFactGroups(q: Queryable): Promise<QueueFactGroup[]> {
  const result = await q.query<QueueFactGroup>(
    `SELECT status, manual_review_required, sum(n)::int AS n FROM queue_item_counts
      WHERE n > 0 GROUP BY status, manual_review_required`,
  );
  return result.rows;
}

export interface PaperStatusGroup {
  paper_status: PaperStatus;
  review_status: ReviewStatus;
  n: number;
}

export async function paperStatusGroups(q: Queryable): Promise<PaperStatusGroup[]> {
  const result = await q.query<PaperStatusGroup>(
    'SELECT paper_status, review_status, count(*)::int AS n FROM papers GROUP BY paper_status, review_status',
  );
  return result.rows;
}

export interface OverviewQueueItem {
  project_id: string;
  project_name: string;
  status: QueueStatus;
  manual_review_required: boolean;
  current_run_id: string | null;
  lane: string | null;
  last_error: string | null;
  updated_at: string;
  /** The question its run's agent waits on (docs/runs.md#answering-the-agent); null when none waits. */
  question: string | null;
}

/** The attention statuses, most urgent first (capabilities/console/domain/operator-lanes.ts ACTION_REASONS). */
const ATTENTION_ORDER: readonly QueueStatus[] = ['needs_review', 'dispatch_error', 'blocked'];

const OVERVIEW_QUEUE_COLUMNS =
  'project_id, project_name, status, manual_review_required, current_run_id, lane, last_error, updated_at, ' +
  "(SELECT question FROM runs WHERE runs.run_id = queue_items.current_run_id AND runs.state = 'question_pending') AS question";

/**
 * Queue items in the attention lane, at most `limit`: needs_review, dispatch_error, blocked, then flagged items in
 * any other status, the longest waiting first within each. One short index read per branch (migration 0011).
 */
export async function attentionQueueItems(q: Queryable, limit: number): Promise<OverviewQueueItem[]> {
  // The statuses are this module's constants, not input.
  const byStatus = (status: QueueStatus, rank: number) =>
    `(SELECT ${OVERVIEW_QUEUE_COLUMNS}, ${rank} AS rank FROM queue_items
       WHERE status = '${status}' ORDER BY updated_at, project_id LIMIT $1)`;
  const result = await q.query<OverviewQueueItem & { rank: number }>(
    `SELECT * FROM (
       ${ATTENTION_ORDER.map(byStatus).join(' UNION ALL ')}
       UNION ALL
       (SELECT ${OVERVIEW_QUEUE_COLUMNS}, ${ATTENTION_ORDER.length} AS rank FROM queue_items
         WHERE manual_review_required AND NOT (status = ANY ($2::text[])) ORDER BY updated_at, project_id LIMIT $1)
     ) AS waiting ORDER BY rank, updated_at, project_id LIMIT $1`,
    [limit, [...ATTENTION_ORDER]],
  );
  return result.rows.map(({ rank: _rank, ...item }) => item);
}

/** Queue items in flight, the most recently moved first, at most `limit`. */
export async function activeQueueItems(q: Queryable, limit: number): Promise<OverviewQueueItem[]> {
  const result = await q.query<OverviewQueueItem>(
    `SELECT ${OVERVIEW_QUEUE_COLUMNS} FROM queue_items WHERE status = ANY ($1::text[]) ORDER BY updated_at DESC, project_id LIMIT $2`,
    [[...RUN_OWNED_QUEUE_STATUSES], limit],
  );
  return result.rows;
}

export interface OverviewPaper {
  paper_id: string;
  project_id: string;
  run_id: string;
  title: string | null;
  paper_status: PaperStatus;
  review_status: ReviewStatus;
  rank_score: number;
  updated_at: string;
}

const OVERVIEW_PAPER_COLUMNS = 'p.paper_id, p.project_id, p.run_id, p.title, p.paper_status, p.review_status, p.rank_score, p.updated_at';

/** Papers whose automated checklist failed, the longest waiting first, at most `limit`. */
export async function papersNeedingReview(q: Queryable, limit: number): Promise<OverviewPaper[]> {
  const result = await q.query<OverviewPaper>(
    `SELECT ${OVERVIEW_PAPER_COLUMNS} FROM papers p WHERE p.paper_status = 'human_review_required'
      ORDER BY p.updated_at, p.paper_id LIMIT $1`,
    [limit],
  );
  return result.rows;
}

/** Finalized papers with no corpus import yet, the longest waiting first, at most `limit`. */
export async function papersAwaitingImport(q: Queryable, limit: number): Promise<OverviewPaper[]> {
  const result = await q.query<OverviewPaper>(
    `SELECT ${OVERVIEW_PAPER_COLUMNS} FROM papers p
      WHERE p.review_status = 'finalized' AND NOT EXISTS (SELECT 1 FROM corpus_imports ci WHERE ci.paper_id = p.paper_id)
      ORDER BY p.updated_at, p.paper_id LIMIT $1`,
    [limit],
  );
  return result.rows;
}
