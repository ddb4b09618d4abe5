import { QUEUE_GROUP_STATUSES, type QueueGroup, type QueueStatus } from '../runs/domain/queue-status.ts';
import { ascending, descending, selectKeysetPage, type KeysetOrder, type KeysetPage } from '../../platform/store/keyset.ts';
import { pageWindow, selectPage } from '../../platform/store/paging.ts';
import { QUEUE_ITEM_COLUMNS, type QueueItemRow } from '../runs/queue-items.ts';
import { containsPattern, sqlParams, type SqlParams } from '../../platform/store/sql-params.ts';
import type { Queryable } from '../../platform/store/store.ts';

/** Columns a queue list may be sorted by (docs/http.md#http-interface): any listed column, `-` for descending. */
export const QUEUE_SORT_COLUMNS = QUEUE_ITEM_COLUMNS.split(',').map((column) => column.trim());

/** The dispatch order (docs/runs.md#runs), used when no sort is asked for. */
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

function groupCondition(group: QueueGroup, { bind }: SqlParams): string | null {
  if (group === 'all') return null;
  const byStatus = `status = ANY(${bind([...QUEUE_GROUP_STATUSES[group]])}::text[])`;
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

function queueConditions(query: { group: QueueGroup; status?: QueueStatus | undefined; search?: string | undefined }, sql: SqlParams): string[] {
  const conditions = [groupCondition(query.group, sql)];
  if (query.status) conditions.push(`status = ${sql.bind(query.status)}`);
  if (query.search) {
    const pattern = sql.bind(containsPattern(query.search));
    conditions.push(`(${SEARCHED_COLUMNS.map((column) => `${column} ILIKE ${pattern}`).join(' OR ')})`);
  }
  return conditions.filter((c): c is string => c !== null);
}

/** One page of a logical queue group with its total, in one round trip. */
export async function listQueueItems(q: Queryable, query: QueueListQuery): Promise<{ items: QueueItemRow[]; total: number }> {
  const sql = sqlParams();
  const present = queueConditions(query, sql);
  const where = present.length > 0 ? `WHERE ${present.join(' AND ')}` : '';
  return selectPage<QueueItemRow>(q, {
    select: `SELECT ${QUEUE_ITEM_COLUMNS} FROM queue_items ${where} ORDER BY ${orderBy(query.sort)}`,
    count: `SELECT count(*) AS total FROM queue_items ${where}`,
    key: 'project_id',
    sql,
    window: pageWindow(query.page, query.page_size),
  });
}

/** The sorts of `GET /control/api/v1/queue`, the dispatch order first (each has an index of its own, migration 0009). */
export const QUEUE_ORDERS: readonly KeysetOrder[] = [
  {
    name: 'dispatch',
    columns: [ascending('dispatch_priority', 'integer'), ascending('selection_rank', 'integer'), ascending('updated_at', 'timestamptz'), ascending('project_id', 'text')],
  },
  { name: '-updated_at', columns: [descending('updated_at', 'timestamptz'), descending('project_id', 'text')] },
  { name: 'updated_at', columns: [ascending('updated_at', 'timestamptz'), ascending('project_id', 'text')] },
  { name: '-created_at', columns: [descending('created_at', 'timestamptz'), descending('project_id', 'text')] },
  { name: 'project_id', columns: [ascending('project_id', 'text')] },
];

/** One page of a keyset walk over the queue, filtered as the paged list is. */
export async function walkQueueItems(
  q: Queryable,
  query: { group: QueueGroup; status?: QueueStatus | undefined; search?: string | undefined; order: KeysetOrder; after: string[] | null; limit: number },
): Promise<KeysetPage<QueueItemRow>> {
  const sql = sqlParams();
  return selectKeysetPage<QueueItemRow>(q, {
    select: QUEUE_ITEM_COLUMNS,
    from: 'FROM queue_items',
    table: 'queue_items',
    where: queueConditions(query, sql),
    sql,
    order: query.order,
    after: query.after,
    limit: query.limit,
  });
}
