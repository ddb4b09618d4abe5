import type { QueueStatus } from './domain/queue-status.ts';
import type { WorkloadClass } from '../../worker-gate/contract/workload.ts';
import type { Queryable } from '../../platform/store/store.ts';

/**
 * The queue_items ledger: one queue row per project. Every function takes a Queryable so it runs inside the caller's
 * transaction.
 */

export interface QueueItemInsert {
  project_id: string;
  project_name: string;
  /** Defaults to "queued". */
  status?: QueueStatus;
  manual_review_required?: boolean;
  /** Lower goes first; default 50. */
  dispatch_priority?: number;
  /** Default 50. */
  selection_rank?: number;
  machine_target?: string | null;
  /** Defaults to "unknown". */
  workload_class?: WorkloadClass;
  next_action_hint?: string | null;
  candidate_id?: string | null;
  /** Required by the database for an in-flight status: the worker target the item runs on. */
  lane?: string | null;
  gpu_count?: number | null;
  gpu_memory_mib?: number | null;
  cpu_count?: number | null;
}

export type QueueItemRow = {
  project_id: string;
  project_name: string;
  status: QueueStatus;
  manual_review_required: boolean;
  dispatch_priority: number;
  selection_rank: number;
  machine_target: string | null;
  workload_class: WorkloadClass;
  current_run_id: string | null;
  last_run_state: string | null;
  next_action_hint: string | null;
  last_error: string | null;
  candidate_id: string | null;
  /** The worker target the item was last claimed on. */
  lane: string | null;
  /** Failed dispatch attempts in a row; the third moves the item to dispatch_error. */
  dispatch_failures: number;
  /** What a run of the item needs (docs/runs.md#slots-and-gpus); null: its workload class's default. */
  gpu_count: number | null;
  gpu_memory_mib: number | null;
  cpu_count: number | null;
  created_at: string;
  updated_at: string;
};

export const QUEUE_ITEM_COLUMNS =
  'project_id, project_name, status, manual_review_required, dispatch_priority, selection_rank, machine_target, ' +
  'workload_class, current_run_id, last_run_state, next_action_hint, last_error, candidate_id, lane, dispatch_failures, ' +
  'gpu_count, gpu_memory_mib, cpu_count, created_at, updated_at';


/**
 * Inserts the queue row of a project. There is one queue row per project: a second insert for the same project fails
 * (unique_violation, 23505), so callers that must be idempotent read the row first (getQueueItem with forUpdate).
 */
export async function insertQueueItem(tx: Queryable, item: QueueItemInsert): Promise<QueueItemRow> {
  const result = await tx.query<QueueItemRow>(
    `INSERT INTO queue_items (project_id, project_name, status, manual_review_required, dispatch_priority,
       selection_rank, machine_target, workload_class, next_action_hint, candidate_id, lane, gpu_count, gpu_memory_mib, cpu_count)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14) RETURNING ${QUEUE_ITEM_COLUMNS}`,
    [
      item.project_id,
      item.project_name,
      item.status ?? 'queued',
      item.manual_review_required ?? false,
      item.dispatch_priority ?? 50,
      item.selection_rank ?? 50,
      item.machine_target ?? null,
      item.workload_class ?? 'unknown',
      item.next_action_hint ?? null,
      item.candidate_id ?? null,
      item.lane ?? null,
      item.gpu_count ?? null,
      item.gpu_memory_mib ?? null,
      item.cpu_count ?? null,
    ],
  );
  return result.rows[0]!;
}

/** The queue row of a project; `forUpdate` locks it until the caller's transaction ends. */
export async function getQueueItem(
  q: Queryable,
  projectId: string,
  options: { forUpdate?: boolean } = {},
): Promise<QueueItemRow | undefined> {
  const result = await q.query<QueueItemRow>(
    `SELECT ${QUEUE_ITEM_COLUMNS} FROM queue_items WHERE project_id = $1${options.forUpdate ? ' FOR UPDATE' : ''}`,
    [projectId],
  );
  return result.rows[0];
}

async function updateQueueItem(tx: Queryable, projectId: string, assignments: string, params: readonly unknown[]): Promise<QueueItemRow> {
  const result = await tx.query<QueueItemRow>(
    `UPDATE queue_items SET ${assignments} WHERE project_id = $1 RETURNING ${QUEUE_ITEM_COLUMNS}`,
    [projectId, ...params],
  );
  return result.rows[0]!;
}

/** Parks an item; `hint` goes to next_action_hint so last_error keeps the item's last failure. */
export function parkQueueItem(tx: Queryable, projectId: string, hint: string): Promise<QueueItemRow> {
  return updateQueueItem(tx, projectId, `status = 'paused', next_action_hint = $2`, [hint]);
}

/** Back to the queue with a clean slate: review flag off, failure streak reset, no lane, no hint. */
export function requeueQueueItem(tx: Queryable, projectId: string): Promise<QueueItemRow> {
  return updateQueueItem(
    tx,
    projectId,
    `status = 'queued', manual_review_required = false, dispatch_failures = 0, lane = NULL, next_action_hint = NULL`,
    [],
  );
}
