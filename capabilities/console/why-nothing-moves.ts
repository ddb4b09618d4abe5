import { whyNothingMoves, type ItemFact, type LaneFact, type PreflightFact, type RunFact, type WhyNothingMoves } from './domain/stall-reasons.ts';
import { queueCounts } from './store/status-reads.ts';
import { queuedItemsInOrder } from '../runs/dispatch-candidates.ts';
import { unavailableLanes } from '../runs/dispatch-lanes.ts';
import type { DispatchSettings } from '../runs/dispatch-settings.ts';
import { resolveLane } from '../runs/domain/worker-lanes.ts';
import { readLanes } from '../runs/lanes.ts';
import { quietWindowsOf } from '../runs/run-gate-view.ts';
import { placementOn } from '../runs/run-placements.ts';
import { activeRuns, queueLastMovedAt } from '../runs/run-reads.ts';
import { latestWorkerObservations } from '../runs/worker-observations.ts';
import type { QueueItemRow } from '../runs/queue-items.ts';
import type { RunState } from '../runs/domain/run-state.ts';
import type { Queryable } from '../../platform/store/store.ts';

/**
 * `GET /control/api/v1/why` (docs/console.md#why-nothing-moves): the facts of the queue, its lanes and its active runs,
 * read at once, and what the rules in domain/stall-reasons.ts make of them.
 */

export interface WhyDeps {
  /** The store's read pool, and whether the store takes writes at all. */
  reads: Queryable;
  readOnly: boolean;
  dispatch: DispatchSettings;
  /** queue_pump_enabled: whether queued items go without a person. */
  pump: { enabled: boolean };
}

/** How many queued items, in dispatch order, are explained: those the next dispatches would consider. */
export const WHY_ITEMS = 25;
/** How many active runs are explained, oldest first: more than any lab's lanes hold. */
export const WHY_RUNS = 200;
/** Run states whose gate judges a quiet window. */
const WAITING_ON_THE_AGENT: ReadonlySet<RunState> = new Set(['awaiting_wake', 'running']);

export async function readWhyNothingMoves(deps: WhyDeps): Promise<WhyNothingMoves & { checked_at: string; queue: { queued: number; last_moved_at: string | null } }> {
  const { reads: store, dispatch } = deps;
  const checkedAt = new Date().toISOString();
  const [lanesRead, unavailable, observations, queued, counts, runs, lastMovedAt] = await Promise.all([
    readLanes(store, dispatch),
    unavailableLanes(store, dispatch),
    latestWorkerObservations(store),
    queuedItemsInOrder(store, WHY_ITEMS),
    queueCounts(store),
    activeRuns(store, WHY_RUNS),
    queueLastMovedAt(store),
  ]);

  const lanes: LaneFact[] = lanesRead.lanes.flatMap(({ lane, route, active }) =>
    route
      ? [{
          lane,
          target: route.machine_target,
          active: active ? { project_id: active.item.project_id, run_id: active.run?.run_id ?? null } : null,
          leased: active === null && unavailable.all.has(lane) && !unavailable.notEverywhere.has(lane),
          notEverywhere: unavailable.notEverywhere.has(lane),
        }]
      : [],
  );
  const preflights = new Map<string, PreflightFact>(
    observations.map((observation) => [
      observation.target,
      { ok: observation.ok, failed_checks: observation.checks.filter((check) => !check.ok).map((check) => check.name), observed_at: observation.observed_at },
    ]),
  );
  const items = await withFits(deps, queued, lanes, preflights);
  const waiting = runs.filter((run) => WAITING_ON_THE_AGENT.has(run.state));
  const windows = waiting.length > 0 ? await quietWindowsOf({ dispatch }, waiting) : new Map();
  const runFacts: RunFact[] = runs.map((run) => ({
    run_id: run.run_id,
    project_id: run.project_id,
    lane: run.lane,
    state: run.state,
    question: run.question,
    usage_limit: run.usage_limit,
    quiet_window: windows.get(run.run_id) ?? null,
  }));

  const { queue_paused, maintenance_mode } = lanesRead.dispatch;
  const why = whyNothingMoves({
    flags: { queue_paused, maintenance_mode },
    liveDispatchEnabled: dispatch.liveDispatchEnabled,
    readOnly: deps.readOnly,
    pumpEnabled: deps.pump.enabled,
    lanes,
    preflights,
    items,
    queuedCount: counts.by_status.queued,
    runs: runFacts,
  });
  return { checked_at: checkedAt, ...why, queue: { queued: counts.by_status.queued, last_moved_at: lastMovedAt } };
}

/**
 * The queued items as facts, each with its route; an unflagged routed item that a free lane of its target would take
 * is also placed there (its GPUs, CPUs), as a dispatch would place it, to say whether it fits now.
 */
async function withFits(deps: WhyDeps, queued: readonly QueueItemRow[], lanes: readonly LaneFact[], preflights: ReadonlyMap<string, PreflightFact>): Promise<ItemFact[]> {
  const freeByTarget = new Map<string, LaneFact[]>();
  for (const lane of lanes) {
    const failing = preflights.get(lane.target)?.ok === false;
    if (lane.active || lane.leased || lane.notEverywhere || failing) continue;
    freeByTarget.set(lane.target, [...(freeByTarget.get(lane.target) ?? []), lane]);
  }
  // The free lanes are handed out in dispatch order first; the placements are then read side by side.
  const planned = queued.map((item) => {
    const resolved = resolveLane(item, deps.dispatch.routing);
    const fact: ItemFact = {
      project_id: item.project_id,
      project_name: item.project_name,
      manual_review_required: item.manual_review_required,
      route: resolved.ok ? { ok: true, target: resolved.target.name } : { ok: false, reason: resolved.reason },
    };
    const lane = resolved.ok && !item.manual_review_required ? freeByTarget.get(resolved.target.name)?.shift() : undefined;
    return { item, fact, lane };
  });
  return Promise.all(
    planned.map(async ({ item, fact, lane }): Promise<ItemFact> => {
      if (!lane) return fact;
      const placement = await placementOn(deps.reads, deps.dispatch, { item, lane: deps.dispatch.routing.lanes.get(lane.lane)! });
      return { ...fact, fits: placement.ok ? { ok: true } : { ok: false, reason: `${item.project_id} ${placement.reason}` } };
    }),
  );
}
