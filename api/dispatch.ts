import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import { dispatchPreflight } from '../activities/preflight.ts';
import { dispatchRouteOf } from '../domain/lanes.ts';
import { runIdFor } from '../domain/run-state.ts';
import { countActiveItems, nextDispatchCandidate } from '../store/dispatch-candidates.ts';
import { readFlags } from '../store/flags.ts';
import type { QueueItemRow } from '../store/runtime-ledgers.ts';
import { getRun } from '../store/runs.ts';
import type { RunTimings, RunWorkflowInput } from '../workflows/messages.ts';
import type { AppDeps, DispatchSettings } from './deps.ts';
import { HttpError } from './errors.ts';

/**
 * `POST /control/dispatch-next` (interface.md "Queue operations", decisions §4). A dry run says what a live call
 * would dispatch and where, writing nothing. A live call checks, in order: enabled, maintenance, paused, a candidate;
 * then starts the run workflow, which claims, preflights, prepares and dispatches, and answers once the worker
 * accepted the run or the attempt failed.
 */

const DispatchNextBody = z.strictObject({
  dry_run: z.boolean().default(true),
  requested_by: z.string().trim().min(1).max(200),
  force_preflight: z.boolean().default(false),
});

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
async function freshRunId(deps: AppDeps, projectId: string): Promise<string> {
  let at = Date.now();
  while (await getRun(deps.store, runIdFor(projectId, new Date(at)))) at += 1000;
  return runIdFor(projectId, new Date(at));
}

export async function dispatchRoutes(app: FastifyInstance, deps: AppDeps): Promise<void> {
  app.post('/control/dispatch-next', { schema: { body: DispatchNextBody } }, async (request, reply) => {
    const body = request.body as z.output<typeof DispatchNextBody>;
    const settings = deps.dispatch;
    if (!body.dry_run) {
      if (!settings?.liveDispatchEnabled) throw new HttpError(501, 'live dispatch is disabled (live_dispatch_enabled is false)');
      if (deps.store.readOnly) throw new HttpError(501, 'the store is read-only (control_plane_store_backend is pg_readonly)');
      if (!deps.runs) throw new HttpError(501, 'live dispatch needs the Temporal worker, which this process does not run');
    }

    const [flags, activeCount] = await Promise.all([readFlags(deps.store), countActiveItems(deps.store)]);
    const answer = (action: string, reason: string, extra: Record<string, unknown> = {}) => ({
      ok: action === 'dry_run_dispatch' || action === 'live_dispatch',
      action,
      reason,
      dry_run: body.dry_run,
      live_dispatch_enabled: settings?.liveDispatchEnabled ?? false,
      active_count: activeCount,
      ...extra,
    });
    if (flags.maintenance_mode) return answer('dispatch_blocked', 'maintenance mode is on', { candidate: null, dispatch_route: null });
    if (flags.queue_paused) return answer('paused', 'the queue is paused', { candidate: null, dispatch_route: null });

    const next = settings ? await nextDispatchCandidate(deps.store, settings.routing) : null;
    if (!settings || !next) {
      const reason = settings && settings.routing.targets.size > 0 ? 'no queued item is eligible on an idle lane' : 'no worker target is configured';
      return answer('noop', reason, { candidate: null, dispatch_route: null });
    }
    const target = settings.routing.targets.get(next.lane)!;
    const candidate = candidateView(next.item);
    const route = dispatchRouteOf(target);

    if (body.dry_run) {
      const preflight = body.force_preflight ? await dispatchPreflight({ store: deps.store, settings }, target, { cache: false }) : undefined;
      const reason = !settings.liveDispatchEnabled
        ? `would dispatch ${candidate.project_id} to ${target.name}, but live dispatch is disabled`
        : preflight && !preflight.ok
          ? `${candidate.project_id} would be blocked: preflight failed: ${preflight.summary}`
          : `would dispatch ${candidate.project_id} to ${target.name}`;
      return answer('dry_run_dispatch', reason, { candidate, dispatch_route: route, ...(preflight ? { preflight } : {}) });
    }

    const runId = await freshRunId(deps, next.item.project_id);
    const input: RunWorkflowInput = {
      run_id: runId,
      project_id: next.item.project_id,
      lane: target.name,
      requested_by: body.requested_by,
      agent: { mode: 'exec', model: '', reasoning_effort: 'medium', sandbox: '' },
      timings: runTimingsFrom(settings),
    };
    const started = await deps.runs!.startRun(input, outcomeWaitMs(settings));
    if (!started.started) return answer('dispatch_blocked', `claim lost: ${started.reason}`, { candidate, dispatch_route: route });
    const outcome = started.outcome;
    const ids = { run_id: runId, workflow_id: started.workflow_id };
    if (outcome === null) {
      throw new HttpError(504, { message: 'the run workflow did not report the worker\'s answer in time; it goes on, follow it by run_id', ...ids });
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
        return reply.code(502).send({
          detail: { message: `${outcome.stage} failed: ${outcome.reason}`, stage: outcome.stage, status: outcome.status, queue_status: outcome.queue_status, ...ids },
        });
      case 'canceled':
        throw new HttpError(409, { message: outcome.reason, ...ids });
    }
  });
}
