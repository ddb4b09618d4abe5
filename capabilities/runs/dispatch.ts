import { dispatchRouteOf } from './domain/worker-lanes.ts';
import { runIdFor } from './domain/run-state.ts';
import { countActiveItems } from './dispatch-candidates.ts';
import { nextPlacedCandidate, type PlacedCandidate } from './run-placements.ts';
import { answerStarted, candidateView, placementView, type AnswerWith, type CandidateView, type ChosenRun, type DispatchAnswer } from './dispatch-answer.ts';
import { keepLeased, leaseCandidate, unavailableLanes, type CandidateSearch } from './dispatch-lanes.ts';
import { placeChosen } from './dispatch-choice.ts';
import { noopReason } from './dispatch-noop-reason.ts';
import { readFlags } from './queue-flags.ts';
import { releaseLaneLease } from './store/lane-leases.ts';
import { getRun } from './run-ledger.ts';
import { claimKey, completeKey, notePending, releaseAbandonedClaim, releaseKey, type KeyClaim } from '../../platform/store/idempotency-keys.ts';
import type { Store } from '../../platform/store/store.ts';
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
  /** The item to dispatch instead of the next in dispatch order (capabilities/runs/dispatch-choice.ts). */
  project_id?: string | undefined;
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
    ...(settings.questionWaitSec === undefined ? {} : { question_wait_sec: settings.questionWaitSec }),
  };
}

/** How long the HTTP call waits for the run workflow's dispatch outcome: preflight plus two gate calls. */
const outcomeWaitMs = (settings: DispatchSettings) => (2 * (settings.dispatchTimeoutSec + GATE_CALL_SLACK_SEC) + 15) * 1000;

/**
 * run_id has one-second resolution: after an attempt that ended within the same second (a failed dispatch), the next
 * attempt takes the following second. Racing calls within one second still share an id, so only one of them starts.
 */
async function freshRunId(store: Store, projectId: string): Promise<string> {
  let at = Date.now();
  while (await getRun(store, runIdFor(projectId, new Date(at)))) at += 1000;
  return runIdFor(projectId, new Date(at));
}

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

/** The lane a chosen item goes to, with its GPUs and CPUs where it was placed on some (docs/runs.md#slots-and-gpus). */
function whereTo({ lane, placement }: PlacedCandidate): string {
  const gpus = placement.gpu_indices && placement.gpu_indices.length > 0 ? ` on GPU${placement.gpu_indices.length === 1 ? '' : 's'} ${placement.gpu_indices.join(', ')}` : '';
  const cpus = placement.cpu_count === null ? '' : `, pinned to ${placement.cpu_count} CPU${placement.cpu_count === 1 ? '' : 's'}`;
  return `${lane}${gpus}${cpus}`;
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
  const projectId = body.project_id;
  const search: CandidateSearch = projectId === undefined ? (skip) => nextPlacedCandidate(deps, skip) : (skip) => placeChosen(deps, projectId, skip);
  const first = await search(unavailable.all);
  // A dry run only looks; a live call leases the lane it will dispatch to (and may move on to another idle one).
  const leased = body.dry_run ? { next: first.next, holder: null } : await leaseCandidate(deps, first.next, search);
  const next = leased?.next;
  if (!next) {
    // A chosen item is looked at again: a live call may have lost its lane to another call since the first look.
    const reason =
      projectId === undefined
        ? await noopReason(deps.store, settings, unavailable, first.refusals)
        : ((await search(unavailable.all)).reason ?? `another dispatch call held ${projectId}'s lane; try again`);
    return answer('noop', reason, { candidate: null, dispatch_route: null });
  }
  const target = settings.routing.lanes.get(next.lane)!;
  const candidate = candidateView(next.item);
  const route = dispatchRouteOf(target);
  const placement = placementView(next.placement);

  const agent: AgentSettings = { mode: 'exec', ...settings.agent, ...body.agent };
  const { holder } = leased;
  if (holder === null) {
    const preflight = body.force_preflight ? await dispatchPreflight(deps, target, { cache: false }) : undefined;
    const reason = !settings.liveDispatchEnabled
      ? `would dispatch ${candidate.project_id} to ${whereTo(next)}, but live dispatch is disabled`
      : preflight && !preflight.ok
        ? `${candidate.project_id} would be blocked: preflight failed: ${preflight.summary}`
        : `would dispatch ${candidate.project_id} to ${whereTo(next)}`;
    return answer('dry_run_dispatch', reason, { candidate, dispatch_route: route, placement, agent, ...(preflight ? { preflight } : {}) });
  }

  const chosen: ChosenRun = {
    run: {
      run_id: await freshRunId(deps.store, next.item.project_id),
      project_id: next.item.project_id,
      lane: target.lane,
      requested_by: body.requested_by,
      agent,
      timings: runTimingsFrom(settings),
    },
    candidate,
    dispatch_route: route,
  };
  let started: StartedRun;
  const stopRenewing = keepLeased(deps.store, target.lane, holder);
  try {
    await beforeStart?.(chosen);
    started = await deps.runs.startRun(chosen.run, outcomeWaitMs(settings));
  } finally {
    stopRenewing();
    await releaseLaneLease(deps.store, target.lane, holder);
  }
  return answerStarted(answer, chosen, started);
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
  const { next, refusals } = await nextPlacedCandidate(deps, unavailable.all);
  if (!next) return { action: 'noop', reason: await noopReason(store, settings, unavailable, refusals) };
  const target = settings.routing.lanes.get(next.lane)!;
  const runId = request.dry_run ? runIdFor(next.item.project_id, new Date()) : await freshRunId(store, next.item.project_id);
  return {
    action: 'start',
    reason: `${request.dry_run ? 'would dispatch' : 'dispatches'} ${next.item.project_id} to ${whereTo(next)}`,
    input: {
      run_id: runId,
      project_id: next.item.project_id,
      lane: target.lane,
      requested_by: request.requested_by,
      agent: { mode: 'exec', ...settings.agent },
      timings: runTimingsFrom(settings),
    },
    candidate: candidateView(next.item),
    dispatch_route: dispatchRouteOf(target),
  };
}
