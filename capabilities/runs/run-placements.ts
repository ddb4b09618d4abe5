import { z } from 'zod';
import { lanesOf, type WorkerLane } from './domain/worker-lanes.ts';
import { planPlacement, runNeedsOf, type GateGpuReading, type Placement, type RunNeeds } from './domain/run-placement.ts';
import { claimQueueItem, recordRunPlacement, type ClaimRequest, type ClaimResult } from './run-ledger.ts';
import { getQueueItem } from './queue-items.ts';
import { nextDispatchCandidate } from './dispatch-candidates.ts';
import type { DispatchSettings } from './dispatch-settings.ts';
import type { QueueItemRow } from './queue-items.ts';
import { heldGpus, placeOnGpus } from './store/gpu-placements.ts';
import { workerGateClient } from './worker-gate-client.ts';
import type { Queryable, Store } from '../../platform/store/store.ts';

/**
 * Placing a run on its worker (docs/runs.md#slots-and-gpus): the GPUs its gate reports free, less those other runs
 * hold in the ledger. The dispatch paths look before they choose an item; the claim decides, in its own transaction.
 */

/** A placement must not hold a dispatch up for long when the gate hangs. */
const GPU_READ_TIMEOUT_MS = 5_000;

// The gate is another machine: a field of the wrong type reads as absent, and a GPU without an index is left out.
const GateCapacitySchema = z.object({
  capacity: z.object({
    gpus: z.array(
      z.object({
        index: z.number().int().min(0),
        memory_total_mib: z.number().nullable().optional().catch(null),
        memory_free_mib: z.number().nullable().optional().catch(null),
        run_id: z.string().nullable().optional().catch(null),
        offered: z.boolean().optional().catch(undefined),
      }),
    ),
  }),
});

/** What the lane's gate reports of its GPUs (its dashboard's capacity), or why it could not be read. */
export async function readGateGpus(settings: Pick<DispatchSettings, 'trace'>, lane: WorkerLane): Promise<GateGpuReading> {
  try {
    const answer = await workerGateClient(lane, { timeoutMs: GPU_READ_TIMEOUT_MS, trace: settings.trace }).dashboard({ limit: 1, event_limit: 1 });
    if (answer.status !== 200) return { ok: false, reason: `its gate answered ${answer.status}` };
    const parsed = GateCapacitySchema.safeParse(answer.body);
    if (!parsed.success) return { ok: false, reason: 'its gate reports no capacity (a gate older than slots)' };
    return {
      ok: true,
      // A GPU the gate does not offer to runs (its run_gpus) is not the control plane's to place on.
      gpus: parsed.data.capacity.gpus.filter((gpu) => gpu.offered !== false).map((gpu) => ({
        index: gpu.index,
        memory_total_mib: gpu.memory_total_mib ?? null,
        memory_free_mib: gpu.memory_free_mib ?? null,
        run_id: gpu.run_id ?? null,
      })),
    };
  } catch (error) {
    return { ok: false, reason: (error as Error).message };
  }
}

export interface PlacementRequest {
  item: QueueItemRow;
  lane: WorkerLane;
}

/** Whether placing a run of these needs on the lane asks its gate for its GPUs: a GPU need on a GPU worker. */
const asksGpus = (needs: RunNeeds, lane: WorkerLane): boolean => needs.gpu_count > 0 && lane.role === 'gpu_worker';

/** Where a run of `item` goes on `lane` now, by the ledger as `q` sees it (the claim's transaction, or the store). */
export async function placementOn(q: Queryable, settings: DispatchSettings, request: PlacementRequest): Promise<Placement & { needs: RunNeeds }> {
  const needs = runNeedsOf(request.item, settings.routing.classNeeds);
  const [held, gpus] = asksGpus(needs, request.lane)
    ? await Promise.all([heldGpus(q, request.lane.name), readGateGpus(settings, request.lane)])
    : [new Map<number, string>(), null];
  return { ...planPlacement({ lane: request.lane, needs, held, gpus }), needs };
}

/** A target whose first item does not fit it now, and why. */
export interface PlacementRefusal {
  target: string;
  reason: string;
}

export interface PlacedCandidate {
  item: QueueItemRow;
  lane: string;
  placement: Extract<Placement, { ok: true }> & { needs: RunNeeds };
}

/**
 * The next item to dispatch that fits its target now, and where it goes. An item whose needs its target cannot meet
 * holds that target's queue (no smaller item overtakes it there), and the search goes on with the other targets; each
 * such refusal is named for the answer.
 */
export async function nextPlacedCandidate(
  deps: { store: Store; settings: DispatchSettings },
  skip: ReadonlySet<string>,
): Promise<{ next: PlacedCandidate | null; refusals: PlacementRefusal[] }> {
  const { store, settings } = deps;
  const passed = new Set(skip);
  const refusals: PlacementRefusal[] = [];
  for (let targets = 0; targets <= settings.routing.targets.size; targets += 1) {
    const next = await nextDispatchCandidate(store, settings.routing, passed);
    if (!next) break;
    const lane = settings.routing.lanes.get(next.lane)!;
    const placement = await placementOn(store, settings, { item: next.item, lane });
    if (placement.ok) return { next: { ...next, placement }, refusals };
    refusals.push({ target: lane.name, reason: `${next.item.project_id} ${placement.reason}` });
    for (const other of lanesOf(settings.routing, lane.name)) passed.add(other.lane);
  }
  return { next: null, refusals };
}

class PlacementRefusedError extends Error {}

/**
 * Claims the item for the run and places it on its lane, in one transaction (docs/runs.md#slots-and-gpus): this is
 * where a run's GPUs are decided, against the GPUs the ledger shows held in that transaction and the memory the gate
 * reported free just before it. A run that does not fit is not claimed (the item stays queued), with the reason. A claim
 * made again for the same run answers the first one, placement included.
 */
export async function claimPlaced(store: Store, settings: DispatchSettings, request: ClaimRequest): Promise<ClaimResult> {
  const lane = settings.routing.lanes.get(request.lane);
  if (!lane) return { claimed: false, reason: `lane ${request.lane} is not a configured worker target of this replica` };
  const seen = await getQueueItem(store, request.project_id);
  // Asked before the transaction, so the queue row is not held locked while the gate answers.
  const gpus = seen && asksGpus(runNeedsOf(seen, settings.routing.classNeeds), lane) ? await readGateGpus(settings, lane) : null;
  try {
    return await store.transaction(async (tx) => {
      const claim = await claimQueueItem(tx, request);
      if (!claim.claimed || claim.run.gpu_indices !== null) return claim;
      const needs = runNeedsOf(claim.queue_item, settings.routing.classNeeds);
      const placement = planPlacement({ lane, needs, held: await heldGpus(tx, lane.name), gpus: needs.gpu_count > 0 ? (gpus ?? { ok: false, reason: 'not read' }) : null });
      if (!placement.ok) throw new PlacementRefusedError(placement.reason);
      if (placement.gpu_indices === null && placement.cpu_count === null) return claim;
      await placeOnGpus(tx, lane.name, claim.run.run_id, placement.gpu_indices ?? []);
      return { ...claim, run: await recordRunPlacement(tx, claim.run, placement, request.requested_by) };
    });
  } catch (error) {
    if (error instanceof PlacementRefusedError) return { claimed: false, reason: `${request.project_id} ${error.message}` };
    throw error;
  }
}
