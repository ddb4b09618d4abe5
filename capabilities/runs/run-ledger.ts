import {
  decisionRelation,
  FLAGGING_TRANSITIONS,
  isRunFinished,
  MAX_CONSECUTIVE_DISPATCH_FAILURES,
  TRANSITION_RULES,
  type RunState,
  type RunTransition,
} from './domain/run-state.ts';
import type { QueueStatus } from './domain/queue-status.ts';
import type { AgentQuestion } from '../../worker-gate/contract/agent-question.ts';
import type { UsageLimitWait } from '../../worker-gate/contract/usage-limit.ts';
import type { WorkloadClass } from '../../worker-gate/contract/workload.ts';
import { appendAuditEvent } from '../../platform/store/audit-events.ts';
import { callbackCause } from './store/callback-ledger.ts';
import { readFlags } from './queue-flags.ts';
import { getQueueItem, QUEUE_ITEM_COLUMNS, type QueueItemRow } from './queue-items.ts';
import { recordLineage } from '../research/research-lineage.ts';
import type { Queryable } from '../../platform/store/store.ts';

/**
 * The run ledger. A run is created when its workflow claims the item; every later change is a named transition
 * (capabilities/runs/domain/run-state.ts) that moves the run row and the item's queue row together with one audit event, at most once
 * per (run_id, transition): a retried activity finds its transition recorded and changes nothing.
 */

export interface RunRow {
  run_id: string;
  project_id: string;
  workflow_id: string;
  state: RunState;
  lane: string;
  wake_gate_url: string;
  workload_class: WorkloadClass;
  requested_by: string;
  session_id: string | null;
  question: string | null;
  /** The waiting question's choices, or the tool call a permission request is for (worker-gate/contract/agent-question.ts). */
  question_detail: AgentQuestion | null;
  /** While the run waits out the model's usage limit: when it resets and when the run resumes (docs/runs.md#waiting-out-a-usage-limit). */
  usage_limit: UsageLimitWait | null;
  decision: string | null;
  decision_summary: string | null;
  evidence: Record<string, unknown> | null;
  prepare_result: Record<string, unknown> | null;
  dispatch_result: Record<string, unknown> | null;
  last_error: string | null;
  finished_at: string | null;
  /** The GPUs the run was placed on ([]: none visible to it); null when it was not pinned (docs/runs.md#slots-and-gpus). */
  gpu_indices: number[] | null;
  /** The CPUs its gate pins it to; null: not pinned. */
  cpu_count: number | null;
  created_at: string;
  updated_at: string;
}

export const RUN_COLUMNS =
  'run_id, project_id, workflow_id, state, lane, wake_gate_url, workload_class, requested_by, session_id, question, question_detail, usage_limit, ' +
  'decision, decision_summary, evidence, prepare_result, dispatch_result, last_error, finished_at, gpu_indices, cpu_count, created_at, updated_at';

export async function getRun(q: Queryable, runId: string, options: { forUpdate?: boolean } = {}): Promise<RunRow | undefined> {
  const result = await q.query<RunRow>(
    `SELECT ${RUN_COLUMNS} FROM runs WHERE run_id = $1${options.forUpdate ? ' FOR UPDATE' : ''}`,
    [runId],
  );
  return result.rows[0];
}

// ---------------------------------------------------------------------------------------------------------------
// Claim

export interface ClaimRequest {
  run_id: string;
  workflow_id: string;
  project_id: string;
  lane: string;
  wake_gate_url: string;
  requested_by: string;
}

export type ClaimResult =
  | { claimed: true; run: RunRow; queue_item: QueueItemRow }
  | { claimed: false; reason: string };

export class LaneBusyError extends Error {
  readonly lane: string;

  constructor(lane: string) {
    super(`lane ${lane} already has an active item`);
    this.lane = lane;
    this.name = 'LaneBusyError';
  }
}

const isUniqueViolation = (error: unknown, constraint: string) =>
  (error as { code?: string }).code === '23505' && String((error as { constraint?: string }).constraint ?? (error as Error).message).includes(constraint);

/**
 * Claims a queued item for a run: the item moves to dispatching on the run's lane and the run row is created, with
 * its transition and audit event. Claiming again for the same run answers the first claim. Throws LaneBusyError when
 * the database's one-active-row-per-lane index refuses the claim (the transaction is then unusable: roll it back).
 */
export async function claimQueueItem(tx: Queryable, request: ClaimRequest): Promise<ClaimResult> {
  const item = await getQueueItem(tx, request.project_id, { forUpdate: true });
  if (!item) return { claimed: false, reason: `unknown project '${request.project_id}'` };
  const existing = await getRun(tx, request.run_id);
  if (existing) return { claimed: true, run: existing, queue_item: item };
  if (item.status !== 'queued') return { claimed: false, reason: `item ${item.project_id} is ${item.status}, not queued` };
  if (item.manual_review_required) return { claimed: false, reason: `item ${item.project_id} is flagged for manual review` };
  // Read again here, in the claim's own transaction: a pause that landed after the caller checked the flags (a pump
  // tick, a dispatch-next in flight) still stops the run from starting.
  const flags = await readFlags(tx);
  if (flags.maintenance_mode) return { claimed: false, reason: 'maintenance mode is on' };
  if (flags.queue_paused) return { claimed: false, reason: 'the queue is paused' };

  let claimed: QueueItemRow;
  try {
    const updated = await tx.query<QueueItemRow>(
      `UPDATE queue_items SET status = 'dispatching', lane = $2, current_run_id = $3, last_run_state = 'dispatching',
              last_error = NULL, next_action_hint = NULL
        WHERE project_id = $1 AND status = 'queued' RETURNING ${QUEUE_ITEM_COLUMNS}`,
      [request.project_id, request.lane, request.run_id],
    );
    claimed = updated.rows[0]!;
  } catch (error) {
    if (isUniqueViolation(error, 'queue_items_one_active_per_lane')) throw new LaneBusyError(request.lane);
    throw error;
  }
  const inserted = await tx.query<RunRow>(
    `INSERT INTO runs (run_id, project_id, workflow_id, state, lane, wake_gate_url, workload_class, requested_by)
     VALUES ($1, $2, $3, 'dispatching', $4, $5, $6, $7) RETURNING ${RUN_COLUMNS}`,
    [request.run_id, request.project_id, request.workflow_id, request.lane, request.wake_gate_url, item.workload_class, request.requested_by],
  );
  const run = inserted.rows[0]!;
  const event = await appendAuditEvent(tx, {
    entity_type: 'run',
    entity_id: run.run_id,
    event_type: 'run.claimed',
    payload: { project_id: run.project_id, lane: run.lane, workflow_id: run.workflow_id, to_state: 'dispatching', queue_status: 'dispatching' },
    idempotency_key: `${run.run_id}:claimed`,
    actor: request.requested_by,
  });
  await tx.query(
    `INSERT INTO run_transitions (run_id, transition, from_state, to_state, queue_status, audit_event_id)
     VALUES ($1, 'claimed', NULL, 'dispatching', 'dispatching', $2)`,
    [run.run_id, event.id],
  );
  await recordLineage(tx, { from_kind: 'project', from_id: run.project_id, to_kind: 'run', to_id: run.run_id, relation: 'ran' });
  return { claimed: true, run, queue_item: claimed };
}

/**
 * Records where on its worker a just-claimed run goes (docs/runs.md#slots-and-gpus), with its audit event, in the
 * claim's transaction.
 */
export async function recordRunPlacement(
  tx: Queryable,
  run: RunRow,
  placement: { gpu_indices: number[] | null; cpu_count: number | null; reason: string },
  actor: string,
): Promise<RunRow> {
  const updated = await tx.query<RunRow>(`UPDATE runs SET gpu_indices = $2, cpu_count = $3 WHERE run_id = $1 RETURNING ${RUN_COLUMNS}`, [
    run.run_id,
    placement.gpu_indices,
    placement.cpu_count,
  ]);
  await appendAuditEvent(tx, {
    entity_type: 'run',
    entity_id: run.run_id,
    event_type: 'run.placed',
    payload: { project_id: run.project_id, lane: run.lane, gpu_indices: placement.gpu_indices, cpu_count: placement.cpu_count, reason: placement.reason },
    idempotency_key: `${run.run_id}:placed`,
    actor,
  });
  return updated.rows[0]!;
}

// ---------------------------------------------------------------------------------------------------------------
// Transitions

export interface TransitionDetail {
  /** For wake_received: the wake event (wake_ready or session_finished_ready), which becomes the run state. */
  run_state?: RunState;
  last_error?: string;
  session_id?: string | null;
  question?: string | null;
  /** With a question: its choices, or the tool call a permission request is for. */
  question_detail?: Record<string, unknown> | null;
  decision?: string | null;
  decision_summary?: string | null;
  evidence?: Record<string, unknown> | null;
  prepare_result?: Record<string, unknown>;
  dispatch_result?: Record<string, unknown>;
  /** The answered question is cleared from the run. */
  clears_question?: boolean;
  /** With usage_limited: the limit the run waits out; null clears it (the session resumed). */
  usage_limit?: UsageLimitWait | null;
  /** Anything else worth keeping in the audit event (the callback key, the failing stage). */
  audit?: Record<string, unknown>;
}

export interface TransitionRequest {
  run_id: string;
  transition: RunTransition;
  /** Which occurrence of a repeatable transition this is (the second question of a run is 2); 1 when absent. */
  occurrence?: number;
  detail?: TransitionDetail;
  actor?: string;
}

/** How many times the run went through `transition` (a repeatable one: each question, each usage limit). */
export async function transitionCount(q: Queryable, runId: string, transition: RunTransition): Promise<number> {
  const result = await q.query<{ n: number }>('SELECT count(*)::int AS n FROM run_transitions WHERE run_id = $1 AND transition = $2', [runId, transition]);
  return result.rows[0]?.n ?? 0;
}

/** A transition for a run the ledger does not have (a workflow canceled before its claim). */
export class UnknownRunError extends Error {
  readonly runId: string;

  constructor(runId: string) {
    super(`unknown run '${runId}'`);
    this.runId = runId;
    this.name = 'UnknownRunError';
  }
}

export interface TransitionResult {
  /** False when the transition was already applied (a retry) or does not apply to the run's state. */
  applied: boolean;
  reason?: string;
  run: RunRow;
  queue_item: QueueItemRow | null;
}

/** While the model's usage limit holds: the run keeps its lane (a long wait lets it go), and its session resumes by itself. */
const usageLimitHint = (wait: UsageLimitWait) =>
  `the model's usage limit was hit: the run resumes by itself at ${wait.resumes_at}${wait.holds_slot === false ? ' (its lane is free meanwhile, and taken back then)' : ''}, or now with POST /control/api/v1/runs/{run_id}/resume (rcp runs resume)`;

/** While the agent waits on its question: the run keeps its lane, and the answer resumes its session. */
const QUESTION_WAITING_HINT = 'answer the agent\'s question (POST /control/api/v1/runs/{run_id}/answer, or rcp runs answer)';

const NEXT_ACTION_HINTS: Partial<Record<QueueStatus, string>> = {
  needs_review: 'the agent\'s question went unanswered: requeue to start afresh, or cancel',
  blocked: 'inspect the run on its worker, then requeue or cancel',
  dispatch_error: 'fix the worker or the item, then requeue',
  queued: 'waiting for dispatch',
};

function nextActionHint(transition: RunTransition, status: QueueStatus, detail: TransitionDetail): string | null {
  if (transition === 'question_asked') return QUESTION_WAITING_HINT;
  if (transition === 'usage_limited' && detail.usage_limit) return usageLimitHint(detail.usage_limit);
  return NEXT_ACTION_HINTS[status] ?? null;
}

function nextQueueStatus(transition: RunTransition, item: QueueItemRow, detail: TransitionDetail): { status: QueueStatus; failures: number } | null {
  const rule = TRANSITION_RULES[transition];
  if (rule.queueStatus === null) return null;
  // A long usage-limit wait lets the lane go: the item leaves the lane's statuses until the run takes it back.
  if (transition === 'usage_limited' && detail.usage_limit?.holds_slot === false) return { status: 'usage_limited', failures: item.dispatch_failures };
  if (transition === 'dispatch_failed') {
    const failures = item.dispatch_failures + 1;
    return { status: failures >= MAX_CONSECUTIVE_DISPATCH_FAILURES ? 'dispatch_error' : 'queued', failures };
  }
  return { status: rule.queueStatus, failures: transition === 'worker_accepted' ? 0 : item.dispatch_failures };
}

/**
 * Applies one transition: run row, queue row (when the run is still the item's current run) and the audit event
 * `run.<transition>`, in the caller's transaction. Idempotent by (run_id, transition).
 */
export async function applyRunTransition(tx: Queryable, request: TransitionRequest): Promise<TransitionResult> {
  const run = await getRun(tx, request.run_id, { forUpdate: true });
  if (!run) throw new UnknownRunError(request.run_id);
  const item = await getQueueItem(tx, run.project_id, { forUpdate: true });
  const current = item && item.current_run_id === run.run_id ? item : null;
  const occurrence = request.occurrence ?? 1;
  const done = await tx.query('SELECT 1 FROM run_transitions WHERE run_id = $1 AND transition = $2 AND occurrence = $3', [run.run_id, request.transition, occurrence]);
  if (done.rows.length > 0) return { applied: false, reason: 'already applied', run, queue_item: item ?? null };
  const rule = TRANSITION_RULES[request.transition];
  if (!rule.from.includes(run.state)) {
    return { applied: false, reason: `run ${run.run_id} is ${run.state}; ${request.transition} does not apply`, run, queue_item: item ?? null };
  }

  const detail = request.detail ?? {};
  const toState = rule.runState ?? detail.run_state ?? run.state;
  const updatedRun = await updateRun(tx, run, toState, detail);
  const queue = current ? nextQueueStatus(request.transition, current, detail) : null;
  const updatedItem = current && queue ? await updateQueueItem(tx, current, updatedRun, queue, request.transition, detail) : item ?? null;

  // A transition a worker's callback caused records why the run ended as the worker told it.
  const cause = typeof detail.audit?.callback === 'string' ? await callbackCause(tx, detail.audit.callback) : null;
  const event = await appendAuditEvent(tx, {
    entity_type: 'run',
    entity_id: run.run_id,
    event_type: `run.${request.transition}`,
    payload: {
      project_id: run.project_id,
      from_state: run.state,
      to_state: toState,
      queue_status: queue?.status ?? null,
      ...(detail.last_error ? { error: detail.last_error } : {}),
      ...(detail.decision !== undefined ? { decision: detail.decision } : {}),
      ...(detail.audit ?? {}),
      ...(cause ? { cause } : {}),
    },
    // The first occurrence keeps the key every transition had before transitions could repeat.
    idempotency_key: occurrence === 1 ? `${run.run_id}:${request.transition}` : `${run.run_id}:${request.transition}:${occurrence}`,
    actor: request.actor ?? 'run-workflow',
  });
  await tx.query(
    `INSERT INTO run_transitions (run_id, transition, occurrence, from_state, to_state, queue_status, audit_event_id)
     VALUES ($1, $2, $3, $4, $5, $6, $7)`,
    [run.run_id, request.transition, occurrence, run.state, toState, queue?.status ?? null, event.id],
  );
  if (request.transition === 'reconciling') {
    const relation = decisionRelation(detail.decision ?? null);
    if (relation) {
      await recordLineage(tx, { from_kind: 'project', from_id: run.project_id, to_kind: 'decision', to_id: `${run.run_id}:decision`, relation });
    }
  }
  return { applied: true, run: updatedRun, queue_item: updatedItem };
}

async function updateRun(tx: Queryable, run: RunRow, toState: RunState, detail: TransitionDetail): Promise<RunRow> {
  const result = await tx.query<RunRow>(
    `UPDATE runs SET state = $2,
            session_id = COALESCE($3, session_id),
            question = CASE WHEN $12 THEN $4 ELSE COALESCE($4, question) END,
            question_detail = CASE WHEN $12 THEN $13::jsonb ELSE COALESCE($13::jsonb, question_detail) END,
            usage_limit = CASE WHEN $14 THEN $15::jsonb ELSE usage_limit END,
            decision = COALESCE($5, decision),
            decision_summary = COALESCE($6, decision_summary),
            evidence = COALESCE($7::jsonb, evidence),
            prepare_result = COALESCE($8::jsonb, prepare_result),
            dispatch_result = COALESCE($9::jsonb, dispatch_result),
            last_error = COALESCE($10, last_error),
            finished_at = CASE WHEN $11 THEN clock_timestamp() ELSE finished_at END
      WHERE run_id = $1 RETURNING ${RUN_COLUMNS}`,
    [
      run.run_id,
      toState,
      detail.session_id ?? null,
      detail.question ?? null,
      detail.decision ?? null,
      detail.decision_summary ?? null,
      detail.evidence ? JSON.stringify(detail.evidence) : null,
      detail.prepare_result ? JSON.stringify(detail.prepare_result) : null,
      detail.dispatch_result ? JSON.stringify(detail.dispatch_result) : null,
      detail.last_error ?? null,
      isRunFinished(toState),
      // An answer clears the question it answered: the run's detail shows only a question still waiting.
      transitionClearsQuestion(detail),
      detail.question_detail ? JSON.stringify(detail.question_detail) : null,
      detail.usage_limit !== undefined,
      detail.usage_limit ? JSON.stringify(detail.usage_limit) : null,
    ],
  );
  return result.rows[0]!;
}

const transitionClearsQuestion = (detail: TransitionDetail): boolean => detail.clears_question === true;

async function updateQueueItem(
  tx: Queryable,
  item: QueueItemRow,
  run: RunRow,
  queue: { status: QueueStatus; failures: number },
  transition: RunTransition,
  detail: TransitionDetail,
): Promise<QueueItemRow> {
  const result = await tx.query<QueueItemRow>(
    `UPDATE queue_items SET status = $2, last_run_state = $3, dispatch_failures = $4,
            manual_review_required = CASE WHEN $8 THEN false ELSE manual_review_required OR $5 END,
            last_error = CASE WHEN $6::text IS NOT NULL THEN $6 WHEN $2 = 'completed' THEN NULL ELSE last_error END,
            next_action_hint = $7
      WHERE project_id = $1 RETURNING ${QUEUE_ITEM_COLUMNS}`,
    [
      item.project_id,
      queue.status,
      run.state,
      queue.failures,
      FLAGGING_TRANSITIONS.has(transition),
      detail.last_error ?? null,
      nextActionHint(transition, queue.status, detail),
      transition === 'answered',
    ],
  );
  return result.rows[0]!;
}
