import { isRunFinished, workflowIdForRun } from './domain/run-state.ts';
import { appendAuditEvent } from '../../platform/store/audit-events.ts';
import { listPapersOf } from '../papers/paper-ledger.ts';
import { listEventsForEntities, getRunWithTransitions } from '../console/project-reads.ts';
import { getProject } from './projects.ts';
import { getQueueItem } from './queue-items.ts';
import { getRunSummary } from './run-reads.ts';
import { applyRunTransition, getRun } from './run-ledger.ts';
import type { Store } from '../../platform/store/store.ts';
import { listRunCallbacks } from './store/callback-ledger.ts';
import { listRunAnswers } from './run-answers.ts';
import { permissionEffect } from './domain/agent-answer.ts';
import { CommandRefusedError } from '../../platform/command-errors.ts';
import type { DispatchSettings } from './dispatch-settings.ts';
import type { RunLauncher } from './run-launcher.ts';
import { stopOnGate, type GateStopOutcome } from './run-gate-stop.ts';

/** Reading one run and cancelling it (docs/runs.md#runs). */

export interface RunServiceDeps {
  store: Store;
  runs: RunLauncher;
  /** The worker targets: a cancel of a finished run still asks its gate to stop what it tracks. */
  dispatch?: DispatchSettings;
}

export interface CancelRunRequest {
  run_id: string;
  requested_by: string;
  reason?: string | undefined;
  request_id?: string | undefined;
}

/** How long a cancel waits for the workflow to record the cancellation before answering `pending`. */
const CANCEL_WAIT_MS = 15_000;

async function requireRun(store: Store, runId: string) {
  const run = await getRun(store, runId);
  if (!run) throw new CommandRefusedError(404, `unknown run '${runId}'`);
  return run;
}

/** Most worker callbacks a run's detail lists, newest first. */
export const RUN_CALLBACK_LIMIT = 50;

/** One run with its transitions, its worker callbacks, its project, bounded events and where to see it in Temporal. */
export async function runDetail(deps: RunServiceDeps, runId: string, eventLimit: number) {
  const run = await requireRun(deps.store, runId);
  const [withTransitions, summary, callbacks, project, papers, events, answers] = await Promise.all([
    getRunWithTransitions(deps.store, runId),
    getRunSummary(deps.store, runId),
    listRunCallbacks(deps.store, runId, RUN_CALLBACK_LIMIT),
    getProject(deps.store, run.project_id),
    listPapersOf(deps.store, { run_id: runId }),
    listEventsForEntities(deps.store, [runId], eventLimit),
    listRunAnswers(deps.store, runId),
  ]);
  return {
    run: { ...(withTransitions ?? { ...run, transitions: [] }), token_usage: summary?.token_usage ?? null, cause: summary?.cause ?? null },
    // A finished run is not canceled (cancel answers already_finished): what a client offers depends on it.
    finished: isRunFinished(run.state),
    permission_effect: run.state === 'question_pending' && run.question_detail?.kind === 'permission' ? permissionEffect(run.question_detail.tool_name, run.question_detail.tool_input) : null,
    answers,
    callbacks,
    project: project ?? null,
    papers,
    events,
    temporal: { workflow_id: run.workflow_id, ui_url: deps.runs.workflowUiUrl(runId) },
  };
}

async function snapshot(store: Store, runId: string) {
  const run = (await getRun(store, runId))!;
  const item = await getQueueItem(store, run.project_id);
  return { run_id: run.run_id, workflow_id: run.workflow_id, state: run.state, queue_status: item?.current_run_id === run.run_id ? item.status : null };
}

export type CancelRunResult =
  | ({ ok: true; already_finished: boolean; canceled?: boolean; gate?: GateStopOutcome } & Awaited<ReturnType<typeof snapshot>>)
  | { ok: true; cancel_requested: true; pending: true; run_id: string; workflow_id: string };

/**
 * Cancels the run's workflow, which marks the run and its item canceled. Idempotent: a finished run answers
 * `already_finished`, after asking its worker gate to stop what it still tracks of the run (`gate`). When Temporal no
 * longer has the workflow, the ledgers are moved to canceled directly.
 */
export async function cancelRun(deps: RunServiceDeps, request: CancelRunRequest): Promise<CancelRunResult> {
  const { store } = deps;
  const runId = request.run_id;
  const run = await requireRun(store, runId);
  if (isRunFinished(run.state)) {
    // Finished here, yet its agent may still run on the worker (the gate reported an error or a timeout): stop it there.
    const gate = deps.dispatch ? await stopOnGate(deps.dispatch, run) : undefined;
    if (gate && gate.stopped.length > 0) {
      await store.transaction((tx) =>
        appendAuditEvent(tx, {
          entity_type: 'run',
          entity_id: runId,
          event_type: 'run.worker_processes_stopped',
          payload: { project_id: run.project_id, state: run.state, stopped: gate.stopped, ...(request.reason ? { reason: request.reason } : {}) },
          idempotency_key: null,
          actor: request.requested_by,
          request_id: request.request_id ?? null,
        }),
      );
    }
    return { ok: true, already_finished: true, ...(await snapshot(store, runId)), ...(gate ? { gate } : {}) };
  }

  await store.transaction((tx) =>
    appendAuditEvent(tx, {
      entity_type: 'run',
      entity_id: runId,
      event_type: 'run.cancel_requested',
      payload: { project_id: run.project_id, state: run.state, ...(request.reason ? { reason: request.reason } : {}) },
      idempotency_key: `${runId}:cancel_requested`,
      actor: request.requested_by,
      request_id: request.request_id ?? null,
    }),
  );
  const result = await deps.runs.cancelRun(runId, CANCEL_WAIT_MS);
  if (result === 'pending') return { ok: true, cancel_requested: true, pending: true, run_id: runId, workflow_id: workflowIdForRun(runId) };
  if (result === 'closed') {
    // No workflow is left to record it (it closed without finishing the run, or Temporal lost it): record it here.
    await store.transaction((tx) =>
      applyRunTransition(tx, { run_id: runId, transition: 'canceled', detail: { last_error: 'canceled by an operator' }, actor: request.requested_by }),
    );
  }
  const after = await snapshot(store, runId);
  return { ok: true, already_finished: false, canceled: after.state === 'canceled', ...after };
}
