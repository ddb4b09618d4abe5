import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../support/app.ts';
import { jsonClient, tableCounts as ledgerCounts } from '../support/ledgers.ts';
import { candidate } from '../support/research.ts';

let t: TestApp;
beforeAll(async () => {
  t = await startTestApp();
});
afterAll(async () => t.close());

const tableCounts = () => ledgerCounts(t.store);
const post = (url: string, payload: unknown) => jsonClient(t).post(url, payload);
const get = (url: string) => jsonClient(t).get(url);

const importBody = (candidates: Record<string, unknown>[], extra: Record<string, unknown> = {}) => ({
  candidates,
  requested_by: 'operator@test',
  ...extra,
});

describe('import-candidates', () => {
  it('answers per-candidate score, decision and reasons on a dry run and writes nothing', async () => {
    const before = await tableCounts();
    const { status, body } = await post('/control/api/research/import-candidates', importBody([
      candidate(),
      candidate({ dedupe_key: 'needs-review-one', novelty: 5 }),
      candidate({ dedupe_key: 'missing-kill', kill_condition: undefined }),
    ]));
    expect(status).toBe(200);
    expect(body).toMatchObject({ ok: true, dry_run: true, counts: { admitted: 1, 'needs-review': 1, rejected: 1, merged: 0 } });
    expect(body.results[0]).toMatchObject({ decision: 'admitted', score: 72, candidate_id: null });
    expect(body.results[1].decision).toBe('needs-review');
    expect(body.results[2].reasons.join(' ')).toMatch(/kill_condition/);
    expect(await tableCounts()).toEqual(before);
  });

  it('records every decision as an admission row, keeps data-level rejects out of the candidate ledger, and lists candidates', async () => {
    const { status, body } = await post('/control/api/research/import-candidates', importBody([
      candidate(),
      candidate({ dedupe_key: 'sparse-attention-laptop', title: 'The same key again' }),
      candidate({ dedupe_key: 'ungrounded-fresh', generation_mode: 'fresh_grounded' }),
      candidate({ dedupe_key: 'low-score', novelty: 1, feasibility: 2 }),
    ], { dry_run: false, batch_id: 'batch-one' }));
    expect(status).toBe(200);
    expect(body.results.map((r: any) => r.decision)).toEqual(['admitted', 'rejected', 'rejected', 'rejected']);
    expect(body.results[1].reasons.join(' ')).toMatch(/earlier in this batch/);
    expect(body.results[2]).toMatchObject({ stored: false, candidate_id: null });
    expect(body.written).toMatchObject({ candidates: 3, admissions: 4 });

    const admissions = await t.store.query<{ decision: string; candidate_id: string | null }>(
      `SELECT decision, candidate_id FROM research_admissions WHERE batch_id = 'batch-one' ORDER BY admission_id`,
    );
    expect(admissions.rows.map((row) => row.decision)).toEqual(['admitted', 'rejected', 'rejected', 'rejected']);
    expect(admissions.rows[2]!.candidate_id).toBeNull();

    const admitted = await get('/control/api/research/candidates?decision=admitted');
    expect(admitted.body).toMatchObject({ page: 1, page_size: 50, total: 1, has_more: false });
    expect(admitted.body.items[0]).toMatchObject({ dedupe_key: 'sparse-attention-laptop', decision: 'admitted' });
    const searched = await get('/control/api/research/candidates?search=LOW-SCORE');
    expect(searched.body.items.map((c: any) => c.dedupe_key)).toEqual(['low-score']);
    const paged = await get('/control/api/research/candidates?page=2&page_size=2');
    expect(paged.body).toMatchObject({ page: 2, page_size: 2, total: 3, has_more: false });
    expect(paged.body.items).toHaveLength(1);

    const detail = await get(`/control/api/research/candidates/${body.results[0].candidate_id}`);
    expect(detail.body.admissions[0]).toMatchObject({ decision: 'admitted' });
    // The admission keeps how the planner made up the score, as the batch answered it.
    expect(body.results[0].breakdown).toMatchObject({ weighted: expect.any(Number), score: body.results[0].score });
    expect(detail.body.admissions[0].score_breakdown).toEqual(body.results[0].breakdown);
    const events = await t.store.query(`SELECT 1 FROM audit_events WHERE event_type = 'research.candidate_decided'`);
    expect(events.rowCount).toBe(4);
  });

  it('merges a candidate with the dedupe key of an admitted one', async () => {
    const { body } = await post('/control/api/research/import-candidates', importBody([candidate({ title: 'Resubmitted' })], { dry_run: false }));
    const admitted = await get('/control/api/research/candidates?decision=admitted');
    expect(body.results[0]).toMatchObject({ decision: 'merged', merged_into: admitted.body.items[0].candidate_id });
  });

  it('stores sources that come with a batch and refuses references to unknown ones with 422', async () => {
    const grounded = candidate({ dedupe_key: 'grounded-one', generation_mode: 'fresh_grounded', source_ids: ['src-known'] });
    const ok = await post('/control/api/research/import-candidates', importBody([grounded], {
      dry_run: false,
      sources: [{ source_id: 'src-known', kind: 'paper', title: 'A paper', url: 'https://example.org/paper' }],
    }));
    expect(ok.status).toBe(200);
    expect(ok.body.results[0].stored).toBe(true);
    const lineage = await t.store.query(`SELECT 1 FROM research_lineage WHERE from_kind = 'source' AND from_id = 'src-known'`);
    expect(lineage.rowCount).toBe(1);

    const unknown = await post('/control/api/research/import-candidates', importBody([candidate({ dedupe_key: 'x-unknown', source_ids: ['src-missing'] })]));
    expect(unknown.status).toBe(422);
    expect(unknown.body.detail[0]).toMatchObject({ loc: ['body', 'candidates', 0, 'source_ids'] });
  });

  it('replays a live import with the same idempotency key and refuses a different batch under it', async () => {
    const body = importBody([candidate({ dedupe_key: 'idempotent-import', hypothesis: 'A one-off hypothesis about cache eviction under LLM serving load at home.', mechanism: 'Evict by predicted reuse distance instead of recency.' })], {
      dry_run: false,
      idempotency_key: 'import-1',
    });
    const first = await post('/control/api/research/import-candidates', body);
    const before = await tableCounts();
    const replay = await post('/control/api/research/import-candidates', body);
    expect(replay).toEqual(first);
    expect(await tableCounts()).toEqual(before);
    const conflict = await post('/control/api/research/import-candidates', { ...body, requested_by: 'someone-else' });
    expect(conflict.status).toBe(409);
  });

  it('rejects malformed bodies with 422 naming the field', async () => {
    const cases: [unknown, unknown[]][] = [
      [importBody([candidate({ surprise: 1 })]), ['body', 'candidates', 0, 'surprise']],
      [importBody([candidate({ dedupe_key: 'Bad Key' })]), ['body', 'candidates', 0, 'dedupe_key']],
      [importBody([candidate({ novelty: 11 })]), ['body', 'candidates', 0, 'novelty']],
      [importBody([candidate({ gpu_count: -1 })]), ['body', 'candidates', 0, 'gpu_count']],
      [importBody([candidate({ gpu_memory_mib: 1.5 })]), ['body', 'candidates', 0, 'gpu_memory_mib']],
      [importBody([candidate({ cpu_count: 0 })]), ['body', 'candidates', 0, 'cpu_count']],
      [importBody([]), ['body', 'candidates']],
      [{ candidates: [candidate()] }, ['body', 'requested_by']],
    ];
    for (const [payload, loc] of cases) {
      const { status, body } = await post('/control/api/research/import-candidates', payload);
      expect(status).toBe(422);
      expect(body.detail.map((problem: any) => problem.loc)).toContainEqual(loc);
    }
    expect((await get('/control/api/research/candidates?decision=maybe')).status).toBe(422);
  });
});

describe('promote-candidate', () => {
  let admittedId: string;
  beforeAll(async () => {
    const { body } = await post('/control/api/research/import-candidates', importBody([
      candidate({
        dedupe_key: 'promote-me',
        title: 'Promotable',
        hypothesis: 'Speculative decoding with a 68M draft model doubles tokens per second of a 7B model on a single consumer GPU.',
        mechanism: 'A small draft model proposes several tokens that the large model verifies in one forward pass, trading cheap drafts for fewer expensive steps.',
        gpu_count: 2,
        gpu_memory_mib: 16_000,
      }),
      candidate({ dedupe_key: 'promote-rejected', kill_condition: undefined }),
    ], { dry_run: false }));
    admittedId = body.results[0].candidate_id;
  });

  it('shows on a dry run what a promotion would write, writing nothing', async () => {
    const before = await tableCounts();
    const { status, body } = await post('/control/api/research/promote-candidate', { candidate_id: admittedId, requested_by: 'operator@test' });
    expect(status).toBe(200);
    expect(body).toMatchObject({
      dry_run: true,
      action: 'would_promote',
      project_id: 'promote-me',
      queue_item: { project_id: 'promote-me', status: 'queued' },
    });
    expect(body.lineage.map((l: any) => `${l.from_kind}->${l.to_kind}`)).toEqual(['candidate->idea', 'idea->project', 'project->queue_item']);
    expect(await tableCounts()).toEqual(before);
  });

  it('promotes an admitted candidate into idea, project and queued item, with lineage, once per key', async () => {
    const request = { candidate_id: admittedId, requested_by: 'operator@test', dry_run: false, idempotency_key: 'promote-1' };
    const first = await post('/control/api/research/promote-candidate', request);
    expect(first.status).toBe(200);
    expect(first.body).toMatchObject({ action: 'promoted', project_id: 'promote-me' });

    const queue = await t.store.query<{ status: string; workload_class: string; candidate_id: string }>(
      `SELECT status, workload_class, candidate_id FROM queue_items WHERE project_id = 'promote-me'`,
    );
    expect(queue.rows).toEqual([{ status: 'queued', workload_class: 'inference_eval', candidate_id: admittedId }]);
    // What its runs need travels with the item (docs/runs.md#slots-and-gpus); what the candidate left out stays null.
    const queued = await get('/control/api/queues/queued?search=promote-me');
    expect(queued.body.items).toEqual([
      expect.objectContaining({ project_id: 'promote-me', status: 'queued', candidate_id: admittedId, gpu_count: 2, gpu_memory_mib: 16_000, cpu_count: null }),
    ]);
    const lineage = await t.store.query(`SELECT 1 FROM research_lineage WHERE from_id IN ($1, 'idea-promote-me', 'promote-me')`, [admittedId]);
    expect(lineage.rowCount).toBe(3);
    const flagged = await t.store.query<{ queue_admitted: boolean }>('SELECT queue_admitted FROM research_candidates WHERE candidate_id = $1', [admittedId]);
    expect(flagged.rows[0]!.queue_admitted).toBe(true);

    const before = await tableCounts();
    const replay = await post('/control/api/research/promote-candidate', request);
    expect(replay).toEqual(first);
    expect(await tableCounts()).toEqual(before);

    const conflict = await post('/control/api/research/promote-candidate', { ...request, requested_by: 'someone-else' });
    expect(conflict.status).toBe(409);
    expect(conflict.body).toEqual({ detail: "idempotency key 'promote-1' was reused with different payload" });

    const again = await post('/control/api/research/promote-candidate', { ...request, idempotency_key: 'promote-2' });
    expect(again.status).toBe(409);
    expect(again.body.detail).toMatch(/already promoted into project 'promote-me'/);
  });

  it('lets exactly one of many concurrent promotions of a candidate through', async () => {
    const { body } = await post('/control/api/research/import-candidates', importBody([
      candidate({
        dedupe_key: 'race-me',
        hypothesis: 'Int4 weight-only quantization of a 3B model loses under one point of MMLU when activations stay in fp16.',
        mechanism: 'Group-wise int4 weights with fp16 scales keep outlier channels representable while halving memory again.',
      }),
    ], { dry_run: false }));
    const candidateId = body.results[0].candidate_id;
    const answers = await Promise.all(
      Array.from({ length: 10 }, (_, i) =>
        post('/control/api/research/promote-candidate', { candidate_id: candidateId, requested_by: 'op', dry_run: false, idempotency_key: `race-${i}` }),
      ),
    );
    expect(answers.filter((a) => a.status === 200)).toHaveLength(1);
    expect(answers.filter((a) => a.status === 409)).toHaveLength(9);
    const rows = await t.store.query(`SELECT 1 FROM queue_items WHERE project_id = 'race-me'`);
    expect(rows.rowCount).toBe(1);
    const promoted = await t.store.query(`SELECT 1 FROM audit_events WHERE event_type = 'research.candidate_promoted' AND entity_id = $1`, [candidateId]);
    expect(promoted.rowCount).toBe(1);
  });

  it('leaves an in-flight queue row untouched', async () => {
    await t.store.query(`UPDATE queue_items SET status = 'running', current_run_id = 'promote-me-run', lane = 'default' WHERE project_id = 'promote-me'`);
    const row = async () => (await t.store.query(`SELECT * FROM queue_items WHERE project_id = 'promote-me'`)).rows[0];
    const before = await row();
    const refused = await post('/control/api/research/promote-candidate', {
      candidate_id: admittedId,
      requested_by: 'operator@test',
      dry_run: false,
      idempotency_key: 'promote-3',
    });
    expect(refused.status).toBe(409);
    expect(refused.body.detail).toMatch(/in flight \(running\).*left untouched/);
    expect(await row()).toEqual(before);
  });

  it('refuses a candidate that is not admitted, an unknown one, and a live call without a key', async () => {
    const candidates = await get('/control/api/research/candidates?search=promote-rejected');
    const rejectedId = candidates.body.items[0].candidate_id;
    const rejected = await post('/control/api/research/promote-candidate', { candidate_id: rejectedId, requested_by: 'op', dry_run: false, idempotency_key: 'p-r' });
    expect(rejected.status).toBe(409);
    expect(rejected.body.detail).toMatch(/is rejected, not admitted: .*kill_condition/);
    expect((await post('/control/api/research/promote-candidate', { candidate_id: 'cand-nope', requested_by: 'op' })).status).toBe(404);
    const keyless = await post('/control/api/research/promote-candidate', { candidate_id: admittedId, requested_by: 'op', dry_run: false });
    expect(keyless.status).toBe(422);
    expect(keyless.body.detail[0].loc).toEqual(['body', 'idempotency_key']);
  });
});

describe('facility overview', () => {
  it('shows ledger counts and the latest decisions', async () => {
    const { status, body } = await get('/control/api/research/facility');
    expect(status).toBe(200);
    expect(body).toMatchObject({ ok: true, min_admission_score: 72, needs_review_min_score: 58 });
    expect(body.latest_decisions.length).toBeGreaterThan(0);
    expect(body.latest_decisions.length).toBeLessThanOrEqual(10);
    const counts = await tableCounts();
    expect(body.counts).toMatchObject({
      sources: counts.research_sources,
      candidates: counts.research_candidates,
      admissions: counts.research_admissions,
      lineage: counts.research_lineage,
      projects: counts.projects,
      queue_items: counts.queue_items,
    });
    expect(Object.values(body.counts.admissions_by_decision as Record<string, number>).reduce((a, b) => a + b, 0)).toBe(counts.research_admissions);
  });
});
