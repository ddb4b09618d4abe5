import { appendAuditEvent } from '../../platform/store/audit-events.ts';
import { runIdempotent } from '../../platform/store/idempotency-keys.ts';
import type { Queryable, Store } from '../../platform/store/store.ts';
import { CommandRefusedError } from '../../platform/command-errors.ts';
import { getRun, transitionCount } from './run-ledger.ts';
import type { RunLauncher } from './run-launcher.ts';

/**
 * Resuming a run that waits out the model's usage limit before its time (docs/runs.md#waiting-out-a-usage-limit):
 * recorded once per key, then signalled to the run, whose workflow asks the gate to resume the session now.
 */

export interface ResumeRunRequest {
  run_id: string;
  requested_by: string;
  idempotency_key: string;
  note?: string | undefined;
  request_id?: string | undefined;
}

export interface ResumeRunResult {
  ok: true;
  run_id: string;
  /** Which of the run's usage limits this resumes: the n-th limit is n. */
  limit_number: number;
  /** When the run would have resumed by itself. */
  resumes_at: string;
  /** True when this key had asked before: the first result is returned, and the request was sent to the run again. */
  replayed: boolean;
}

/**
 * Records the operator's request to resume the run now, then signals it to the run's workflow. 404 for an unknown run;
 * 409 for a run that waits out no usage limit (naming its state) or whose workflow has ended. The same key with the
 * same payload gets the first result (and signals it again: the workflow takes each limit's request once); with
 * another payload, 409.
 */
export async function resumeRun(deps: { store: Store; runs: RunLauncher }, request: ResumeRunRequest): Promise<ResumeRunResult> {
  const { store } = deps;
  if (!(await getRun(store, request.run_id))) throw new CommandRefusedError(404, `unknown run '${request.run_id}'`);
  const recorded = await store.transaction((tx) =>
    runIdempotent(tx, { scope: `run-resume:${request.run_id}`, key: request.idempotency_key, payload: { note: request.note ?? null } }, () => recordResume(tx, request)),
  );
  const delivered = await deps.runs.deliverResumeNow(request.run_id, { limit_number: recorded.response.limit_number, requested_by: request.requested_by });
  if (delivered === 'closed') {
    throw new CommandRefusedError(409, `run '${request.run_id}': its workflow has ended, so it cannot be resumed; requeue its item to start afresh`);
  }
  return { ...recorded.response, replayed: recorded.replayed };
}

async function recordResume(tx: Queryable, request: ResumeRunRequest): Promise<Omit<ResumeRunResult, 'replayed'>> {
  const run = await getRun(tx, request.run_id, { forUpdate: true });
  if (!run) throw new CommandRefusedError(404, `unknown run '${request.run_id}'`);
  if (run.state !== 'usage_limited' || !run.usage_limit) {
    throw new CommandRefusedError(409, `run '${run.run_id}' is ${run.state}: it waits out no usage limit, so there is nothing to resume`);
  }
  // Each usage limit the run hit is one `usage_limited` transition.
  const limitNumber = await transitionCount(tx, run.run_id, 'usage_limited');
  await appendAuditEvent(tx, {
    entity_type: 'run',
    entity_id: run.run_id,
    event_type: 'run.resume_requested',
    payload: { project_id: run.project_id, limit_number: limitNumber, resumes_at: run.usage_limit.resumes_at, ...(request.note ? { note: request.note } : {}) },
    idempotency_key: `${run.run_id}:resume:${limitNumber}`,
    actor: request.requested_by,
    request_id: request.request_id ?? null,
  });
  return { ok: true, run_id: run.run_id, limit_number: limitNumber, resumes_at: run.usage_limit.resumes_at };
}
