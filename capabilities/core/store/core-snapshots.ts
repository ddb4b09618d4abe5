import type { CoreMode, CorePaperRow, CoreQueueRow, LiveQueueRow, QueueRowChange, SkipReason } from '../domain/core-snapshot.ts';
import { RUN_OWNED_QUEUE_STATUSES } from '../../runs/domain/queue-status.ts';
import type { Queryable } from '../../../platform/store/store.ts';

/** The Core snapshot ledger (migration 0010) and Core's reads and writes of the live queue. */

export interface CoreSnapshotInsert {
  idempotency_key: string;
  source: string;
  mode: Exclude<CoreMode, 'off'>;
  captured_at: string;
  /** The rows as sent, every field kept, including those Core does not read. */
  queue_rows: readonly CoreQueueRow[];
  paper_rows: readonly CorePaperRow[];
  warnings: readonly string[];
  applied: readonly QueueRowChange[];
  skipped: Partial<Record<SkipReason, number>>;
  event_id: number;
}

export interface CoreSnapshotRow {
  snapshot_id: number;
  idempotency_key: string;
  source: string;
  mode: Exclude<CoreMode, 'off'>;
  captured_at: string;
  /** As sent: a row may carry fields beyond those its type names. */
  queue_rows: CoreQueueRow[];
  paper_rows: CorePaperRow[];
  queue_row_count: number;
  paper_row_count: number;
  warnings: string[];
  applied: QueueRowChange[];
  skipped: Partial<Record<SkipReason, number>>;
  event_id: number;
  recorded_at: string;
}

const COLUMNS =
  'snapshot_id, idempotency_key, source, mode, captured_at, queue_rows, paper_rows, queue_row_count, paper_row_count, warnings, applied, skipped, event_id, recorded_at';

export async function insertCoreSnapshot(tx: Queryable, snapshot: CoreSnapshotInsert): Promise<number> {
  const result = await tx.query<{ snapshot_id: number }>(
    `INSERT INTO core_snapshots (idempotency_key, source, mode, captured_at, queue_rows, paper_rows, queue_row_count, paper_row_count,
                                 warnings, applied, skipped, event_id)
     VALUES ($1, $2, $3, $4, $5::jsonb, $6::jsonb, $7, $8, $9::jsonb, $10::jsonb, $11::jsonb, $12) RETURNING snapshot_id`,
    [
      snapshot.idempotency_key,
      snapshot.source,
      snapshot.mode,
      snapshot.captured_at,
      JSON.stringify(snapshot.queue_rows),
      JSON.stringify(snapshot.paper_rows),
      snapshot.queue_rows.length,
      snapshot.paper_rows.length,
      JSON.stringify(snapshot.warnings),
      JSON.stringify(snapshot.applied),
      JSON.stringify(snapshot.skipped),
      snapshot.event_id,
    ],
  );
  return result.rows[0]!.snapshot_id;
}

/** The latest recorded snapshot, of one source when given. */
export async function latestCoreSnapshot(q: Queryable, source?: string): Promise<CoreSnapshotRow | undefined> {
  const result = source
    ? await q.query<CoreSnapshotRow>(`SELECT ${COLUMNS} FROM core_snapshots WHERE source = $1 ORDER BY snapshot_id DESC LIMIT 1`, [source])
    : await q.query<CoreSnapshotRow>(`SELECT ${COLUMNS} FROM core_snapshots ORDER BY snapshot_id DESC LIMIT 1`);
  return result.rows[0];
}

/** The live rows a snapshot names, locked when `forUpdate` (enforce writes them in the same transaction). */
export async function liveQueueRows(q: Queryable, projectIds: readonly string[], options: { forUpdate: boolean }): Promise<LiveQueueRow[]> {
  const result = await q.query<LiveQueueRow>(
    `SELECT project_id, status, manual_review_required, dispatch_priority, selection_rank FROM queue_items
      WHERE project_id = ANY ($1::text[]) ORDER BY project_id${options.forUpdate ? ' FOR UPDATE' : ''}`,
    [projectIds],
  );
  return result.rows;
}

/** Live rows the snapshot does not name: their ids, a few, and how many (compare reports them). */
export async function liveRowsOutside(q: Queryable, projectIds: readonly string[], sample: number): Promise<{ ids: string[]; count: number }> {
  const result = await q.query<{ project_id: string; total: number }>(
    `SELECT project_id, count(*) OVER ()::int AS total FROM queue_items WHERE NOT (project_id = ANY ($1::text[]))
      ORDER BY project_id LIMIT $2`,
    [projectIds, sample],
  );
  return { ids: result.rows.map((row) => row.project_id), count: result.rows[0]?.total ?? 0 };
}

/** Writes one enforce change; the guard keeps a row that went in flight since it was read as it is. */
export async function applyQueueRowChange(tx: Queryable, change: QueueRowChange): Promise<boolean> {
  const result = await tx.query(
    `UPDATE queue_items SET status = $2, manual_review_required = $3, dispatch_priority = $4, selection_rank = $5
      WHERE project_id = $1 AND NOT (status = ANY ($6::text[]))`,
    [change.project_id, change.status, change.manual_review_required, change.dispatch_priority, change.selection_rank, [...RUN_OWNED_QUEUE_STATUSES]],
  );
  return result.rowCount > 0;
}
