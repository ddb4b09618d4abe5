import type { Queryable } from '../../../platform/store/store.ts';

/** Completion callbacks as the gate delivered them, stored by idempotency key before anything acts on them. */

export interface CallbackResponse {
  ok: true;
  idempotency_key: string;
  run_id: string;
  event_type: string;
  ignored: boolean;
  ignore_reason?: string;
}

export interface StoredCallback {
  idempotency_key: string;
  payload_hash: string;
  run_id: string;
  ignored: boolean;
  response: CallbackResponse;
  signaled_at: string | null;
}

export interface CallbackInsert {
  idempotency_key: string;
  payload_hash: string;
  run_id: string;
  project_id: string;
  event_type: string;
  payload: Record<string, unknown>;
  response: CallbackResponse;
}

const COLUMNS = 'idempotency_key, payload_hash, run_id, ignored, response, signaled_at';

export async function getWorkerCallback(q: Queryable, key: string): Promise<StoredCallback | undefined> {
  const result = await q.query<StoredCallback>(`SELECT ${COLUMNS} FROM worker_callbacks WHERE idempotency_key = $1`, [key]);
  return result.rows[0];
}

/** Stores a callback; false when a callback with this key is already stored (then nothing is written). */
export async function insertWorkerCallback(q: Queryable, callback: CallbackInsert): Promise<boolean> {
  const result = await q.query(
    `INSERT INTO worker_callbacks (idempotency_key, payload_hash, run_id, project_id, event_type, payload, ignored, ignore_reason, response)
     VALUES ($1, $2, $3, $4, $5, $6::jsonb, $7, $8, $9::jsonb)
     ON CONFLICT (idempotency_key) DO NOTHING RETURNING idempotency_key`,
    [
      callback.idempotency_key,
      callback.payload_hash,
      callback.run_id,
      callback.project_id,
      callback.event_type,
      JSON.stringify(callback.payload),
      callback.response.ignored,
      callback.response.ignore_reason ?? null,
      JSON.stringify(callback.response),
    ],
  );
  return result.rows.length > 0;
}

export async function markCallbackSignaled(q: Queryable, key: string): Promise<void> {
  await q.query('UPDATE worker_callbacks SET signaled_at = clock_timestamp() WHERE idempotency_key = $1 AND signaled_at IS NULL', [key]);
}

/**
 * A run's token usage: what its newest callback that carried one reported (callbacks carry the agent's running total).
 * `runs` names the run's row in the query this is part of; served by worker_callbacks_run.
 */
export const RUN_TOKEN_USAGE_SQL = `(SELECT wc.payload -> 'token_usage' FROM worker_callbacks wc
  WHERE wc.run_id = runs.run_id AND jsonb_typeof(wc.payload -> 'token_usage') = 'object'
  ORDER BY wc.received_at DESC LIMIT 1) AS token_usage`;

/** Why a run ended: what its newest callback that carried a cause reported. `runs` names the run's row, as above. */
export const RUN_CAUSE_SQL = `(SELECT wc.payload -> 'cause' FROM worker_callbacks wc
  WHERE wc.run_id = runs.run_id AND jsonb_typeof(wc.payload -> 'cause') = 'object'
  ORDER BY wc.received_at DESC LIMIT 1) AS cause`;

/** The cause one stored callback carried; null when it carried none. */
export async function callbackCause(q: Queryable, key: string): Promise<Record<string, unknown> | null> {
  const result = await q.query<{ cause: Record<string, unknown> | null }>(
    `SELECT payload -> 'cause' AS cause FROM worker_callbacks WHERE idempotency_key = $1 AND jsonb_typeof(payload -> 'cause') = 'object'`,
    [key],
  );
  return result.rows[0]?.cause ?? null;
}

/** A callback as a run's detail lists it: what the worker reported, without the stored telemetry and response. */
export interface RunCallbackRow {
  idempotency_key: string;
  event_type: string;
  gate_state: string | null;
  reason: string | null;
  ignored: boolean;
  ignore_reason: string | null;
  received_at: string;
}

/** The newest `limit` callbacks the worker sent for one run, newest first (served by worker_callbacks_run). */
export async function listRunCallbacks(q: Queryable, runId: string, limit: number): Promise<RunCallbackRow[]> {
  const result = await q.query<RunCallbackRow>(
    `SELECT idempotency_key, event_type, payload ->> 'gate_state' AS gate_state, payload ->> 'reason' AS reason,
            ignored, ignore_reason, received_at
       FROM worker_callbacks WHERE run_id = $1 ORDER BY received_at DESC LIMIT $2`,
    [runId, limit],
  );
  return result.rows;
}
