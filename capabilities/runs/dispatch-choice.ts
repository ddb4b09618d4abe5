import { busyLanes } from './dispatch-candidates.ts';
import { lanesOf, resolveLane } from './domain/worker-lanes.ts';
import { QUEUE_ITEM_COMMANDS } from './domain/queue-status.ts';
import { getQueueItem, type QueueItemRow } from './queue-items.ts';
import { placementOn, type PlacedCandidate, type PlacementRefusal } from './run-placements.ts';
import type { DispatchSettings } from './dispatch-settings.ts';
import type { Store } from '../../platform/store/store.ts';
import { CommandRefusedError } from '../../platform/command-errors.ts';

/**
 * Dispatch-next for the item the operator chose (`project_id`, docs/runs.md#dispatching-the-item-you-chose): the same
 * checks as the next item's, but the dispatch order is the operator's. The item must be queued and unflagged, its
 * worker target must have an idle lane, and its needs must fit that lane now; otherwise the answer says which.
 */

/** What a search for a candidate found: the candidate, or why there is none. */
export interface FoundCandidate {
  next: PlacedCandidate | null;
  /** The targets whose first item does not fit now (the next item's search; capabilities/runs/dispatch-noop-reason.ts words them). */
  refusals?: PlacementRefusal[];
  /** Why `next` is null, where the search words it itself (a chosen item). */
  reason?: string;
}

/** The chosen item; 404 when the queue holds no such project. */
async function chosenItem(store: Store, projectId: string): Promise<QueueItemRow> {
  const item = await getQueueItem(store, projectId);
  if (!item) throw new CommandRefusedError(404, `unknown project '${projectId}'`);
  return item;
}

/** Why the item may not be dispatched as it stands, in words; null when it may. */
function ineligibility(item: QueueItemRow): string | null {
  if (item.status !== 'queued') return `${item.project_id} is ${item.status.replaceAll('_', ' ')}, not queued${(QUEUE_ITEM_COMMANDS.requeue as readonly string[]).includes(item.status) ? ' (requeue it first)' : ''}`;
  if (item.manual_review_required) return `${item.project_id} is flagged for manual review (requeue it to clear the flag)`;
  return null;
}

/**
 * Where the chosen item goes now: the first idle lane of its worker target that no call holds (`skip`), and its
 * placement there. Read afresh on every call: a live call reads it again once it holds the lane's lease.
 */
export async function placeChosen(deps: { store: Store; settings: DispatchSettings }, projectId: string, skip: ReadonlySet<string>): Promise<FoundCandidate> {
  const { store, settings } = deps;
  const item = await chosenItem(store, projectId);
  const refused = ineligibility(item);
  if (refused) return { next: null, reason: refused };
  const route = resolveLane(item, settings.routing);
  if (!route.ok) return { next: null, reason: `${item.project_id} has no lane: ${route.reason}` };
  const lanes = lanesOf(settings.routing, route.target.name);
  const busy = await busyLanes(store);
  const idle = lanes.find((lane) => !busy.has(lane.lane) && !skip.has(lane.lane));
  if (!idle) {
    const held = lanes.some((lane) => !busy.has(lane.lane));
    const what = lanes.length === 1 ? `its lane ${route.target.name} is` : `all ${lanes.length} slots of its worker target ${route.target.name} are`;
    const busyWith = lanes.length === 1 ? 'busy with a run' : 'busy with runs';
    return { next: null, reason: `${item.project_id} waits: ${what} ${held ? `${busyWith} or held by other dispatch calls` : busyWith}` };
  }
  const placement = await placementOn(store, settings, { item, lane: idle });
  if (!placement.ok) return { next: null, reason: `${item.project_id} ${placement.reason}` };
  return { next: { item, lane: idle.lane, placement } };
}
