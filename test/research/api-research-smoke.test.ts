import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../support/app.ts';
import { jsonClient, tableCounts as ledgerCounts } from '../support/ledgers.ts';

// A database of its own: the smoke batch reads whatever sources are stored, so it starts from an empty ledger.
let t: TestApp;
beforeAll(async () => {
  t = await startTestApp();
});
afterAll(async () => t.close());

const tableCounts = () => ledgerCounts(t.store);
const post = (url: string, payload: unknown) => jsonClient(t).post(url, payload);

describe('generate-batch (smoke batch)', () => {
  it('builds up to three candidates from the starter sources on a dry run without writing', async () => {
    const before = await tableCounts();
    const { status, body } = await post('/control/api/research/generate-batch', { requested_by: 'operator@test' });
    expect(status).toBe(200);
    expect(body).toMatchObject({ dry_run: true, starter_sources: true, counts: { admitted: 1, 'needs-review': 2, rejected: 0, merged: 0 } });
    expect(body.results).toHaveLength(3);
    expect(await tableCounts()).toEqual(before);
  });

  it('writes only Research Facility ledgers live, with queue_admitted false, and merges when run again', async () => {
    const before = await tableCounts();
    const first = await post('/control/api/research/generate-batch', { requested_by: 'operator@test', dry_run: false, count: 2 });
    expect(first.status).toBe(200);
    expect(first.body.results).toHaveLength(2);
    const after = await tableCounts();
    for (const table of ['ideas', 'projects', 'queue_items'] as const) expect(after[table]).toBe(before[table]);
    expect(after.research_candidates).toBe(before.research_candidates! + 2);
    expect(after.research_sources).toBeGreaterThan(before.research_sources!);
    const ids = first.body.results.map((r: any) => r.candidate_id);
    const flags = await t.store.query<{ queue_admitted: boolean }>('SELECT queue_admitted FROM research_candidates WHERE candidate_id = ANY($1)', [ids]);
    expect(flags.rows.every((row) => row.queue_admitted === false)).toBe(true);

    const second = await post('/control/api/research/generate-batch', { requested_by: 'operator@test', dry_run: false, count: 2 });
    expect(second.body.starter_sources).toBe(false);
    const decisionsBefore = first.body.results.map((r: any) => r.decision);
    expect(second.body.results.map((r: any) => r.decision)).toEqual(decisionsBefore.map((d: string) => (d === 'rejected' ? 'rejected' : 'merged')));
  });
});

