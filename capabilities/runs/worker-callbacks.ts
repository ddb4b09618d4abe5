import { isRunFinished } from './domain/run-state.ts';
import { readRunEvidence, type WorkerCallback } from '../../worker-gate/contract/callback-body.ts';
import { payloadHash } from '../../platform/http/payload-hash.ts';
import { IdempotencyConflictError } from '../../platform/store/idempotency-keys.ts';
import { getQueueItem } from './queue-items.ts';
import { getRun } from './run-ledger.ts';
import type { Queryable, Store } from '../../platform/store/store.ts';
import { getWorkerCallback, insertWorkerCallback, markCallbackSignaled, type CallbackResponse, type StoredCallback } from './store/callback-ledger.ts';
import type { RunCallback } from '../../workflows/runs/run-messages.ts';
import { CommandRefusedError } from '../../platform/command-errors.ts';
import type { RunLauncher } from './run-launcher.ts';

/**
 * Receiving a worker gate's completion callback (`POST /control/api/worker-callback`, docs/runs.md#runs). A callback is
 * stored by its idempotency key first, then delivered to its run workflow as a signal. Redelivery of the same callback answers the first answer (seen_at and
 * delivered_at may differ); the same key with another payload is 409. A callback for a run that is not its item's
 * current run, or one that has finished, is recorded and answered `ignored`, changing nothing.
 */

export interface CallbackReceiverDeps {
  store: Store;
  runs: RunLauncher;
  /** Where a callback that could not be signalled is reported. */
  log: { warn(detail: object, message: string): void; error(detail: object, message: string): void };
}

/** The payload the dedupe compares: the body without the two timestamps that change on every redelivery. */
function dedupeHash(body: WorkerCallback): string {
  const { seen_at: _seen, delivered_at: _delivered, ...rest } = body;
  return payloadHash(rest);
}

async function ignoreReasonFor(q: Queryable, body: WorkerCallback): Promise<string | null> {
  const run = await getRun(q, body.run_id);
  if (!run) return `unknown run '${body.run_id}'`;
  if (run.project_id !== body.project_id) return `run ${body.run_id} belongs to project ${run.project_id}, not ${body.project_id}`;
  const item = await getQueueItem(q, run.project_id);
  if (item?.current_run_id !== run.run_id) return `stale run: ${run.run_id} is not the current run of ${run.project_id}`;
  if (isRunFinished(run.state)) return `run ${run.run_id} has already finished (${run.state})`;
  return null;
}

const signalOf = (body: WorkerCallback): RunCallback => ({
  idempotency_key: body.idempotency_key,
  event_type: body.event_type,
  session_id: body.session_id,
  gate_state: body.gate_state,
  reason: body.reason,
  seen_at: body.seen_at,
  question: body.question ?? null,
  ...(body.question_detail ? { question_detail: body.question_detail } : {}),
  ...(body.event_type === 'usage_limited' ? { usage_limit: { resets_at: body.cause?.resets_at ?? null, resumes_at: body.resumes_at ?? null, holds_slot: body.holds_slot ?? true } } : {}),
  evidence: readRunEvidence(body.evidence),
});

/** Stores the callback by its idempotency key, then signals it to its run workflow; answers what was stored. */
function answerStored(stored: StoredCallback, hash: string): StoredCallback {
  if (stored.payload_hash !== hash) throw new IdempotencyConflictError(stored.idempotency_key);
  return stored;
}

/** The stored callback for this body: the one already there, or a new one classified now. */
async function storeOnce(store: Store, body: WorkerCallback, hash: string): Promise<StoredCallback> {
  const existing = await getWorkerCallback(store, body.idempotency_key);
  if (existing) return answerStored(existing, hash);
  return store.transaction(async (tx) => {
    const reason = await ignoreReasonFor(tx, body);
    const response: CallbackResponse = {
      ok: true,
      idempotency_key: body.idempotency_key,
      run_id: body.run_id,
      event_type: body.event_type,
      ignored: reason !== null,
      ...(reason !== null ? { ignore_reason: reason } : {}),
    };
    const inserted = await insertWorkerCallback(tx, {
      idempotency_key: body.idempotency_key,
      payload_hash: hash,
      run_id: body.run_id,
      project_id: body.project_id,
      event_type: body.event_type,
      payload: body,
      response,
    });
    // A concurrent delivery of the same key got there first: answer what it stored.
    if (!inserted) return answerStored((await getWorkerCallback(tx, body.idempotency_key))!, hash);
    return { idempotency_key: body.idempotency_key, payload_hash: hash, run_id: body.run_id, ignored: response.ignored, response, signaled_at: null };
  });
}

/** Stores the callback by its idempotency key, then signals it to its run workflow; answers what was stored. */
export async function receiveWorkerCallback(deps: CallbackReceiverDeps, body: WorkerCallback): Promise<CallbackResponse> {
  const stored = await storeOnce(deps.store, body, dedupeHash(body));
  if (stored.ignored || stored.signaled_at !== null) return stored.response;
  try {
    const delivered = await deps.runs.deliverCallback(stored.run_id, signalOf(body));
    if (delivered === 'delivered') await markCallbackSignaled(deps.store, stored.idempotency_key);
    else deps.log.warn({ run_id: stored.run_id, idempotency_key: stored.idempotency_key }, 'callback for a run whose workflow has closed');
  } catch (error) {
    deps.log.error({ err: error, run_id: stored.run_id }, 'could not signal the run workflow');
    throw new CommandRefusedError(503, 'the callback is stored, but the run workflow could not be reached; deliver it again later');
  }
  return stored.response;
}
