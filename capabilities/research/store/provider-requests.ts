import type { ProviderRequestOutcome } from '../domain/provider-budget.ts';
import type { Queryable } from '../../../platform/store/store.ts';

/** The provider_requests ledger (migration 0012): one row per request sent to the research provider. */

export interface ProviderRequestInsert {
  purpose: string;
  batch_id: string;
  model: string;
  requested_by: string;
  call: ProviderRequestOutcome;
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
