import { laneSelector, resolveLane, type LaneSelector, type WorkerRouting } from './domain/worker-lanes.ts';
import { ACTIVE_QUEUE_STATUSES } from './domain/queue-status.ts';
import { QUEUE_ITEM_COLUMNS, type QueueItemRow } from './queue-items.ts';
import { sqlParams, type SqlParams } from '../../platform/store/sql-params.ts';
import type { Queryable } from '../../platform/store/store.ts';
import type { WorkloadClass } from '../../worker-gate/contract/workload.ts';

/**
 * The next item to dispatch (docs/runs.md#runs): queued, not flagged, routed to a configured worker target whose lane is
 * idle, first in dispatch order. The busy lanes come from the one-active-row-per-lane index. Usually one of the first
 * few eligible items has an idle lane, so those are read first; when they all wait for busy lanes, each idle lane's
 * first item is read from a partial index (one short index read per routing rule). Either way the answer does not
 * depend on how long the queue is.
 */

const ELIGIBLE = `status = 'queued' AND NOT manual_review_required`;
const DISPATCH_ORDER = 'dispatch_priority, selection_rank, updated_at, project_id';
/** How many items at the head of the queue are checked before asking each idle lane for its own first item. */
const HEAD_SIZE = 32;

export async function busyLanes(q: Queryable): Promise<Set<string>> {
  const result = await q.query<{ lane: string }>('SELECT lane FROM queue_items WHERE status = ANY($1::text[]) AND lane IS NOT NULL', [
    [...ACTIVE_QUEUE_STATUSES],
  ]);
  return new Set(result.rows.map((row) => row.lane));
}

/** The conditions that route an item to the lane, one per routing rule. */
function laneConditions(selector: LaneSelector, { bind }: SqlParams): string[] {
  const conditions = [`machine_target = ${bind(selector.machineTarget)}`];
  for (const workloadClass of selector.workloadClasses) conditions.push(`machine_target IS NULL AND workload_class = ${bind(workloadClass)}`);
  if (selector.unmappedExcept) conditions.push(`machine_target IS NULL AND workload_class <> ALL(${bind(selector.unmappedExcept)}::text[])`);
  return conditions;
}

/** One `LIMIT 1` read per routing rule of the lane. */
function laneBranches(selector: LaneSelector, sql: SqlParams): string[] {
  return laneConditions(selector, sql).map(
    (condition) =>
      `(SELECT ${QUEUE_ITEM_COLUMNS}, ${sql.bind(selector.lane)}::text AS resolved_lane FROM queue_items
         WHERE ${ELIGIBLE} AND ${condition} ORDER BY ${DISPATCH_ORDER} LIMIT 1)`,
  );
}

/**
 * The item dispatch-next would pick for this lane once the lane is idle, and how many eligible items route to it
 * (v1/lanes). Each routing rule is read from its partial index.
 */
export async function laneQueueHead(q: Queryable, selector: LaneSelector): Promise<{ next: QueueItemRow | null; eligible: number }> {
  const sql = sqlParams();
  const branches = laneBranches(selector, sql);
  const counts = laneConditions(selector, sql).map((condition) => `(SELECT count(*) FROM queue_items WHERE ${ELIGIBLE} AND ${condition})`);
  const result = await q.query<QueueItemRow & { resolved_lane: string; eligible: number }>(
    `SELECT candidates.*, ${counts.join(' + ')} AS eligible
       FROM (SELECT 1) AS one
       LEFT JOIN LATERAL (SELECT * FROM (${branches.join(' UNION ALL ')}) AS b ORDER BY ${DISPATCH_ORDER} LIMIT 1) AS candidates ON true`,
    sql.params,
  );
  const row = result.rows[0]!;
  const { resolved_lane: _lane, eligible, ...item } = row;
  return { next: item.project_id ? (item as QueueItemRow) : null, eligible: Number(eligible) };
}

/**
 * The next item to dispatch and its lane. Lanes in `skip` (leased by another dispatch call, or just found taken) count
 * as busy.
 */
export async function nextDispatchCandidate(
  q: Queryable,
  routing: WorkerRouting,
  skip: ReadonlySet<string> = new Set(),
): Promise<{ item: QueueItemRow; lane: string } | null> {
  const busy = await busyLanes(q);
  for (const lane of skip) busy.add(lane);
  // The first idle lane of each target: an item routed to a target may take any of its idle slots.
  const idleByTarget = new Map<string, string>();
  for (const lane of routing.lanes.values()) if (!busy.has(lane.lane) && !idleByTarget.has(lane.name)) idleByTarget.set(lane.name, lane.lane);
  const idle = [...idleByTarget.values()];
  if (idle.length === 0) return null;

  const head = await q.query<QueueItemRow>(
    `SELECT ${QUEUE_ITEM_COLUMNS} FROM queue_items WHERE ${ELIGIBLE} ORDER BY ${DISPATCH_ORDER} LIMIT $1`,
    [HEAD_SIZE],
  );
  for (const item of head.rows) {
    const lane = resolveLane(item, routing);
    const idleLane = lane.ok ? idleByTarget.get(lane.target.name) : undefined;
    if (idleLane) return { item, lane: idleLane };
  }
  if (head.rows.length < HEAD_SIZE) return null;

  const sql = sqlParams();
  const branches = idle.flatMap((lane) => laneBranches(laneSelector(lane, routing), sql));
  const result = await q.query<QueueItemRow & { resolved_lane: string }>(
    `SELECT * FROM (${branches.join(' UNION ALL ')}) AS candidates ORDER BY ${DISPATCH_ORDER} LIMIT 1`,
    sql.params,
  );
  const row = result.rows[0];
  if (!row) return null;
  const { resolved_lane: lane, ...item } = row;
  return { item, lane };
}

/** The first `limit` queued items in dispatch order, flagged ones included (why-nothing-moves reads them). */
export async function queuedItemsInOrder(q: Queryable, limit: number): Promise<QueueItemRow[]> {
  const result = await q.query<QueueItemRow>(`SELECT ${QUEUE_ITEM_COLUMNS} FROM queue_items WHERE status = 'queued' ORDER BY ${DISPATCH_ORDER} LIMIT $1`, [limit]);
  return result.rows;
}

export async function countActiveItems(q: Queryable): Promise<number> {
  const result = await q.query<{ count: number }>('SELECT count(*) AS count FROM queue_items WHERE status = ANY($1::text[])', [
    [...ACTIVE_QUEUE_STATUSES],
  ]);
  return result.rows[0]!.count;
}

export interface QueuedItemRoute {
  machine_target: string | null;
  workload_class: WorkloadClass;
  manual_review_required: boolean;
  count: number;
}

/** The queued items counted by what routes them (docs/runs.md#runs: why a dispatch found nothing). */
export async function queuedItemRoutes(q: Queryable): Promise<QueuedItemRoute[]> {
  const result = await q.query<QueuedItemRoute>(
    `SELECT machine_target, workload_class, manual_review_required, count(*)::int AS count
       FROM queue_items WHERE status = 'queued' GROUP BY 1, 2, 3 ORDER BY 1 NULLS FIRST, 2, 3`,
  );
  return result.rows;
}
