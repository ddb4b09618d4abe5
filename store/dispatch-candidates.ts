import { laneSqlExpression, type WorkerRouting } from '../domain/lanes.ts';
import { ACTIVE_QUEUE_STATUSES } from '../domain/queue-status.ts';
import { QUEUE_ITEM_COLUMNS, toQueueItem, type QueueItemRow } from './runtime-ledgers.ts';
import type { Queryable } from './store.ts';

/**
 * The next item to dispatch (decisions §3): queued, not flagged, routed to a configured worker target whose lane is
 * idle, first in dispatch order. One indexed query however long the queue is.
 */
export async function nextDispatchCandidate(q: Queryable, routing: WorkerRouting): Promise<{ item: QueueItemRow; lane: string } | null> {
  const params: unknown[] = [[...ACTIVE_QUEUE_STATUSES]];
  const lane = laneSqlExpression(routing, params);
  const result = await q.query<Record<string, unknown>>(
    `SELECT ${QUEUE_ITEM_COLUMNS}, ${lane} AS resolved_lane
       FROM queue_items
      WHERE status = 'queued' AND NOT manual_review_required
        AND ${lane} IS NOT NULL
        AND ${lane} NOT IN (SELECT busy.lane FROM queue_items busy WHERE busy.status = ANY($1::text[]) AND busy.lane IS NOT NULL)
      ORDER BY dispatch_priority, selection_rank, updated_at, project_id
      LIMIT 1`,
    params,
  );
  const row = result.rows[0];
  if (!row) return null;
  return { item: toQueueItem(row), lane: row.resolved_lane as string };
}

export async function countActiveItems(q: Queryable): Promise<number> {
  const result = await q.query<{ count: string }>('SELECT count(*) AS count FROM queue_items WHERE status = ANY($1::text[])', [
    [...ACTIVE_QUEUE_STATUSES],
  ]);
  return Number(result.rows[0]!.count);
}
