import { QUEUE_GROUP_STATUSES, type QueueGroup, type QueueStatus } from '../domain/queue-status.ts';
import { QUEUE_ITEM_COLUMNS, toQueueItem, type QueueItemRow } from './runtime-ledgers.ts';
import { containsPattern } from './sql-params.ts';
import type { Queryable } from './store.ts';

/** Columns a queue list may be sorted by (decisions §3: any listed column, `-` for descending). */
export const QUEUE_SORT_COLUMNS = QUEUE_ITEM_COLUMNS.split(',').map((column) => column.trim());

/** The dispatch order (decisions §3), used when no sort is asked for. */
const DISPATCH_ORDER = 'dispatch_priority ASC, selection_rank ASC, updated_at ASC, project_id ASC';

const SEARCHED_COLUMNS = [
  'project_id',
  'project_name',
  'status',
  'machine_target',
  'workload_class',
  'current_run_id',
  'last_run_state',
  'next_action_hint',
  'last_error',
  'candidate_id',
];

export interface QueueListQuery {
  group: QueueGroup;
  page: number;
  page_size: number;
  status?: QueueStatus | undefined;
  search?: string | undefined;
  /** A column of QUEUE_SORT_COLUMNS, optionally prefixed with `-` for descending. */
  sort?: string | undefined;
}

function groupCondition(group: QueueGroup, params: unknown[]): string | null {
  if (group === 'all') return null;
  params.push([...QUEUE_GROUP_STATUSES[group]]);
  const byStatus = `status = ANY($${params.length}::text[])`;
  return group === 'blocked' ? `(${byStatus} OR manual_review_required)` : byStatus;
}

function orderBy(sort: string | undefined): string {
  if (!sort) return DISPATCH_ORDER;
  const descending = sort.startsWith('-');
  const column = descending ? sort.slice(1) : sort;
  if (!QUEUE_SORT_COLUMNS.includes(column)) throw new Error(`unknown sort column ${column}`);
  // project_id breaks ties so pages are stable.
  return `${column} ${descending ? 'DESC' : 'ASC'}${column === 'project_id' ? '' : ', project_id ASC'}`;
}

/** One page of a logical queue group with its total, in one round trip. */
export async function listQueueItems(q: Queryable, query: QueueListQuery): Promise<{ items: QueueItemRow[]; total: number }> {
  const params: unknown[] = [];
  const conditions = [groupCondition(query.group, params)];
  if (query.status) {
    params.push(query.status);
    conditions.push(`status = $${params.length}`);
  }
  if (query.search) {
    params.push(containsPattern(query.search));
    conditions.push(`(${SEARCHED_COLUMNS.map((column) => `${column} ILIKE $${params.length}`).join(' OR ')})`);
  }
  const where = conditions.filter((c): c is string => c !== null);
  params.push(query.page_size, (query.page - 1) * query.page_size);
  const result = await q.query<Record<string, unknown> & { total: number }>(
    `SELECT ${QUEUE_ITEM_COLUMNS}, count(*) OVER ()::int AS total
       FROM queue_items
      ${where.length > 0 ? `WHERE ${where.join(' AND ')}` : ''}
      ORDER BY ${orderBy(query.sort)}
      LIMIT $${params.length - 1} OFFSET $${params.length}`,
    params,
  );
  let total = Number(result.rows[0]?.total ?? 0);
  if (result.rows.length === 0 && query.page > 1) {
    // Past the last page the window function has no row to ride on; count separately.
    const counted = await q.query<{ total: number }>(
      `SELECT count(*)::int AS total FROM queue_items ${where.length > 0 ? `WHERE ${where.join(' AND ')}` : ''}`,
      params.slice(0, -2),
    );
    total = Number(counted.rows[0]?.total ?? 0);
  }
  return { items: result.rows.map(({ total: _total, ...row }) => toQueueItem(row)), total };
}
