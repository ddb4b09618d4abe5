import type { ProviderRequestOutcome } from '../domain/provider-budget.ts';
import type { Queryable } from './store.ts';

/** The provider_requests ledger (migration 0012): one row per request sent to the research provider. */

export interface ProviderRequestInsert {
  purpose: string;
  batch_id: string;
  model: string;
  requested_by: string;
  call: ProviderRequestOutcome;
}

export interface ProviderRequestRow {
  request_id: number;
  purpose: string;
  batch_id: string;
  model: string;
  outcome: ProviderRequestOutcome['outcome'];
  http_status: number | null;
  duration_ms: number;
  prompt_tokens: number | null;
  completion_tokens: number | null;
  total_tokens: number | null;
  cost: number | null;
  detail: string;
  requested_by: string;
  requested_at: string;
}

export async function recordProviderRequest(q: Queryable, input: ProviderRequestInsert): Promise<number> {
  const { call } = input;
  const result = await q.query<{ request_id: number }>(
    `INSERT INTO provider_requests (purpose, batch_id, model, outcome, http_status, duration_ms, prompt_tokens, completion_tokens,
                                    total_tokens, cost, detail, requested_by)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12) RETURNING request_id`,
    [
      input.purpose,
      input.batch_id,
      input.model,
      call.outcome,
      call.http_status,
      call.duration_ms,
      call.prompt_tokens,
      call.completion_tokens,
      call.total_tokens,
      call.cost,
      call.detail,
      input.requested_by,
    ],
  );
  return Number(result.rows[0]!.request_id);
}

/** Requests sent in the last 24 hours (failed ones too: the provider may have counted them). */
export async function providerRequestsLastDay(q: Queryable): Promise<number> {
  const result = await q.query<{ n: string }>(`SELECT count(*) AS n FROM provider_requests WHERE requested_at > now() - interval '24 hours'`);
  return Number(result.rows[0]!.n);
}

export async function listProviderRequests(q: Queryable, limit: number): Promise<ProviderRequestRow[]> {
  const result = await q.query<ProviderRequestRow & { cost: string | null; request_id: string }>(
    `SELECT request_id, purpose, batch_id, model, outcome, http_status, duration_ms, prompt_tokens, completion_tokens, total_tokens,
            cost, detail, requested_by, to_char(requested_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') AS requested_at
       FROM provider_requests ORDER BY request_id DESC LIMIT $1`,
    [limit],
  );
  return result.rows.map((row) => ({ ...row, request_id: Number(row.request_id), cost: row.cost === null ? null : Number(row.cost) }));
}
