import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { paperIdFor } from '../../capabilities/papers/domain/paper-status.ts';
import { startTestApp, type TestApp } from '../support/app.ts';
import { jsonClient } from '../support/ledgers.ts';
import { candidate } from '../support/research.ts';

let t: TestApp;
let admittedId: string;
let projectId: string;

const post = (url: string, payload: unknown) => jsonClient(t).post(url, payload);
const get = (url: string) => jsonClient(t).get(url);

beforeAll(async () => {
  t = await startTestApp();
  const batch = await post('/control/api/research/import-candidates', {
    requested_by: 'operator@test',
    dry_run: false,
    batch_id: 'quality-batch',
    sources: [{ source_id: 'src-attention', kind: 'paper', title: 'Block-sparse attention', url: 'https://example.org/sparse' }],
    candidates: [
      candidate({ generation_mode: 'fresh_grounded', source_ids: ['src-attention'] }),
      candidate({ title: 'The same key again' }),
      candidate({ dedupe_key: 'needs-a-look', novelty: 5 }),
      candidate({ dedupe_key: 'low-score', novelty: 1, feasibility: 2 }),
      candidate({ dedupe_key: 'ungrounded-fresh', generation_mode: 'fresh_grounded' }),
    ],
  });
  expect(batch.status, JSON.stringify(batch.body)).toBe(200);
  expect(batch.body.results.map((result: { decision: string }) => result.decision)).toEqual(['admitted', 'rejected', 'needs-review', 'rejected', 'rejected']);
  admittedId = batch.body.results[0].candidate_id;
  const promoted = await post('/control/api/research/promote-candidate', { candidate_id: admittedId, requested_by: 'operator@test', dry_run: false, idempotency_key: 'quality-promote' });
  expect(promoted.status, JSON.stringify(promoted.body)).toBe(200);
  projectId = promoted.body.project_id;
  // The promoted project ran once and ended positive, with a paper.
  const runId = `${projectId}-20261123T130000Z`;
  await t.store.query(
    `INSERT INTO runs (run_id, project_id, workflow_id, state, lane, wake_gate_url, workload_class, requested_by, decision)
     VALUES ($1, $2, $3, 'reconciled', 'default', 'http://127.0.0.1:9', 'unknown', 'test', 'finalize_positive')`,
    [runId, projectId, `run:${runId}`],
  );
  await t.store.query(`INSERT INTO papers (paper_id, project_id, run_id, paper_status) VALUES ($1, $2, $3, 'draft_review')`, [paperIdFor(projectId, runId), projectId, runId]);
});

afterAll(async () => {
  await t?.close();
});

describe('GET /control/api/v1/research-quality', () => {
  it('counts decisions by mode, scores, rejection reasons, rates and the outcomes of promoted work', async () => {
    const { status, body } = await get('/control/api/v1/research-quality');
    expect(status).toBe(200);
    expect(body.admissions.total).toBe(5);
    expect(body.admissions.by_decision).toEqual({ admitted: 1, rejected: 3, merged: 0, 'needs-review': 1 });
    expect(body.admissions.by_mode.fresh_grounded).toEqual({ admitted: 1, rejected: 1, merged: 0, 'needs-review': 0 });
    expect(body.score_distribution).toHaveLength(10);
    expect(body.score_distribution.reduce((sum: number, bucket: { total: number }) => sum + bucket.total, 0)).toBe(5);
    const reasons = body.rejection_reasons.map((row: { reason: string }) => row.reason);
    expect(reasons).toEqual(expect.arrayContaining(['missing_source_grounding', 'score_below_threshold']));
    expect(body.promotion).toEqual({ admitted: 1, promoted: 1 });
    expect(body.rates).toEqual({ admission_rate: 0.2, merge_rate: 0, promotion_rate: 1, promoted_run_positive_rate: 1 });
    expect(body.promoted_run_outcomes).toEqual([{ state: 'reconciled', decision: 'finalize_positive', count: 1 }]);
  });
});

describe('GET /control/api/v1/source-lineage', () => {
  it('follows a source to its candidate, the project it became, its runs and papers, with the dedupe context', async () => {
    const { status, body } = await get('/control/api/v1/source-lineage?source_id=src-attention');
    expect(status).toBe(200);
    expect(body.items).toHaveLength(1);
    const [item] = body.items;
    expect(item.candidate).toMatchObject({ candidate_id: admittedId, decision: 'admitted', queue_admitted: true });
    expect(item.sources).toEqual([{ source_id: 'src-attention', kind: 'paper', title: 'Block-sparse attention', url: 'https://example.org/sparse' }]);
    expect(item.dedupe.same_dedupe_key).toEqual([expect.objectContaining({ decision: 'rejected' })]);
    expect(item.project).toMatchObject({ project_id: projectId, queue_status: 'queued' });
    expect(item.idea_id).toEqual(expect.any(String));
    expect(item.runs).toEqual([expect.objectContaining({ state: 'reconciled', decision: 'finalize_positive' })]);
    expect(item.papers).toEqual([expect.objectContaining({ paper_status: 'draft_review', imported: false })]);
  });

  it('filters by project or candidate, and walks every stored candidate by cursor', async () => {
    const byProject = await get(`/control/api/v1/source-lineage?project_id=${projectId}`);
    expect(byProject.body.items.map((item: { candidate: { candidate_id: string } }) => item.candidate.candidate_id)).toEqual([admittedId]);
    const byCandidate = await get(`/control/api/v1/source-lineage?candidate_id=${admittedId}`);
    expect(byCandidate.body.items).toHaveLength(1);
    expect((await get('/control/api/v1/source-lineage?project_id=nobody')).body.items).toEqual([]);

    const seen: string[] = [];
    let cursor: string | null = null;
    do {
      const { body } = await get(`/control/api/v1/source-lineage?page_size=1${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`);
      seen.push(...body.items.map((item: { candidate: { candidate_id: string } }) => item.candidate.candidate_id));
      cursor = body.page.next_cursor as string | null;
    } while (cursor);
    const stored = await t.store.query<{ candidate_id: string }>('SELECT candidate_id FROM research_candidates ORDER BY created_at DESC, candidate_id DESC');
    expect(seen).toEqual(stored.rows.map((row) => row.candidate_id));
    expect(seen).toHaveLength(4);
  });
});
