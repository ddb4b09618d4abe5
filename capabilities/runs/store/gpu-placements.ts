import { ACTIVE_QUEUE_STATUSES } from '../domain/queue-status.ts';
import type { Queryable } from '../../../platform/store/store.ts';

/**
 * GPU placements (docs/runs.md#slots-and-gpus): one row per GPU a run was placed on, keyed by (target, GPU), so two
 * claims racing for one GPU (two replicas, a pump and a dispatch-next call) cannot both win. A row holds its GPU while
 * its run's queue item is active; once the item has moved on the row is stale, and the next claim on the target clears it.
 */

/** A placement still holds its GPU; `statuses` is the parameter bound to the active queue statuses. */
const holding = (statuses: string) =>
  `EXISTS (SELECT 1 FROM queue_items qi WHERE qi.current_run_id = gpu_placements.run_id AND qi.status = ANY (${statuses}::text[]))`;

/** The GPUs of `target` held by active runs, with the run holding each. */
export async function heldGpus(q: Queryable, target: string): Promise<Map<number, string>> {
  const result = await q.query<{ gpu_index: number; run_id: string }>(
    `SELECT gpu_index, run_id FROM gpu_placements WHERE target = $1 AND ${holding('$2')}`,
    [target, [...ACTIVE_QUEUE_STATUSES]],
  );
  return new Map(result.rows.map((row) => [row.gpu_index, row.run_id]));
}

export class GpuTakenError extends Error {
  readonly target: string;

  constructor(target: string) {
    super(`a GPU chosen on ${target} was just taken by another run`);
    this.target = target;
    this.name = 'GpuTakenError';
  }
}

/**
 * Places `run_id` on `gpuIndices` of `target`, inside the claim's transaction: rows of runs that no longer hold their
 * GPU are cleared first. Throws GpuTakenError when another claim took one of them meanwhile (the transaction is then
 * unusable: roll it back).
 */
export async function placeOnGpus(tx: Queryable, target: string, runId: string, gpuIndices: readonly number[]): Promise<void> {
  if (gpuIndices.length === 0) return;
  await tx.query(`DELETE FROM gpu_placements WHERE target = $1 AND gpu_index = ANY ($3::int[]) AND NOT ${holding('$2')}`, [
    target,
    [...ACTIVE_QUEUE_STATUSES],
    [...gpuIndices],
  ]);
  try {
    await tx.query(`INSERT INTO gpu_placements (target, gpu_index, run_id) SELECT $1, unnest($2::int[]), $3`, [target, [...gpuIndices], runId]);
  } catch (error) {
    if ((error as { code?: string }).code === '23505') throw new GpuTakenError(target);
    throw error;
  }
}
