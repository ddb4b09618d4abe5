import type { Store } from '../../store/store.ts';
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

/** JSON over `app.inject` with the test token. */
export function jsonClient(t: TestApp) {
  const send = async (method: 'GET' | 'POST', url: string, payload?: unknown) => {
    const response = await t.app.inject({ method, url, headers: t.auth, ...(payload === undefined ? {} : { payload: payload as Record<string, unknown> }) });
    return { status: response.statusCode, body: response.json() as Record<string, any> };
  };
  return { get: (url: string) => send('GET', url), post: (url: string, payload: unknown) => send('POST', url, payload) };
}
