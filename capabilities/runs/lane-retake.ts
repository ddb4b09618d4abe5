import { appendAuditEvent } from '../../platform/store/audit-events.ts';
import type { Queryable, Store } from '../../platform/store/store.ts';
import { getQueueItem } from './queue-items.ts';
import { getRun } from './run-ledger.ts';
import { GpuTakenError, placeOnGpus } from './store/gpu-placements.ts';

/**
 * A run that let its lane go for a long usage-limit wait takes it back before its session resumes
 * (docs/runs.md#waiting-out-a-usage-limit): its item is running on its lane again, on the GPUs it was placed on.
 */

/** `lost`: the lane can never be taken back (the run or its item moved on); otherwise another item holds it for now. */
export type LaneRetake = { retaken: true } | { retaken: false; reason: string; lost: boolean };

async function retake(tx: Queryable, runId: string, target: string): Promise<LaneRetake> {
  const run = await getRun(tx, runId, { forUpdate: true });
  if (!run) return { retaken: false, reason: `unknown run '${runId}'`, lost: true };
  const item = await getQueueItem(tx, run.project_id, { forUpdate: true });
  if (!item || item.current_run_id !== run.run_id) return { retaken: false, reason: `the item of run '${runId}' has moved on to another run`, lost: true };
  // Taken already: a retry of a retake that went through.
  if (item.status !== 'usage_limited') return { retaken: true };
  await tx.query(`UPDATE queue_items SET status = 'running', lane = $2, next_action_hint = NULL WHERE project_id = $1`, [item.project_id, run.lane]);
  await placeOnGpus(tx, target, run.run_id, run.gpu_indices ?? []);
  await appendAuditEvent(tx, {
    entity_type: 'run',
    entity_id: run.run_id,
    event_type: 'run.lane_retaken',
    payload: { project_id: run.project_id, lane: run.lane, gpu_indices: run.gpu_indices },
    actor: 'run-workflow',
  });
  return { retaken: true };
}

/**
 * Takes the run's lane (and GPUs) back, or says why not: another item runs on the lane, or another run was placed on
 * one of its GPUs. Both are read by the database's own constraints, so two claims cannot both win.
 */
export async function retakeLane(store: Store, request: { run_id: string; target: string }): Promise<LaneRetake> {
  try {
    return await store.transaction((tx) => retake(tx, request.run_id, request.target));
  } catch (error) {
    if (error instanceof GpuTakenError) return { retaken: false, reason: error.message, lost: false };
    // The one-active-row-per-lane index refused the item back on its lane.
    if ((error as { code?: string }).code === '23505') return { retaken: false, reason: 'another item runs on its lane', lost: false };
    throw error;
  }
}
