import { ACTIVE_QUEUE_STATUSES, type QueueStatus } from '../domain/queue-status.ts';
import { QUEUE_ITEM_COLUMNS, type QueueItemRow } from '../queue-items.ts';
import { isoTimestampSql } from '../../../platform/store/row-parsers.ts';
import type { Queryable } from '../../../platform/store/store.ts';

/** The per-lane reads of `GET /control/api/v1/lanes`; the queue head of a lane is in dispatch-candidates.ts. */

export interface LaneStatusCount {
  lane: string;
  status: QueueStatus;
  n: number;
}

/** Queue items claimed on each lane (their `lane` column), by status, from the counts kept by triggers. */
export async function laneStatusCounts(q: Queryable): Promise<LaneStatusCount[]> {
  const result = await q.query<LaneStatusCount>(
    `SELECT lane, status, sum(n)::int AS n FROM queue_item_counts WHERE lane <> '' AND n > 0 GROUP BY lane, status`,
  );
  return result.rows;
}

export interface ActiveLaneItem extends QueueItemRow {
  lane: string;
  run_state: string | null;
  run_created_at: string | null;
  run_gpu_indices: number[] | null;
  run_cpu_count: number | null;
  /** The newest callback the worker sent for the run, with the gate state it reported; null before the first. */
  last_callback: { event_type: string; gate_state: string | null; received_at: string } | null;
}

/**
 * The item in flight on each lane (at most one per lane, by queue_items_one_active_per_lane) with its run's state
 * and the newest callback for that run (worker_callbacks_run serves it).
 */
export async function activeLaneItems(q: Queryable): Promise<ActiveLaneItem[]> {
  const columns = QUEUE_ITEM_COLUMNS.split(',').map((column) => `qi.${column.trim()}`).join(', ');
  const result = await q.query<ActiveLaneItem>(
    `SELECT ${columns}, r.state AS run_state, r.created_at AS run_created_at,
            r.gpu_indices AS run_gpu_indices, r.cpu_count AS run_cpu_count,
            CASE WHEN cb.event_type IS NULL THEN NULL
                 ELSE json_build_object('event_type', cb.event_type, 'gate_state', cb.gate_state, 'received_at', ${isoTimestampSql('cb.received_at')})
            END AS last_callback
       FROM queue_items qi
       LEFT JOIN runs r ON r.run_id = qi.current_run_id
       LEFT JOIN LATERAL (
         SELECT event_type, payload ->> 'gate_state' AS gate_state, received_at FROM worker_callbacks
          WHERE run_id = qi.current_run_id ORDER BY received_at DESC LIMIT 1
       ) AS cb ON true
      WHERE qi.status = ANY ($1::text[]) AND qi.lane IS NOT NULL`,
    [[...ACTIVE_QUEUE_STATUSES]],
  );
  return result.rows;
}

/** A lane held by an active run: how long it has held it, the runtime its candidate expected, and its GPUs. */
export interface LaneHolding {
  lane: string;
  held_sec: number;
  /** The candidate's estimated_runtime_class; null without a candidate or an estimate. */
  runtime_class: string | null;
  gpu_count: number;
}

/** Every lane an active run holds, for the lane series of `GET /metrics`. */
export async function laneHoldings(q: Queryable): Promise<LaneHolding[]> {
  const result = await q.query<LaneHolding>(
    `SELECT qi.lane, extract(epoch FROM clock_timestamp() - r.created_at)::float8 AS held_sec,
            c.estimated_runtime_class AS runtime_class, coalesce(cardinality(r.gpu_indices), 0) AS gpu_count
       FROM queue_items qi
       JOIN runs r ON r.run_id = qi.current_run_id
       LEFT JOIN research_candidates c ON c.candidate_id = qi.candidate_id
      WHERE qi.status = ANY ($1::text[]) AND qi.lane IS NOT NULL`,
    [[...ACTIVE_QUEUE_STATUSES]],
  );
  return result.rows.map((row) => ({ ...row, held_sec: Number(row.held_sec), gpu_count: Number(row.gpu_count) }));
}
