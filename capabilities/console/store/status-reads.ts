import type { QueuedGroup } from '../../runs/domain/dispatch-safety.ts';
import { ACTIVE_QUEUE_STATUSES, QUEUE_STATUSES, type QueueStatus } from '../../runs/domain/queue-status.ts';
import type { RunState } from '../../runs/domain/run-state.ts';
import type { WorkloadClass } from '../../../worker-gate/contract/workload.ts';
import { QUEUE_ITEM_COLUMNS, type QueueItemRow } from '../../runs/queue-items.ts';
import type { Queryable } from '../../../platform/store/store.ts';

/** The reads behind GET /control/api/status and /control/api/queue-health. Bounded: no read returns the whole queue. */

export interface FlagDetails {
  queue_paused: boolean;
  maintenance_mode: boolean;
  paused_by: string | null;
  pause_reason: string | null;
  maintenance_by: string | null;
}

/**
 * The operator flags with who set them. The flags table keeps no reason, so the pause reason is the one given with
 * the latest `queue.paused` audit event.
 */
export async function readFlagDetails(q: Queryable): Promise<FlagDetails> {
  const result = await q.query<{ name: string; value: unknown; updated_by: string | null; reason: string | null }>(
    `SELECT f.name, f.value, f.updated_by, latest.reason
       FROM flags f
       LEFT JOIN LATERAL (
         SELECT payload->>'reason' AS reason FROM audit_events
          WHERE event_type = 'queue.paused' AND f.name = 'queue_paused'
          ORDER BY id DESC LIMIT 1
       ) AS latest ON true
      WHERE f.name IN ('queue_paused', 'maintenance_mode')`,
  );
  const byName = new Map(result.rows.map((row) => [row.name, row]));
  const paused = byName.get('queue_paused');
  const maintenance = byName.get('maintenance_mode');
  const queuePaused = paused?.value === true;
  const maintenanceMode = maintenance?.value === true;
  return {
    queue_paused: queuePaused,
    maintenance_mode: maintenanceMode,
    paused_by: queuePaused ? (paused?.updated_by ?? null) : null,
    pause_reason: queuePaused ? (paused?.reason ?? null) : null,
    maintenance_by: maintenanceMode ? (maintenance?.updated_by ?? null) : null,
  };
}

export interface QueueCounts {
  /** Every status, zero-filled. */
  by_status: Record<QueueStatus, number>;
  total: number;
  /** Rows flagged manual_review_required, by status. */
  flagged_by_status: Partial<Record<QueueStatus, number>>;
  /** The newest updated_at of any queue row; null for an empty queue. */
  latest_update: string | null;
}

/** From the counts kept by triggers (migration 0011), plus the newest updated_at (an index's last entry). */
export async function queueCounts(q: Queryable): Promise<QueueCounts> {
  const result = await q.query<{ status: QueueStatus | null; n: number; flagged: number; latest: string | null }>(
    `SELECT status, sum(n)::int AS n, (sum(n) FILTER (WHERE manual_review_required))::int AS flagged, NULL::timestamptz AS latest
       FROM queue_item_counts WHERE n > 0 GROUP BY status
     UNION ALL SELECT NULL, 0, 0, max(updated_at) FROM queue_items`,
  );
  const byStatus = Object.fromEntries(QUEUE_STATUSES.map((status) => [status, 0])) as Record<QueueStatus, number>;
  const flagged: Partial<Record<QueueStatus, number>> = {};
  let total = 0;
  let latest: string | null = null;
  for (const row of result.rows) {
    if (row.status === null) {
      latest = row.latest;
      continue;
    }
    byStatus[row.status] = row.n;
    total += row.n;
    if (row.flagged > 0) flagged[row.status] = row.flagged;
  }
  return { by_status: byStatus, total, flagged_by_status: flagged, latest_update: latest };
}

/** Runs by state, from the counts kept by triggers (migration 0011). */
export async function runCountsByState(q: Queryable): Promise<Partial<Record<RunState, number>>> {
  const result = await q.query<{ state: RunState; n: number }>('SELECT state, n::int AS n FROM run_state_counts WHERE n > 0');
  return Object.fromEntries(result.rows.map((row) => [row.state, row.n]));
}

export type ActiveItemRow = QueueItemRow & {
  /** The current run's row; null when there is no current run or its row is missing. */
  run: {
    run_id: string;
    state: RunState;
    lane: string;
    created_at: string;
    finished_at: string | null;
  } | null;
  last_callback: { event_type: string; received_at: string } | null;
};

type ActiveItemQueryRow = QueueItemRow & {
  run_run_id: string | null;
  run_state: RunState;
  run_lane: string;
  run_created_at: string;
  run_finished_at: string | null;
  callback_event_type: string | null;
  callback_received_at: string;
};

/**
 * Queue rows in an active status, each with its current run and the newest callback for that run. The database
 * allows one active row per lane, so this is as long as the number of lanes.
 */
export async function listActiveItems(q: Queryable): Promise<ActiveItemRow[]> {
  const columns = QUEUE_ITEM_COLUMNS.split(',').map((column) => `qi.${column.trim()}`).join(', ');
  const result = await q.query<ActiveItemQueryRow>(
    `SELECT ${columns},
            r.run_id AS run_run_id, r.state AS run_state, r.lane AS run_lane, r.created_at AS run_created_at,
            r.finished_at AS run_finished_at, cb.event_type AS callback_event_type, cb.received_at AS callback_received_at
       FROM queue_items qi
       LEFT JOIN runs r ON r.run_id = qi.current_run_id
       LEFT JOIN LATERAL (
         SELECT event_type, received_at FROM worker_callbacks
          WHERE run_id = qi.current_run_id ORDER BY received_at DESC LIMIT 1
       ) AS cb ON true
      WHERE qi.status = ANY($1::text[])
      ORDER BY qi.lane, qi.project_id`,
    [[...ACTIVE_QUEUE_STATUSES]],
  );
  return result.rows.map((row) => {
    const {
      run_run_id, run_state, run_lane, run_created_at, run_finished_at, callback_event_type, callback_received_at, ...item
    } = row;
    return {
      ...item,
      run:
        run_run_id === null
          ? null
          : { run_id: run_run_id, state: run_state, lane: run_lane, created_at: run_created_at, finished_at: run_finished_at },
      last_callback:
        callback_event_type === null ? null : { event_type: callback_event_type, received_at: callback_received_at },
    };
  });
}

/** Queued rows grouped by machine_target, workload_class and review flag: what lane resolution and eligibility need. */
export async function queuedGroups(q: Queryable, sampleSize = 5): Promise<QueuedGroup[]> {
  const result = await q.query<{
    machine_target: string | null;
    workload_class: WorkloadClass;
    manual_review_required: boolean;
    n: number;
    sample: string[];
  }>(
    `SELECT machine_target, workload_class, manual_review_required, count(*)::int AS n,
            (array_agg(project_id ORDER BY project_id))[1:$1] AS sample
       FROM queue_items WHERE status = 'queued'
      GROUP BY machine_target, workload_class, manual_review_required
      ORDER BY machine_target NULLS FIRST, workload_class, manual_review_required`,
    [sampleSize],
  );
  return result.rows.map((row) => ({
    machine_target: row.machine_target,
    workload_class: row.workload_class,
    manual_review_required: row.manual_review_required,
    count: row.n,
    sample_project_ids: row.sample,
  }));
}

export interface RecentCallback {
  idempotency_key: string;
  run_id: string;
  project_id: string;
  event_type: string;
  ignored: boolean;
  ignore_reason: string | null;
  received_at: string;
}

/** The newest worker callbacks, newest first; the stored payload and response are not included. */
export async function recentWorkerCallbacks(q: Queryable, limit: number): Promise<RecentCallback[]> {
  const result = await q.query<RecentCallback>(
    `SELECT idempotency_key, run_id, project_id, event_type, ignored, ignore_reason, received_at
       FROM worker_callbacks ORDER BY received_at DESC, idempotency_key LIMIT $1`,
    [limit],
  );
  return result.rows;
}

/** When the newest worker callback arrived; null when none has. */
export async function latestCallbackAt(q: Queryable): Promise<string | null> {
  const result = await q.query<{ latest: string | null }>('SELECT max(received_at) AS latest FROM worker_callbacks');
  return result.rows[0]?.latest ?? null;
}
