import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import { isRunFinished, workflowIdForRun } from '../domain/run-state.ts';
import { appendAuditEvent } from '../store/audit-events.ts';
import { applyRunTransition, getRun } from '../store/runs.ts';
import { listEventsForEntities, listProjectRuns } from '../store/project-reads.ts';
import { getProject, getQueueItem } from '../store/runtime-ledgers.ts';
import type { AppDeps } from './deps.ts';
import { HttpError } from './errors.ts';
import { queryInt } from './validation.ts';

/** Run commands (decisions §4 "Beyond interface.md"). */

const RunParams = z.strictObject({ run_id: z.string().min(1).max(200) });
const CancelBody = z
  .strictObject({
    requested_by: z.string().trim().min(1).max(200).default('operator'),
    reason: z.string().trim().min(1).max(2000).optional(),
  })
  .default({ requested_by: 'operator' });

const RunDetailQuery = z.strictObject({ event_limit: queryInt({ min: 1, max: 200, default: 50 }) });

/** How long the call waits for the workflow to record the cancellation before answering 202. */
const CANCEL_WAIT_MS = 15_000;

export async function runRoutes(app: FastifyInstance, deps: AppDeps): Promise<void> {
  /** One run with its transitions, its project, bounded events and where to see it in Temporal (decisions §4). */
  app.get('/control/api/v1/runs/:run_id', { schema: { params: RunParams, querystring: RunDetailQuery } }, async (request) => {
    const { run_id: runId } = request.params as z.output<typeof RunParams>;
    const query = request.query as z.output<typeof RunDetailQuery>;
    const run = await getRun(deps.store, runId);
    if (!run) throw new HttpError(404, `unknown run '${runId}'`);
    const [runs, project, events] = await Promise.all([
      listProjectRuns(deps.store, run.project_id),
      getProject(deps.store, run.project_id),
      listEventsForEntities(deps.store, [runId], query.event_limit),
    ]);
    return {
      run: runs.find((candidate) => candidate.run_id === runId) ?? { ...run, transitions: [] },
      project: project ?? null,
      papers: [],
      events,
      temporal: { workflow_id: run.workflow_id, ui_url: deps.runs?.workflowUiUrl(runId) ?? null },
    };
  });

  const snapshot = async (runId: string) => {
    const run = (await getRun(deps.store, runId))!;
    const item = await getQueueItem(deps.store, run.project_id);
    return { run_id: run.run_id, workflow_id: run.workflow_id, state: run.state, queue_status: item?.current_run_id === run.run_id ? item.status : null };
  };

  /**
   * Cancels the run's workflow, which marks the run and its item canceled. Idempotent: a finished run answers
   * `already_finished`. When Temporal no longer has the workflow, the ledgers are moved to canceled directly.
   */
  app.post('/control/api/runs/:run_id/cancel', { schema: { params: RunParams, body: CancelBody } }, async (request, reply) => {
    const { run_id: runId } = request.params as z.output<typeof RunParams>;
    const body = request.body as z.output<typeof CancelBody>;
    const run = await getRun(deps.store, runId);
    if (!run) throw new HttpError(404, `unknown run '${runId}'`);
    if (isRunFinished(run.state)) return { ok: true, already_finished: true, ...(await snapshot(runId)) };

    await deps.store.transaction((tx) =>
      appendAuditEvent(tx, {
        entity_type: 'run',
        entity_id: runId,
        event_type: 'run.cancel_requested',
        payload: { project_id: run.project_id, state: run.state, ...(body.reason ? { reason: body.reason } : {}) },
        idempotency_key: `${runId}:cancel_requested`,
        actor: body.requested_by,
        request_id: request.id,
      }),
    );
    const result = deps.runs ? await deps.runs.cancelRun(runId, CANCEL_WAIT_MS) : 'closed';
    if (result === 'pending') {
      return reply.code(202).send({ ok: true, cancel_requested: true, run_id: runId, workflow_id: workflowIdForRun(runId) });
    }
    if (result === 'closed') {
      // No workflow is left to record it (it closed without finishing the run, or Temporal lost it): record it here.
      await deps.store.transaction((tx) =>
        applyRunTransition(tx, { run_id: runId, transition: 'canceled', detail: { last_error: 'canceled by an operator' }, actor: body.requested_by }),
      );
    }
    const after = await snapshot(runId);
    return { ok: true, already_finished: false, canceled: after.state === 'canceled', ...after };
  });
}
