import type { Store } from '../../platform/store/store.ts';
import { busyLanes, queuedItemRoutes } from './dispatch-candidates.ts';
import type { DispatchSettings } from './dispatch-settings.ts';
import { lanesOf, resolveLane } from './domain/worker-lanes.ts';
import type { PlacementRefusal } from './run-placements.ts';

const plural = (count: number, one: string, many: string) => `${count} ${count === 1 ? one : many}`;

/**
 * Why nothing was dispatched (docs/runs.md#runs, noop): an empty queue, items waiting for review, items no lane takes
 * (naming the lane they lack), each lane the queued items wait for and why it is not idle, the items whose needs no
 * free GPU covers (`refusals`, docs/runs.md#slots-and-gpus), and live dispatch off.
 */
export async function noopReason(
  store: Store,
  settings: DispatchSettings,
  unavailable: { all: Set<string>; notEverywhere: Set<string> },
  refusals: readonly PlacementRefusal[] = [],
): Promise<string> {
  const liveOff = settings.liveDispatchEnabled ? [] : ['live dispatch is off (live_dispatch_enabled is false)'];
  if (settings.routing.targets.size === 0) return ['no worker target is configured (set worker_wake_gate_url or worker_targets)', ...liveOff].join('; ');
  const [routes, busy] = await Promise.all([queuedItemRoutes(store), busyLanes(store)]);
  const reasons: string[] = [];
  const eligible = routes.filter((route) => !route.manual_review_required);
  const inReview = routes.filter((route) => route.manual_review_required).reduce((sum, route) => sum + route.count, 0);
  if (routes.length === 0) reasons.push('the queue holds no queued item (promote a candidate to queue one)');
  if (inReview > 0) reasons.push(`${plural(inReview, 'queued item waits', 'queued items wait')} for manual review`);
  const laneless = new Map<string, number>();
  const waiting = new Map<string, number>();
  for (const route of eligible) {
    const lane = resolveLane(route, settings.routing);
    const [map, key] = lane.ok ? [waiting, lane.target.name] : [laneless, lane.reason];
    map.set(key, (map.get(key) ?? 0) + route.count);
  }
  for (const [reason, count] of laneless) reasons.push(`${plural(count, 'queued item has', 'queued items have')} no lane: ${reason}`);
  for (const [target, count] of waiting) {
    const lanes = lanesOf(settings.routing, target).map((lane) => lane.lane);
    const idle = lanes.filter((lane) => !busy.has(lane));
    // Its first item does not fit it now: what keeps its items waiting is named in `refusals`.
    if (refusals.some((refusal) => refusal.target === target)) continue;
    const why =
      idle.length === 0
        ? lanes.length === 1
          ? ', which is busy with a run'
          : `, whose ${lanes.length} slots are all busy with runs`
        : idle.some((lane) => unavailable.notEverywhere.has(lane))
          ? `: not every control-plane replica has configured ${target} yet`
          : lanes.length === 1
            ? ', which another dispatch call holds'
            : ', whose idle slots other dispatch calls hold';
    reasons.push(`${plural(count, 'queued item waits', 'queued items wait')} for ${lanes.length === 1 ? 'lane' : 'worker target'} ${target}${why}`);
  }
  return `no queued item is eligible on an idle lane: ${[...reasons, ...refusals.map((refusal) => refusal.reason), ...liveOff].join('; ')}`;
}
