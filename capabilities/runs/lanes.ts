import { dispatchRouteOf, laneSelector, type WorkerRouting } from './domain/worker-lanes.ts';
import type { QueueStatus } from './domain/queue-status.ts';
import { laneQueueHead } from './dispatch-candidates.ts';
import { readFlags } from './queue-flags.ts';
import { leasedLanes } from './store/lane-leases.ts';
import { activeLaneItems, laneHoldings, laneStatusCounts, type ActiveLaneItem } from './store/lane-reads.ts';
import { expectedRuntimeSec } from './domain/expected-runtime.ts';
import type { Queryable } from '../../platform/store/store.ts';
import { isRunFinished, type RunState } from './domain/run-state.ts';
import type { DispatchSettings } from './dispatch-settings.ts';
import { quietWindowsOf, type QuietWindowView } from './run-gate-view.ts';

function activeView({ run_state, run_created_at, run_gpu_indices, run_cpu_count, last_callback, ...item }: ActiveLaneItem) {
  const run = item.current_run_id
    ? { run_id: item.current_run_id, state: run_state, created_at: run_created_at, gpu_indices: run_gpu_indices, cpu_count: run_cpu_count }
    : null;
  return { item, run, last_callback };
}

/**
 * `GET /control/api/v1/lanes` with each in-flight run's quiet window, asked of the lanes' gates at once (a gate that
 * does not answer leaves its run's window null).
 */
export async function readLanesWithWindows(q: Queryable, dispatch: DispatchSettings) {
  const read = await readLanes(q, dispatch);
  const inFlight = read.lanes.flatMap(({ lane, active }) => (active?.run && !(active.run.state && isRunFinished(active.run.state as RunState)) ? [{ run_id: active.run.run_id, lane }] : []));
  const windows = inFlight.length > 0 ? await quietWindowsOf({ dispatch }, inFlight) : new Map<string, QuietWindowView>();
  return {
    ...read,
    lanes: read.lanes.map((entry) => {
      const { active } = entry;
      if (!active) return { ...entry, active: null };
      const run = active.run ? { ...active.run, quiet_window: windows.get(active.run.run_id) ?? null } : null;
      return { ...entry, active: { ...active, run } };
    }),
  };
}

/** Most lanes v1/lanes lists: every configured target, then lanes found only on queue rows, by name. */
export const MAX_LANES = 100;

/**
 * `GET /control/api/v1/lanes` (docs/console.md#read-models): one entry per worker lane (each slot of each target), the
 * configured ones first, then any other lane a queue item was claimed on (a target or slot since removed from config).
 */
export async function readLanes(q: Queryable, settings: { routing: WorkerRouting; liveDispatchEnabled: boolean }) {
  const { routing } = settings;
  const [counts, active, leased, flags] = await Promise.all([laneStatusCounts(q), activeLaneItems(q), leasedLanes(q), readFlags(q)]);
  const configured = [...routing.lanes.keys()];
  const others = [...new Set([...counts.map((row) => row.lane), ...active.map((item) => item.lane)])].filter((lane) => !routing.lanes.has(lane)).sort();
  const names = [...configured, ...others].slice(0, MAX_LANES);
  // The slots of one target share its queue: its head is read once.
  const heads = new Map<string, ReturnType<typeof laneQueueHead>>();
  const headOf = (lane: string, target: string) => {
    if (!heads.has(target)) heads.set(target, laneQueueHead(q, laneSelector(lane, routing)));
    return heads.get(target)!;
  };

  const lanes = await Promise.all(
    names.map(async (lane) => {
      const target = routing.lanes.get(lane);
      const activeItem = active.find((item) => item.lane === lane) ?? null;
      const head = target ? await headOf(lane, target.name) : { next: null, eligible: 0 };
      const byStatus: Partial<Record<QueueStatus, number>> = {};
      for (const row of counts) if (row.lane === lane) byStatus[row.status] = row.n;
      return {
        lane,
        configured: target !== undefined,
        route: target ? dispatchRouteOf(target) : null,
        idle: activeItem === null && !leased.has(lane),
        active: activeItem ? activeView(activeItem) : null,
        next_candidate: head.next,
        counts: { claimed_by_status: byStatus, eligible_queued: head.eligible },
      };
    }),
  );
  return {
    dispatch: { queue_paused: flags.queue_paused, maintenance_mode: flags.maintenance_mode, live_dispatch_enabled: settings.liveDispatchEnabled },
    lanes,
    truncated: configured.length + others.length > names.length,
  };
}

/**
 * Every lane an active run holds, with how long it has held it, the runtime its candidate expected
 * (domain/expected-runtime.ts) and its GPU count: the lane series of `GET /metrics`.
 */
export async function readLaneHoldings(q: Queryable) {
  return (await laneHoldings(q)).map(({ runtime_class, ...holding }) => ({ ...holding, expected_sec: expectedRuntimeSec(runtime_class) }));
}
