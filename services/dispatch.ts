import { dispatchRouteOf } from '../domain/lanes.ts';
import { runIdFor } from '../domain/run-state.ts';
import { countActiveItems, nextDispatchCandidate } from '../store/dispatch-candidates.ts';
import { readFlags } from '../store/flags.ts';
import type { QueueItemRow } from '../store/queue-items.ts';
import { getRun } from '../store/runs.ts';
import type { Store } from '../store/store.ts';
import type { RunTimings, RunWorkflowInput } from '../workflows/messages.ts';
import { CommandRefusedError } from './command-errors.ts';
import type { DispatchSettings } from './dispatch-settings.ts';
import type { RunLauncher } from './run-launcher.ts';
import { dispatchPreflight } from './worker-preflight.ts';

/**
 * `POST /control/dispatch-next` (README "Runs"). A dry run says what a live call
 * would dispatch and where, writing nothing. A live call checks, in order: enabled, maintenance, paused, a candidate;
 * then starts the run workflow, which claims, preflights, prepares and dispatches, and answers once the worker
 * accepted the run or the attempt failed.
 */

export interface DispatchNextRequest {
  dry_run: boolean;
  requested_by: string;
  force_preflight: boolean;
}

export interface DispatchDeps {
  store: Store;
  settings: DispatchSettings;
  runs: RunLauncher;
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

/** How long the HTTP call waits for the run workflow's dispatch outcome: preflight plus two gate calls. */
const outcomeWaitMs = (settings: DispatchSettings) => (2 * (settings.dispatchTimeoutSec + GATE_CALL_SLACK_SEC) + 15) * 1000;

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

/** Dispatch-next: a dry run, or a live dispatch answered once the worker accepted the run or the attempt failed. */
export async function dispatchNext(deps: DispatchDeps, body: DispatchNextRequest) {
  const { settings } = deps;
  if (!body.dry_run) {
    if (!settings.liveDispatchEnabled) throw new CommandRefusedError(501, 'live dispatch is disabled (live_dispatch_enabled is false)');
    if (deps.store.readOnly) throw new CommandRefusedError(501, 'the store is read-only (control_plane_store_backend is pg_readonly)');
  }

  const [flags, activeCount] = await Promise.all([readFlags(deps.store), countActiveItems(deps.store)]);
  const answer = (action: string, reason: string, extra: Record<string, unknown> = {}) => ({
    ok: action === 'dry_run_dispatch' || action === 'live_dispatch',
    action,
    reason,
    dry_run: body.dry_run,
    live_dispatch_enabled: settings.liveDispatchEnabled,
    active_count: activeCount,
    ...extra,
  });
  if (flags.maintenance_mode) return answer('dispatch_blocked', 'maintenance mode is on', { candidate: null, dispatch_route: null });
  if (flags.queue_paused) return answer('paused', 'the queue is paused', { candidate: null, dispatch_route: null });

  const next = await nextDispatchCandidate(deps.store, settings.routing);
  if (!next) {
    const reason = settings.routing.targets.size > 0 ? 'no queued item is eligible on an idle lane' : 'no worker target is configured';
    return answer('noop', reason, { candidate: null, dispatch_route: null });
  }
  const target = settings.routing.targets.get(next.lane)!;
  const candidate = candidateView(next.item);
  const route = dispatchRouteOf(target);

  if (body.dry_run) {
    const preflight = body.force_preflight ? await dispatchPreflight(deps, target, { cache: false }) : undefined;
    const reason = !settings.liveDispatchEnabled
      ? `would dispatch ${candidate.project_id} to ${target.name}, but live dispatch is disabled`
      : preflight && !preflight.ok
        ? `${candidate.project_id} would be blocked: preflight failed: ${preflight.summary}`
        : `would dispatch ${candidate.project_id} to ${target.name}`;
    return answer('dry_run_dispatch', reason, { candidate, dispatch_route: route, ...(preflight ? { preflight } : {}) });
  }

  const runId = await freshRunId(deps.store, next.item.project_id);
  const input: RunWorkflowInput = {
    run_id: runId,
    project_id: next.item.project_id,
    lane: target.name,
    requested_by: body.requested_by,
    agent: { mode: 'exec', model: '', reasoning_effort: 'medium', sandbox: '' },
    timings: runTimingsFrom(settings),
  };
  const started = await deps.runs.startRun(input, outcomeWaitMs(settings));
  if (!started.started) return answer('dispatch_blocked', `claim lost: ${started.reason}`, { candidate, dispatch_route: route });
  const outcome = started.outcome;
  const ids = { run_id: runId, workflow_id: started.workflow_id };
  if (outcome === null) {
    throw new CommandRefusedError(504, { message: 'the run workflow did not report the worker\'s answer in time; it goes on, follow it by run_id', ...ids });
  }
  switch (outcome.action) {
    case 'live_dispatch':
      return answer('live_dispatch', `dispatched ${candidate.project_id} to ${target.name}`, {
        ...ids,
        candidate,
        dispatch_route: route,
        prepare: outcome.prepare,
        dispatch: outcome.dispatch,
      });
    case 'dispatch_blocked':
      return answer('dispatch_blocked', outcome.reason, { ...ids, candidate, dispatch_route: route, ...(outcome.preflight ? { preflight: outcome.preflight } : {}) });
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
