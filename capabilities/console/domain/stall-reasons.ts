import type { RunState } from '../../runs/domain/run-state.ts';

/**
 * Why nothing moves (docs/console.md#why-nothing-moves): for each queued item the next dispatch would consider, each
 * worker lane and each active run, what keeps it where it is, as a kind a script can match and a reason a person can
 * read. Pure: the reader (capabilities/console/why-nothing-moves.ts) gathers the facts.
 */

/** What stops every dispatch, whatever the item. */
export const DISPATCH_BLOCKERS = ['maintenance', 'paused', 'live_dispatch_off', 'read_only', 'no_worker_target'] as const;
export type DispatchBlocker = (typeof DISPATCH_BLOCKERS)[number];

/** Why a queued item is not dispatched; `dispatchable`: the next dispatch takes it. */
export const ITEM_WAITS = [
  'dispatchable',
  ...DISPATCH_BLOCKERS,
  'flagged',
  'no_lane',
  'lane_busy',
  'lane_held',
  'lane_not_everywhere',
  'preflight_failing',
  'does_not_fit',
  'behind',
] as const;
export type ItemWait = (typeof ITEM_WAITS)[number];

/** What a lane is doing, or why it takes no run while it is idle. */
export const LANE_WAITS = ['ready', 'busy', 'held', 'not_everywhere', 'preflight_failing', 'waiting', 'no_work'] as const;
export type LaneWait = (typeof LANE_WAITS)[number];

/** Why an active run has not finished. */
export const RUN_WAITS = ['starting', 'question', 'usage_limit', 'quiet_window', 'overdue', 'gate_silent', 'finishing'] as const;
export type RunWait = (typeof RUN_WAITS)[number];

export interface LaneFact {
  lane: string;
  target: string;
  /** The item a run holds the lane for; null while it is free. */
  active: { project_id: string; run_id: string | null } | null;
  /** Another dispatch call holds the lane's lease while it starts a run there. */
  leased: boolean;
  /** Some live control-plane replica has not configured the lane yet. */
  notEverywhere: boolean;
}

/** A target's latest preflight (the stored worker observation); absent when it was never observed. */
export interface PreflightFact {
  ok: boolean;
  failed_checks: string[];
  observed_at: string;
}

export interface ItemFact {
  project_id: string;
  project_name: string;
  manual_review_required: boolean;
  /** The worker target the item routes to, or why it has none. */
  route: { ok: true; target: string } | { ok: false; reason: string };
  /** Whether its needs fit the first free lane of its target now; read only for an item that would otherwise go. */
  fits?: { ok: true } | { ok: false; reason: string };
}

export interface RunFact {
  run_id: string;
  project_id: string;
  lane: string;
  state: RunState;
  question: string | null;
  usage_limit: { resumes_at: string; holds_slot?: boolean | undefined } | null;
  /** The quiet window as the run's gate judged it; null when the gate did not say. */
  quiet_window: { samples_in_window: number; samples_needed: number; reasons: string[]; waiting_sec: number | null; overdue: boolean } | null;
}

export interface WhyFacts {
  flags: { queue_paused: boolean; maintenance_mode: boolean };
  liveDispatchEnabled: boolean;
  readOnly: boolean;
  /** Whether the queue pump dispatches by itself (queue_pump_enabled). */
  pumpEnabled: boolean;
  lanes: readonly LaneFact[];
  preflights: ReadonlyMap<string, PreflightFact>;
  /** The queued items in dispatch order, the first of them. */
  items: readonly ItemFact[];
  /** How many items are queued in all (the list may hold the first only). */
  queuedCount: number;
  runs: readonly RunFact[];
}

export interface Reason<K extends string> {
  kind: K;
  reason: string;
}

export type ItemWhy = Reason<ItemWait> & { project_id: string; project_name: string; lane: string | null };
export type LaneWhy = Reason<LaneWait> & { lane: string; machine_target: string; run_id: string | null; project_id: string | null };
export type RunWhy = Reason<RunWait> & { run_id: string; project_id: string; lane: string; state: RunState };

export interface WhyNothingMoves {
  summary: string;
  blockers: Reason<DispatchBlocker>[];
  items: ItemWhy[];
  lanes: LaneWhy[];
  runs: RunWhy[];
}

const plural = (count: number, one: string, many: string) => `${count} ${count === 1 ? one : many}`;

export function dispatchBlockers(facts: Pick<WhyFacts, 'flags' | 'liveDispatchEnabled' | 'readOnly' | 'lanes'>): Reason<DispatchBlocker>[] {
  const blockers: Reason<DispatchBlocker>[] = [];
  if (facts.flags.maintenance_mode) blockers.push({ kind: 'maintenance', reason: 'maintenance mode is on (POST /control/resume, or rcp resume, ends it)' });
  if (facts.flags.queue_paused) blockers.push({ kind: 'paused', reason: 'the queue is paused (POST /control/resume, or rcp resume)' });
  if (!facts.liveDispatchEnabled) blockers.push({ kind: 'live_dispatch_off', reason: 'live dispatch is off (set "live_dispatch_enabled": true and restart)' });
  if (facts.readOnly) blockers.push({ kind: 'read_only', reason: 'the store is read-only (control_plane_store_backend is pg_readonly)' });
  if (facts.lanes.length === 0) blockers.push({ kind: 'no_worker_target', reason: 'no worker target is configured (set worker_wake_gate_url or worker_targets)' });
  return blockers;
}

function preflightReason(target: string, preflight: PreflightFact): string {
  const checks = preflight.failed_checks.length > 0 ? `: ${preflight.failed_checks.join(', ')}` : '';
  return `the latest preflight of ${target} failed${checks} (at ${preflight.observed_at}; GET /control/api/status?refresh_worker=true checks again)`;
}

/** Why each lane of a target is not free for a new run; null for a lane a run may take now. */
function laneHold(lane: LaneFact, preflights: WhyFacts['preflights']): Reason<LaneWait> | null {
  if (lane.active) return { kind: 'busy', reason: `runs ${lane.active.run_id ?? 'a run'} of ${lane.active.project_id}` };
  if (lane.leased) return { kind: 'held', reason: 'another dispatch call holds it while it starts a run there' };
  if (lane.notEverywhere) return { kind: 'not_everywhere', reason: 'not every control-plane replica has configured it yet' };
  const preflight = preflights.get(lane.target);
  if (preflight && !preflight.ok) return { kind: 'preflight_failing', reason: preflightReason(lane.target, preflight) };
  return null;
}

const LANE_TO_ITEM: Record<Exclude<LaneWait, 'ready' | 'waiting' | 'no_work'>, ItemWait> = {
  busy: 'lane_busy',
  held: 'lane_held',
  not_everywhere: 'lane_not_everywhere',
  preflight_failing: 'preflight_failing',
};

/** The target's lanes say why none is free, the first of the strongest kind (a failing worker before a busy lane). */
function noFreeLane(target: string, holds: readonly { lane: LaneFact; hold: Reason<LaneWait> }[]): Reason<ItemWait> {
  const preflight = holds.find(({ hold }) => hold.kind === 'preflight_failing');
  if (preflight) return { kind: 'preflight_failing', reason: preflight.hold.reason };
  const first = holds[0]!;
  const what = holds.length === 1 ? `its lane ${first.lane.lane}` : `all ${holds.length} slots of ${target}`;
  const kind = LANE_TO_ITEM[first.hold.kind as keyof typeof LANE_TO_ITEM];
  if (holds.length === 1) return { kind, reason: `${what}: ${first.hold.reason}` };
  const busy = holds.filter(({ hold }) => hold.kind === 'busy').length;
  const others = holds.length - busy;
  return { kind, reason: `${what} are taken (${busy} by runs${others > 0 ? `, ${others} held or not ready` : ''})` };
}

export function whyNothingMoves(facts: WhyFacts): WhyNothingMoves {
  const blockers = dispatchBlockers(facts);
  const lanesByTarget = new Map<string, LaneFact[]>();
  for (const lane of facts.lanes) lanesByTarget.set(lane.target, [...(lanesByTarget.get(lane.target) ?? []), lane]);
  const holds = new Map(facts.lanes.map((lane) => [lane.lane, laneHold(lane, facts.preflights)]));
  /** The free lanes of each target, taken in turn by the items that go, and the item that holds a target's queue. */
  const free = new Map([...lanesByTarget].map(([target, lanes]) => [target, lanes.filter((lane) => holds.get(lane.lane) === null)]));
  const holder = new Map<string, string>();
  /** The first item the next dispatches take to each target: later ones wait behind it once its free lanes are taken. */
  const taker = new Map<string, string>();
  /** Per lane, the item the next dispatch takes there, or the first item that waits for it. */
  const laneItem = new Map<string, ItemWhy>();

  const items = facts.items.map((item): ItemWhy => {
    const base = { project_id: item.project_id, project_name: item.project_name };
    if (item.manual_review_required) return { ...base, lane: null, kind: 'flagged', reason: 'flagged for manual review (requeue it to clear the flag)' };
    if (!item.route.ok) return { ...base, lane: null, kind: 'no_lane', reason: item.route.reason };
    const target = item.route.target;
    const lanes = lanesByTarget.get(target) ?? [];
    const ahead = holder.get(target);
    if (ahead) return { ...base, lane: null, kind: 'behind', reason: `waits behind ${ahead} for ${target}` };
    const lane = free.get(target)?.[0];
    if (!lane) {
      const first = taker.get(target);
      if (first) return { ...base, lane: null, kind: 'behind', reason: `waits behind ${first} for ${target}` };
      const why = noFreeLane(target, lanes.map((taken) => ({ lane: taken, hold: holds.get(taken.lane)! })));
      return { ...base, lane: null, ...why };
    }
    const blocker = blockers[0];
    const why: ItemWhy = blocker
      ? { ...base, lane: lane.lane, kind: blocker.kind, reason: blocker.reason }
      : item.fits && !item.fits.ok
        ? { ...base, lane: lane.lane, kind: 'does_not_fit', reason: item.fits.reason }
        : { ...base, lane: lane.lane, kind: 'dispatchable', reason: `the next dispatch takes it to ${lane.lane}` };
    if (!laneItem.has(lane.lane)) laneItem.set(lane.lane, why);
    // An item that does not fit holds its target's queue, as dispatch does: no later item overtakes it there.
    if (why.kind === 'does_not_fit') holder.set(target, item.project_id);
    if (why.kind === 'dispatchable') {
      free.set(target, free.get(target)!.slice(1));
      if (!taker.has(target)) taker.set(target, item.project_id);
    }
    return why;
  });

  const lanes = facts.lanes.map((lane): LaneWhy => {
    const base = { lane: lane.lane, machine_target: lane.target, run_id: lane.active?.run_id ?? null, project_id: lane.active?.project_id ?? null };
    const hold = holds.get(lane.lane);
    if (hold) return { ...base, ...hold };
    const item = laneItem.get(lane.lane);
    if (!item) return { ...base, kind: 'no_work', reason: `idle: no queued item${facts.queuedCount > facts.items.length ? ` among the first ${facts.items.length}` : ''} routes to it` };
    if (item.kind === 'dispatchable') return { ...base, project_id: item.project_id, kind: 'ready', reason: `idle: the next dispatch takes ${item.project_id}` };
    return { ...base, project_id: item.project_id, kind: 'waiting', reason: `idle: ${item.project_id} waits: ${item.reason}` };
  });

  const runs = facts.runs.map(runWhy);
  return { summary: summaryOf(facts, blockers, items, runs), blockers, items, lanes, runs };
}

const PUMP_OFF = '; nothing dispatches by itself while the queue pump is off (rcp dispatch, or queue_pump_enabled)';

const STARTING: ReadonlySet<RunState> = new Set(['prepared', 'dispatching']);
const FINISHING: ReadonlySet<RunState> = new Set(['wake_ready', 'session_finished_ready']);

export function runWhy(run: RunFact): RunWhy {
  const base = { run_id: run.run_id, project_id: run.project_id, lane: run.lane, state: run.state };
  if (STARTING.has(run.state)) return { ...base, kind: 'starting', reason: 'its worker is preparing and starting the agent' };
  if (run.state === 'question_pending') {
    const words = run.question?.replace(/\s+/g, ' ').trim() ?? '';
    const question = words ? `: ${words.length > 200 ? `${words.slice(0, 199)}…` : words}` : '';
    return { ...base, kind: 'question', reason: `waits for your answer (rcp runs answer ${run.run_id})${question}` };
  }
  if (run.state === 'usage_limited') {
    const at = run.usage_limit ? ` until ${run.usage_limit.resumes_at}` : '';
    return { ...base, kind: 'usage_limit', reason: `waits out the model's usage limit${at}, then resumes by itself (rcp runs resume ${run.run_id} resumes it now)` };
  }
  if (FINISHING.has(run.state)) return { ...base, kind: 'finishing', reason: 'its gate found it finished; the control plane is recording the result' };
  const window = run.quiet_window;
  if (!window) return { ...base, kind: 'gate_silent', reason: `its gate did not say how the run is doing (unreachable, or it no longer holds the run)` };
  const waited = window.waiting_sec === null ? '' : ` for ${Math.round(window.waiting_sec)} s`;
  if (window.overdue) return { ...base, kind: 'overdue', reason: `has waited${waited}, far longer than its quiet window: look at it (rcp runs logs, or its gate)` };
  const reasons = window.reasons.length > 0 ? `: ${window.reasons.join('; ')}` : '';
  return { ...base, kind: 'quiet_window', reason: `working: its quiet window holds ${window.samples_in_window} of the ${window.samples_needed} quiet samples it needs${reasons}` };
}

function summaryOf(facts: WhyFacts, blockers: readonly Reason<DispatchBlocker>[], items: readonly ItemWhy[], runs: readonly RunWhy[]): string {
  const parts: string[] = [];
  const going = items.filter((item) => item.kind === 'dispatchable');
  const empty = 'the queue holds no queued item (promote a candidate to queue one)';
  if (blockers.length > 0) {
    parts.push(`nothing dispatches: ${blockers.map((blocker) => blocker.reason).join('; ')}`);
    if (facts.queuedCount === 0) parts.push(empty);
  } else if (going.length > 0) parts.push(`${plural(going.length, 'item can', 'items can')} go now, first ${going[0]!.project_id} to ${going[0]!.lane}${facts.pumpEnabled ? '' : PUMP_OFF}`);
  else if (facts.queuedCount === 0) parts.push(empty);
  else parts.push(`no queued item can go now: ${items[0]!.project_id} ${items[0]!.kind === 'behind' ? items[0]!.reason : `waits: ${items[0]!.reason}`}`);
  if (runs.length > 0) {
    const forYou = runs.filter((run) => run.kind === 'question' || run.kind === 'overdue').length;
    parts.push(`${plural(runs.length, 'run is', 'runs are')} active${forYou > 0 ? `, ${forYou} waiting for you` : ''}`);
  }
  return `${parts.map((part) => `${part.charAt(0).toUpperCase()}${part.slice(1)}`).join('. ')}.`;
}
