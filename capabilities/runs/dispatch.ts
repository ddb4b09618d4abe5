import { randomUUID } from 'node:crypto';
import { dispatchRouteOf, resolveLane } from './domain/worker-lanes.ts';
import { runIdFor } from './domain/run-state.ts';
import { busyLanes, countActiveItems, nextDispatchCandidate, queuedItemRoutes } from './dispatch-candidates.ts';
import { readFlags } from './queue-flags.ts';
import { leasedLanes, releaseLaneLease, renewLaneLease, takeLaneLease } from './store/lane-leases.ts';
import { lanesMissingOnSomeReplica } from '../../platform/cluster/replica-ledger.ts';
import { REPLICA_LOST_AFTER_MS } from '../../platform/cluster/replicas.ts';
import type { QueueItemRow } from './queue-items.ts';
import { getRun } from './run-ledger.ts';
import { claimKey, completeKey, notePending, releaseAbandonedClaim, releaseKey, type KeyClaim } from '../../platform/store/idempotency-keys.ts';
import type { Store } from '../../platform/store/store.ts';
import type { PreflightResult } from './domain/preflight-checks.ts';
import type { AgentSettings, RunTimings, RunWorkflowInput } from '../../workflows/runs/run-messages.ts';
import { CommandRefusedError, replayAnswer, type KeptRefusal } from '../../platform/command-errors.ts';
import type { AgentDefaults, DispatchSettings } from './dispatch-settings.ts';
import { RunLedgerFailedError, type RunLauncher, type StartedRun } from './run-launcher.ts';
import { dispatchPreflight } from './worker-preflight.ts';

/**
 * `POST /control/dispatch-next` (docs/runs.md#runs). A dry run says what a live call
 * would dispatch and where, writing nothing. A live call checks, in order: enabled, maintenance, paused, a candidate;
 * then starts the run workflow, which claims, preflights, prepares and dispatches, and answers once the worker
 * accepted the run or the attempt failed.
 */

export interface DispatchNextRequest {
  dry_run: boolean;
  requested_by: string;
  force_preflight: boolean;
  /** This call's agent settings, over the configured defaults. */
  agent?: Partial<AgentDefaults> | undefined;
  /** A live call's idempotency key: its retries start no second run (dispatchKeyed). */
  idempotency_key?: string | undefined;
}

export interface DispatchDeps {
  store: Store;
  settings: DispatchSettings;
  runs: RunLauncher;
  /** Where a key that could not be settled after a failed call is reported (the console when absent). */
  log?: { error(detail: object, message: string): void } | undefined;
}

/** How long past the gate's own dispatch time limit one gate call may take (network, prepare). */
const GATE_CALL_SLACK_SEC = 10;
const GATE_CALL_ATTEMPTS = 3;

/** Run durations from config: the run waits max_wait_after_idle_sec plus a margin for the gate's own timeout to arrive. */
export function runTimingsFrom(settings: DispatchSettings): RunTimings {
  return {
    completion_wait_sec: settings.maxWaitAfterIdleSec + Math.max(60, Math.round(settings.maxWaitAfterIdleSec * 0.1)),
    gate_call_timeout_sec: settings.dispatchTimeoutSec + GATE_CALL_SLACK_SEC,
    gate_call_attempts: GATE_CALL_ATTEMPTS,
    gate_retry_initial_sec: 2,
  };
}

/**
 * A lane lease lasts this long and is renewed every LEASE_RENEW_MS while its call waits for the outcome, so the lease of
 * a call whose process died lapses within seconds and another replica can dispatch to the lane again.
 */
export const LANE_LEASE_TTL_MS = 10_000;
const LEASE_RENEW_MS = 3_000;

/** Keeps `holder`'s lease on `lane` from lapsing until the returned function is called. */
function keepLeased(store: Store, lane: string, holder: string): () => void {
  const timer = setInterval(() => {
    // A renewal that fails (the store briefly unreachable) is tried again at the next tick, within the lease's life.
    renewLaneLease(store, lane, holder, LANE_LEASE_TTL_MS).catch(() => undefined);
  }, LEASE_RENEW_MS);
  return () => clearInterval(timer);
}

/** How long the HTTP call waits for the run workflow's dispatch outcome: preflight plus two gate calls. */
const outcomeWaitMs = (settings: DispatchSettings) => (2 * (settings.dispatchTimeoutSec + GATE_CALL_SLACK_SEC) + 15) * 1000;

type CandidateView = ReturnType<typeof candidateView>;
const candidateView = (item: QueueItemRow) => ({
  project_id: item.project_id,
  project_name: item.project_name,
  status: item.status,
  dispatch_priority: item.dispatch_priority,
  selection_rank: item.selection_rank,
  machine_target: item.machine_target,
  workload_class: item.workload_class,
  dispatch_failures: item.dispatch_failures,
  updated_at: item.updated_at,
});

/**
 * run_id has one-second resolution: after an attempt that ended within the same second (a failed dispatch), the next
 * attempt takes the following second. Racing calls within one second still share an id, so only one of them starts.
 */
async function freshRunId(store: Store, projectId: string): Promise<string> {
  let at = Date.now();
  while (await getRun(store, runIdFor(projectId, new Date(at)))) at += 1000;
  return runIdFor(projectId, new Date(at));
}

type Candidate = NonNullable<Awaited<ReturnType<typeof nextDispatchCandidate>>>;

/**
 * Lanes no call may dispatch to now: those another call holds a lease on, and those some live control-plane replica
 * has not configured (a worker target being added one replica at a time): any replica's worker may run the run's
 * activities, so a lane must be known to all of them first. `notEverywhere` names the latter, for the answer.
 */
async function unavailableLanes(store: Store, settings: DispatchSettings): Promise<{ all: Set<string>; notEverywhere: Set<string> }> {
  const [leased, notEverywhere] = await Promise.all([leasedLanes(store), lanesMissingOnSomeReplica(store, [...settings.routing.targets.keys()], REPLICA_LOST_AFTER_MS)]);
  return { all: new Set([...leased, ...notEverywhere]), notEverywhere };
}

const plural = (count: number, one: string, many: string) => `${count} ${count === 1 ? one : many}`;

/**
 * Why nothing was dispatched (docs/runs.md#runs, noop): an empty queue, items waiting for review, items no lane takes
 * (naming the lane they lack), each lane the queued items wait for and why it is not idle, and live dispatch off.
 */
async function noopReason(store: Store, settings: DispatchSettings, unavailable: { all: Set<string>; notEverywhere: Set<string> }): Promise<string> {
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
  for (const [lane, count] of waiting) {
    const why = busy.has(lane)
      ? ', which is busy with a run'
      : unavailable.notEverywhere.has(lane)
        ? `: not every control-plane replica has configured ${lane} yet`
        : ', which another dispatch call holds';
    reasons.push(`${plural(count, 'queued item waits', 'queued items wait')} for lane ${lane}${why}`);
  }
  return `no queued item is eligible on an idle lane: ${[...reasons, ...liveOff].join('; ')}`;
}

/**
 * The candidate of a live call, with its lane leased to this call (capabilities/runs/store/lane-leases.ts). A lane another call holds
 * is passed over for the next idle one. Once leased, the lane's first item is read again: the one seen before the
 * lease may have been dispatched (and even finished) by the call that held the lane meanwhile. Null when no idle lane
 * has an item.
 */
async function leaseCandidate(deps: DispatchDeps, first: Candidate | null): Promise<{ next: Candidate; holder: string } | null> {
  const { store, settings } = deps;
  const lanes = [...settings.routing.targets.keys()];
  const holder = randomUUID();
  const skip = new Set<string>();
  let seen = first;
  for (let tries = 0; seen && tries <= lanes.length; tries += 1) {
    const lane = seen.lane;
    if (await takeLaneLease(store, lane, holder, LANE_LEASE_TTL_MS)) {
      const fresh = await nextDispatchCandidate(store, settings.routing, new Set(lanes.filter((other) => other !== lane)));
      if (fresh) return { next: fresh, holder };
      await releaseLaneLease(store, lane, holder);
    }
    skip.add(lane);
    seen = await nextDispatchCandidate(store, settings.routing, new Set([...skip, ...(await unavailableLanes(store, settings)).all]));
  }
  return null;
}

/** What a dispatch-next call did: dispatched (or would have), or why not. */
export const DISPATCH_ACTIONS = ['dry_run_dispatch', 'live_dispatch', 'dispatch_blocked', 'paused', 'noop'] as const;
export type DispatchAction = (typeof DISPATCH_ACTIONS)[number];

/** What an action carries besides its reason: the candidate, its route and run, and the gate's answers. */
interface DispatchAnswerParts {
  candidate?: CandidateView | null;
  dispatch_route?: ReturnType<typeof dispatchRouteOf> | null;
  run_id?: string;
  workflow_id?: string;
  agent?: AgentSettings;
  preflight?: PreflightResult;
  prepare?: Record<string, unknown>;
  dispatch?: Record<string, unknown>;
}

/** A dispatch-next answer: the action and its reason, with what the action carries. */
export interface DispatchAnswer extends DispatchAnswerParts {
  ok: boolean;
  action: DispatchAction;
  reason: string;
  dry_run: boolean;
  live_dispatch_enabled: boolean;
  active_count: number;
}

type AnswerWith = (action: DispatchAction, reason: string, parts?: DispatchAnswerParts) => DispatchAnswer;

/** The answer builder of one call: every answer carries the call's dry_run and the active count it saw. */
async function answering(deps: DispatchDeps, body: DispatchNextRequest): Promise<{ answer: AnswerWith; flags: Awaited<ReturnType<typeof readFlags>> }> {
  const [flags, activeCount] = await Promise.all([readFlags(deps.store), countActiveItems(deps.store)]);
  const answer: AnswerWith = (action, reason, parts = {}) => ({
    ok: action === 'dry_run_dispatch' || action === 'live_dispatch',
    action,
    reason,
    dry_run: body.dry_run,
    live_dispatch_enabled: deps.settings.liveDispatchEnabled,
    active_count: activeCount,
    ...parts,
  });
  return { answer, flags };
}

/** What a live call has decided once it has a run to start: noted under its idempotency key before the start. */
interface ChosenRun {
  run: RunWorkflowInput;
  candidate: CandidateView;
  dispatch_route: ReturnType<typeof dispatchRouteOf>;
}

/** Dispatch-next: a dry run, or a live dispatch answered once the worker accepted the run or the attempt failed. */
export async function dispatchNext(deps: DispatchDeps, body: DispatchNextRequest): Promise<DispatchAnswer> {
  if (!body.dry_run) {
    if (!deps.settings.liveDispatchEnabled) throw new CommandRefusedError(501, 'live dispatch is disabled (live_dispatch_enabled is false)');
    if (deps.store.readOnly) throw new CommandRefusedError(501, 'the store is read-only (control_plane_store_backend is pg_readonly)');
  }
  if (body.dry_run || body.idempotency_key === undefined) return dispatchOnce(deps, body);
  return dispatchKeyed(deps, body, body.idempotency_key);
}

async function dispatchOnce(deps: DispatchDeps, body: DispatchNextRequest, beforeStart?: (chosen: ChosenRun) => Promise<void>): Promise<DispatchAnswer> {
  const { settings } = deps;
  const { answer, flags } = await answering(deps, body);
  if (flags.maintenance_mode) return answer('dispatch_blocked', 'maintenance mode is on', { candidate: null, dispatch_route: null });
  if (flags.queue_paused) return answer('paused', 'the queue is paused', { candidate: null, dispatch_route: null });

  const unavailable = await unavailableLanes(deps.store, settings);
  const first = await nextDispatchCandidate(deps.store, settings.routing, unavailable.all);
  // A dry run only looks; a live call leases the lane it will dispatch to (and may move on to another idle one).
  const leased = body.dry_run ? { next: first, holder: null } : await leaseCandidate(deps, first);
  const next = leased?.next;
  if (!next) return answer('noop', await noopReason(deps.store, settings, unavailable), { candidate: null, dispatch_route: null });
  const target = settings.routing.targets.get(next.lane)!;
  const candidate = candidateView(next.item);
  const route = dispatchRouteOf(target);

  const agent: AgentSettings = { mode: 'exec', ...settings.agent, ...body.agent };
  const { holder } = leased;
  if (holder === null) {
    const preflight = body.force_preflight ? await dispatchPreflight(deps, target, { cache: false }) : undefined;
    const reason = !settings.liveDispatchEnabled
      ? `would dispatch ${candidate.project_id} to ${target.name}, but live dispatch is disabled`
      : preflight && !preflight.ok
        ? `${candidate.project_id} would be blocked: preflight failed: ${preflight.summary}`
        : `would dispatch ${candidate.project_id} to ${target.name}`;
    return answer('dry_run_dispatch', reason, { candidate, dispatch_route: route, agent, ...(preflight ? { preflight } : {}) });
  }

  const chosen: ChosenRun = {
    run: {
      run_id: await freshRunId(deps.store, next.item.project_id),
      project_id: next.item.project_id,
      lane: target.name,
      requested_by: body.requested_by,
      agent,
      timings: runTimingsFrom(settings),
    },
    candidate,
    dispatch_route: route,
  };
  let started: StartedRun;
  const stopRenewing = keepLeased(deps.store, target.name, holder);
  try {
    await beforeStart?.(chosen);
    started = await deps.runs.startRun(chosen.run, outcomeWaitMs(settings));
  } finally {
    stopRenewing();
    await releaseLaneLease(deps.store, target.name, holder);
  }
  return answerStarted(answer, chosen, started);
}

/** The answer to a run's start: its dispatch outcome, or the refusal an HTTP caller gets for it. */
function answerStarted(answer: AnswerWith, chosen: ChosenRun, started: StartedRun): DispatchAnswer {
  const { run, candidate, dispatch_route } = chosen;
  if (!started.started) return answer('dispatch_blocked', `claim lost: ${started.reason}`, { candidate, dispatch_route });
  const outcome = started.outcome;
  const ids = { run_id: run.run_id, workflow_id: started.workflow_id };
  if (outcome === null) {
    throw new CommandRefusedError(504, { message: 'the run workflow did not report the worker\'s answer in time; it goes on, follow it by run_id', ...ids });
  }
  switch (outcome.action) {
    case 'live_dispatch':
      return answer('live_dispatch', `dispatched ${candidate.project_id} to ${dispatch_route.machine_target}`, {
        ...ids,
        candidate,
        dispatch_route,
        agent: run.agent,
        prepare: outcome.prepare,
        dispatch: outcome.dispatch,
      });
    case 'dispatch_blocked':
      return answer('dispatch_blocked', outcome.reason, { ...ids, candidate, dispatch_route, ...(outcome.preflight ? { preflight: outcome.preflight } : {}) });
    case 'dispatch_failed':
      throw new CommandRefusedError(502, {
        message: `${outcome.stage} failed: ${outcome.reason}`,
        stage: outcome.stage,
        status: outcome.status,
        queue_status: outcome.queue_status,
        ...ids,
      });
    case 'canceled':
      throw new CommandRefusedError(409, { message: outcome.reason, ...ids });
  }
}

const DISPATCH_KEY_SCOPE = 'dispatch-next';
/** How long a retry waits for the first call of its key to choose its run, before answering 409. */
const CHOICE_WAIT_MS = 5_000;
/**
 * Choosing takes milliseconds: a key claimed this long ago with no run noted belongs to a call whose process died
 * before it chose, and the next call with the key takes it over.
 */
const ABANDONED_CHOICE_MS = 60_000;

/**
 * A live call with an idempotency key (decisions §1): the same key with the same body answers the first call's
 * answer, a different body 409. The key is claimed before anything is chosen and, once the call has its run, the run
 * is noted under it before the workflow starts: a retry of a call whose connection dropped, or whose process died,
 * attaches to that run's workflow (starting it, if the first call died before it did) and answers its outcome, so a
 * key starts at most one run. A call that starts no run (noop, paused, maintenance) gives its key back.
 */
async function dispatchKeyed(deps: DispatchDeps, body: DispatchNextRequest, key: string): Promise<DispatchAnswer> {
  const { store } = deps;
  const { idempotency_key: _key, ...payload } = body;
  const claim = await claimOnceChosen(store, key, payload);
  if (claim.state === 'done') return replayAnswer(claim);
  if (claim.state === 'pending') {
    const chosen = claim.pending!;
    const { answer } = await answering(deps, body);
    return keyed(deps, key, async () => answerStarted(answer, chosen, await deps.runs.startRun(chosen.run, outcomeWaitMs(deps.settings), { attach: true })));
  }
  let noted = false;
  try {
    const result = await dispatchOnce(deps, body, async (chosen) => {
      await notePending(store, DISPATCH_KEY_SCOPE, key, chosen);
      noted = true;
    });
    if (noted) await completeKey(store, DISPATCH_KEY_SCOPE, key, { response: result, status_code: 200 });
    else await releaseKey(store, DISPATCH_KEY_SCOPE, key);
    return result;
  } catch (error) {
    if (noted) await settleKeyOnError(deps, key, error);
    else await releaseKey(store, DISPATCH_KEY_SCOPE, key).catch((releaseError: unknown) => logKeyError(deps, key, releaseError));
    throw error;
  }
}

/** Runs an attached call's answer and keeps it under the key. */
async function keyed(deps: DispatchDeps, key: string, run: () => Promise<DispatchAnswer>): Promise<DispatchAnswer> {
  try {
    const result = await run();
    await completeKey(deps.store, DISPATCH_KEY_SCOPE, key, { response: result, status_code: 200 });
    return result;
  } catch (error) {
    await settleKeyOnError(deps, key, error);
    throw error;
  }
}

/**
 * A refusal of a started run is the key's answer from now on. A 504 (the outcome did not come in time) or a failure
 * whose effect is unknown (Temporal unreachable mid-start) leaves the key pending, so its retry attaches to the run. A
 * run the ledger could not record (503) has closed for good, and attaching to it would answer its 503 again: the key is
 * given back, so its retry dispatches afresh once the ledger accepts again (the ledger, not the key, keeps an item the
 * failed run got as far as claiming from being dispatched twice). The caller is answered the call's own error whatever
 * becomes of the key.
 */
async function settleKeyOnError(deps: DispatchDeps, key: string, error: unknown): Promise<void> {
  try {
    if (error instanceof RunLedgerFailedError) await releaseKey(deps.store, DISPATCH_KEY_SCOPE, key);
    else if (error instanceof CommandRefusedError && error.status !== 504) {
      const kept: KeptRefusal = { detail: error.detail };
      await completeKey(deps.store, DISPATCH_KEY_SCOPE, key, { response: kept, status_code: error.status });
    }
  } catch (settleError) {
    logKeyError(deps, key, settleError);
  }
}

const logKeyError = (deps: DispatchDeps, key: string, error: unknown) =>
  (deps.log ?? console).error({ err: error, idempotency_key: key }, 'could not settle the dispatch idempotency key after a failed call');

/** The key's claim, waiting (briefly) while the first call with it is still choosing its run. */
async function claimOnceChosen(store: Store, key: string, payload: unknown): Promise<KeyClaim<ChosenRun, DispatchAnswer | KeptRefusal>> {
  const deadline = Date.now() + CHOICE_WAIT_MS;
  for (;;) {
    const claim = await claimKey<ChosenRun, DispatchAnswer | KeptRefusal>(store, { scope: DISPATCH_KEY_SCOPE, key, payload });
    if (claim.state !== 'pending' || claim.pending) return claim;
    if (claim.pending_for_ms > ABANDONED_CHOICE_MS) {
      await releaseAbandonedClaim(store, DISPATCH_KEY_SCOPE, key, ABANDONED_CHOICE_MS);
      continue;
    }
    if (Date.now() > deadline) throw new CommandRefusedError(409, `a dispatch with idempotency key '${key}' is still choosing its run; send it again`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

export type DispatchSelection =
  | { action: 'start'; reason: string; input: RunWorkflowInput; candidate: CandidateView; dispatch_route: ReturnType<typeof dispatchRouteOf> }
  | { action: 'noop' | 'dispatch_blocked' | 'paused'; reason: string };

/**
 * What a workflow dispatches, a research cycle or a queue pump tick (docs/automation.md#research-cycles, docs/automation.md#queue-pump): the same
 * checks and candidate as dispatch-next, and the run workflow's input, which the workflow starts as its child. It holds
 * no lane lease: the run's claim stays the only arbiter, so a workflow racing a dispatch-next call loses its claim
 * cleanly. It starts nothing, so a retry of it (its worker died) may simply choose again.
 */
export async function selectDispatch(deps: Pick<DispatchDeps, 'store' | 'settings'>, request: { requested_by: string; dry_run: boolean }): Promise<DispatchSelection> {
  const { store, settings } = deps;
  if (!settings.liveDispatchEnabled) return { action: 'dispatch_blocked', reason: 'live dispatch is disabled (live_dispatch_enabled is false)' };
  if (store.readOnly) return { action: 'dispatch_blocked', reason: 'the store is read-only (control_plane_store_backend is pg_readonly)' };
  const flags = await readFlags(store);
  if (flags.maintenance_mode) return { action: 'dispatch_blocked', reason: 'maintenance mode is on' };
  if (flags.queue_paused) return { action: 'paused', reason: 'the queue is paused' };
  const unavailable = await unavailableLanes(store, settings);
  const next = await nextDispatchCandidate(store, settings.routing, unavailable.all);
  if (!next) return { action: 'noop', reason: await noopReason(store, settings, unavailable) };
  const target = settings.routing.targets.get(next.lane)!;
  const runId = request.dry_run ? runIdFor(next.item.project_id, new Date()) : await freshRunId(store, next.item.project_id);
  return {
    action: 'start',
    reason: `${request.dry_run ? 'would dispatch' : 'dispatches'} ${next.item.project_id} to ${target.name}`,
    input: {
      run_id: runId,
      project_id: next.item.project_id,
      lane: target.name,
      requested_by: request.requested_by,
      agent: { mode: 'exec', ...settings.agent },
      timings: runTimingsFrom(settings),
    },
    candidate: candidateView(next.item),
    dispatch_route: dispatchRouteOf(target),
  };
}
