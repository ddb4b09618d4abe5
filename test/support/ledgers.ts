import type { Store } from '../../platform/store/store.ts';
import type { TestApp } from './app.ts';

/** Every table a Research Facility command may write, for "a dry run writes nothing" checks. */
export const LEDGER_TABLES = [
  'research_sources',
  'research_candidates',
  'research_admissions',
  'research_lineage',
  'ideas',
  'projects',
  'queue_items',
  'audit_events',
  'idempotency_keys',
  'provider_requests',
] as const;

export async function tableCounts(store: Store): Promise<Record<(typeof LEDGER_TABLES)[number], number>> {
  const counts = {} as Record<(typeof LEDGER_TABLES)[number], number>;
  for (const table of LEDGER_TABLES) {
    const { rows } = await store.query<{ n: number }>(`SELECT count(*)::int AS n FROM ${table}`);
    counts[table] = rows[0]!.n;
  }
  return counts;
}

/** A worker callback stored as the callback route stores one, received `agoSec` seconds ago. */
export async function seedWorkerCallback(
  store: Store,
  callback: { key: string; runId: string; projectId: string; eventType: string; agoSec: number; payload?: Record<string, unknown>; ignoreReason?: string | null },
): Promise<void> {
  await store.query(
    `INSERT INTO worker_callbacks (idempotency_key, payload_hash, run_id, project_id, event_type, payload, ignored, ignore_reason,
                                   response, received_at)
     VALUES ($1, 'hash', $2, $3, $4, $5::jsonb, $6, $7, '{"ok":true}'::jsonb, clock_timestamp() - make_interval(secs => $8))`,
    [
      callback.key,
      callback.runId,
      callback.projectId,
      callback.eventType,
      JSON.stringify(callback.payload ?? {}),
      callback.ignoreReason != null,
      callback.ignoreReason ?? null,
      callback.agoSec,
    ],
  );
}

/** JSON over `app.inject` with the test token. */
export function jsonClient(t: TestApp) {
  const send = async (method: 'GET' | 'POST', url: string, payload?: unknown) => {
    const response = await t.app.inject({ method, url, headers: t.auth, ...(payload === undefined ? {} : { payload: payload as Record<string, unknown> }) });
    return { status: response.statusCode, body: response.json() as Record<string, any> };
  };
  return { get: (url: string) => send('GET', url), post: (url: string, payload: unknown) => send('POST', url, payload) };
}
