import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { paperIdFor, type PaperStatus, type ReviewStatus } from '../../capabilities/papers/domain/paper-status.ts';
import { insertProject } from '../../capabilities/runs/projects.ts';
import { startTestApp, type TestApp } from '../support/app.ts';

let t: TestApp;

beforeAll(async () => {
  t = await startTestApp();
});

afterAll(async () => {
  await t?.close();
});

const MANIFEST = 'c'.repeat(64);

/** A completed run with evidence and its paper, written straight into the ledgers (drafting is not under test here). */
async function seedPaper(projectId: string, paper: { paper_status: PaperStatus; review_status: ReviewStatus; rank_score?: number }): Promise<string> {
  const runId = `${projectId}-20261122T100000Z`;
  const paperId = paperIdFor(projectId, runId);
  await t.store.transaction(async (tx) => {
    await insertProject(tx, { project_id: projectId, project_name: `Paper ${projectId}`, project_dir: projectId, workload_class: 'unknown' });
    await tx.query(
      `INSERT INTO runs (run_id, project_id, workflow_id, state, lane, wake_gate_url, workload_class, requested_by, decision, evidence, finished_at)
       VALUES ($1, $2, $3, 'reconciled', 'default', 'http://127.0.0.1:9', 'unknown', 'test', 'finalize_positive', $4::jsonb, now())`,
      [runId, projectId, `run:${runId}`, JSON.stringify({ run_notes: true, decision_file: true, results_json_files: 2, decision: 'finalize_positive', decision_summary: 'ok', sufficient_for_paper: true })],
    );
    await tx.query('INSERT INTO papers (paper_id, project_id, run_id, paper_status, review_status, rank_score, title) VALUES ($1, $2, $3, $4, $5, $6, $7)', [
      paperId,
      projectId,
      runId,
      paper.paper_status,
      paper.review_status,
      paper.rank_score ?? 0,
      `Title of ${projectId}`,
    ]);
  });
  return paperId;
}

async function call(method: 'GET' | 'POST', url: string, body?: Record<string, unknown>) {
  const response = await t.app.inject({ method, url, headers: t.auth, ...(body ? { payload: body } : {}) });
  return { status: response.statusCode, body: response.json() as Record<string, any> };
}

const path = (paperId: string) => encodeURIComponent(paperId);

async function paperEvents(paperId: string) {
  const result = await t.store.query<{ event_type: string; payload: Record<string, unknown> }>(
    `SELECT event_type, payload FROM audit_events WHERE entity_type IN ('paper', 'paper_review') AND entity_id = $1 ORDER BY id`,
    [paperId],
  );
  return result.rows;
}

async function reviewStatusOf(paperId: string) {
  return (await t.store.query<{ review_status: string; paper_status: string }>('SELECT review_status, paper_status FROM papers WHERE paper_id = $1', [paperId])).rows[0];
}

describe('reading papers', () => {
  it('lists papers newest first, filters by status, and refuses an unknown status or sort with 422', async () => {
    const a = await seedPaper('read-a', { paper_status: 'draft_review', review_status: 'unreviewed', rank_score: 10 });
    const b = await seedPaper('read-b', { paper_status: 'publication_draft', review_status: 'in_review', rank_score: 50 });
    const all = await call('GET', '/control/api/papers?search=read-');
    expect(all.status).toBe(200);
    expect(all.body).toMatchObject({ total: 2, page: 1, page_size: 50 });
    expect(all.body.items.map((p: any) => p.paper_id)).toEqual([b, a]);
    const drafts = await call('GET', '/control/api/papers?search=read-&status=draft_review');
    expect(drafts.body.items.map((p: any) => p.paper_id)).toEqual([a]);
    expect((await call('GET', '/control/api/papers?status=drafted')).status).toBe(422);
    expect((await call('GET', '/control/api/papers?sort=-secret')).status).toBe(422);
  });

  it('lists review rows by rank, highest first, the same on both mounts, with rank reasons unless asked not to', async () => {
    const preferred = await call('GET', '/control/api/publication-automation?search=read-');
    const compatible = await call('GET', '/control/api/paper-reviews?search=read-');
    expect(preferred).toEqual(compatible);
    expect(preferred.body.items.map((p: any) => p.rank_score)).toEqual([50, 10]);
    expect(preferred.body.items[0]).toHaveProperty('rank_reasons');
    const bare = await call('GET', '/control/api/paper-reviews?search=read-&include_rank_reasons=false');
    expect(bare.body.items[0]).not.toHaveProperty('rank_reasons');
  });

  it('answers next with the highest-ranked publication draft whose review is open, and 404 when none matches', async () => {
    await seedPaper('next-low', { paper_status: 'publication_draft', review_status: 'triage_ready', rank_score: 20 });
    await seedPaper('next-done', { paper_status: 'publication_draft', review_status: 'finalized', rank_score: 99 });
    const high = await seedPaper('next-high', { paper_status: 'publication_draft', review_status: 'unreviewed', rank_score: 60 });
    await seedPaper('next-draft', { paper_status: 'draft_review', review_status: 'unreviewed', rank_score: 90 });
    for (const mount of ['publication-automation', 'paper-reviews']) {
      const next = await call('GET', `/control/api/${mount}/next?search=next-`);
      expect(next.status).toBe(200);
      expect(next.body.paper_id).toBe(high);
    }
    const none = await call('GET', '/control/api/paper-reviews/next?search=nothing-like-this');
    expect(none.status).toBe(404);
    expect(none.body).toEqual({ detail: expect.stringContaining('no paper matches') });
  });
});

describe('review commands', () => {
  it('moves review_status along the transition table, recording the history, the audit event and the new rank', async () => {
    const paperId = await seedPaper('move-ok', { paper_status: 'publication_draft', review_status: 'unreviewed' });
    const body = { idempotency_key: 'move-ok-1', requested_by: 'reviewer', review_status: 'triage_ready', note: 'looks complete' };
    const moved = await call('POST', `/control/api/publication-automation/${path(paperId)}/status`, body);
    expect(moved.status).toBe(200);
    expect(moved.body).toMatchObject({
      ok: true,
      changed: true,
      review_status: { from: 'unreviewed', to: 'triage_ready' },
      history: { from_status: 'unreviewed', to_status: 'triage_ready', note: 'looks complete', requested_by: 'reviewer' },
      paper: { review_status: 'triage_ready', rank_reasons: expect.arrayContaining(['review: triage_ready (+5)']) },
    });
    expect(moved.body.paper.checklist).toHaveLength(9);
    expect(await paperEvents(paperId)).toEqual([
      { event_type: 'paper_review.status_changed', payload: { from: 'unreviewed', to: 'triage_ready', note: 'looks complete', blocker: null } },
    ]);

    // The same key and body: the first answer again, nothing written twice. A different body: 409.
    const replay = await call('POST', `/control/api/paper-reviews/${path(paperId)}/status`, body);
    expect(replay).toEqual(moved);
    expect(await paperEvents(paperId)).toHaveLength(1);
    const conflict = await call('POST', `/control/api/paper-reviews/${path(paperId)}/status`, { ...body, review_status: 'blocked' });
    expect(conflict.status).toBe(409);
    expect((await reviewStatusOf(paperId))!.review_status).toBe('triage_ready');
  });

  it('refuses a move outside the table with 400, changing nothing, and answers 404 for an unknown paper', async () => {
    const paperId = await seedPaper('move-bad', { paper_status: 'publication_draft', review_status: 'unreviewed' });
    const refused = await call('POST', `/control/api/paper-reviews/${path(paperId)}/status`, { idempotency_key: 'move-bad-1', requested_by: 'r', review_status: 'finalized' });
    expect(refused.status).toBe(400);
    expect(refused.body.detail).toBe('review_status cannot move from unreviewed to finalized; from unreviewed it may move to triage_ready, blocked, rejected');
    expect((await reviewStatusOf(paperId))!.review_status).toBe('unreviewed');
    expect(await paperEvents(paperId)).toEqual([]);
    // The refused key was not kept: the same key may carry a legal move afterwards.
    const legal = await call('POST', `/control/api/paper-reviews/${path(paperId)}/status`, { idempotency_key: 'move-bad-1', requested_by: 'r', review_status: 'triage_ready' });
    expect(legal.status).toBe(200);
    const unknown = await call('POST', `/control/api/paper-reviews/${path('nope:nope-20261122T100000Z:draft')}/status`, { idempotency_key: 'x', requested_by: 'r', review_status: 'triage_ready' });
    expect(unknown.status).toBe(404);
  });

  it('archives the paper when its review is rejected, and then allows no move', async () => {
    const paperId = await seedPaper('move-reject', { paper_status: 'draft_review', review_status: 'in_review' });
    const rejected = await call('POST', `/control/api/paper-reviews/${path(paperId)}/status`, { idempotency_key: 'rej-1', requested_by: 'r', review_status: 'rejected', blocker: 'no baseline' });
    expect(rejected.status).toBe(200);
    expect(await reviewStatusOf(paperId)).toEqual({ review_status: 'rejected', paper_status: 'archived' });
    const after = await call('POST', `/control/api/paper-reviews/${path(paperId)}/status`, { idempotency_key: 'rej-2', requested_by: 'r', review_status: 'in_review' });
    expect(after.status).toBe(400);
    expect(after.body.detail).toContain('nothing (terminal)');
  });

  it('sets a checklist item, needing a note for fail and accepted_risk', async () => {
    const paperId = await seedPaper('check', { paper_status: 'draft_review', review_status: 'in_review' });
    const url = `/control/api/publication-automation/${path(paperId)}/checklist/novelty_significance`;
    const missing = await call('POST', url, { idempotency_key: 'c-1', requested_by: 'r', status: 'fail' });
    expect(missing.status).toBe(422);
    expect(missing.body.detail).toEqual([{ loc: ['body', 'note'], msg: 'a checklist item marked fail needs a note saying why', type: 'missing' }]);
    expect((await t.store.query('SELECT 1 FROM paper_checklist_items WHERE paper_id = $1', [paperId])).rowCount).toBe(0);
    const set = await call('POST', url, { idempotency_key: 'c-2', requested_by: 'r', status: 'accepted_risk', note: 'a known prior result' });
    expect(set.status).toBe(200);
    expect(set.body.item).toMatchObject({ item_id: 'novelty_significance', status: 'accepted_risk', note: 'a known prior result', judged_by: 'r' });
    expect(set.body.paper.checklist.find((item: any) => item.item_id === 'novelty_significance').status).toBe('accepted_risk');
    expect((await call('POST', `/control/api/paper-reviews/${path(paperId)}/checklist/not_an_item`, { idempotency_key: 'c-3', requested_by: 'r', status: 'pass' })).status).toBe(422);
    expect(await paperEvents(paperId)).toEqual([
      { event_type: 'paper_review.checklist_item_set', payload: { item_id: 'novelty_significance', from: 'pending', to: 'accepted_risk', note: 'a known prior result' } },
    ]);
  });

  it('settles the checklist once the review is final: a finalized paper takes only its import, an imported one nothing', async () => {
    const paperId = await seedPaper('settled', { paper_status: 'draft_review', review_status: 'finalized' });
    const detail = await call('GET', `/control/api/v1/papers/${path(paperId)}`);
    expect(detail.body.paper).toMatchObject({ paper_status: 'draft_review', stage: 'finalized', imported: false, operator_actions: ['record_import'] });
    const refused = await call('POST', `/control/api/paper-reviews/${path(paperId)}/checklist/final_human_approval`, { idempotency_key: 's-1', requested_by: 'r', status: 'fail', note: 'too late' });
    expect(refused.status).toBe(409);
    expect(refused.body.detail).toBe(`the review of '${paperId}' is finalized, which is final: its checklist is settled`);
    expect((await t.store.query('SELECT 1 FROM paper_checklist_items WHERE paper_id = $1', [paperId])).rowCount).toBe(0);
  });

  it('approves, finalizes and records the import of a paper once, which then counts as published_imported', async () => {
    const paperId = await seedPaper('publish', { paper_status: 'publication_draft', review_status: 'in_review' });
    const approve = await call('POST', `/control/api/paper-reviews/${path(paperId)}/approve-finalization`, { idempotency_key: 'p-1', requested_by: 'r', note: 'good' });
    expect(approve.body).toMatchObject({ changed: true, review_status: { from: 'in_review', to: 'approved_for_finalization' } });
    const again = await call('POST', `/control/api/paper-reviews/${path(paperId)}/approve-finalization`, { idempotency_key: 'p-2', requested_by: 'r' });
    expect(again.body).toMatchObject({ changed: false });

    const importBody = { idempotency_key: 'p-import', requested_by: 'r', corpus_repo: 'lab/corpus', commit_sha: 'abcdef1', manifest_sha256: MANIFEST };
    const importUrl = `/control/api/publication-automation/${path(paperId)}/record-import`;
    const early = await call('POST', importUrl, importBody);
    expect(early.status).toBe(409);
    expect(early.body.detail).toContain('is not finalized');

    expect((await call('POST', `/control/api/paper-reviews/${path(paperId)}/status`, { idempotency_key: 'p-3', requested_by: 'r', review_status: 'finalized' })).status).toBe(200);
    const noPackage = await call('POST', importUrl, importBody);
    expect(noPackage.status).toBe(409);
    expect(noPackage.body.detail).toContain('no finalization package');

    await t.store.query(
      `INSERT INTO paper_finalization_packages (paper_id, target_label, package_dir, manifest, manifest_sha256, requested_by) VALUES ($1, 'corpus', 'papers/x/package', '{}', $2, 'r')`,
      [paperId, MANIFEST],
    );
    const imported = await call('POST', importUrl, importBody);
    expect(imported.status).toBe(200);
    expect(imported.body.corpus_import).toMatchObject({ corpus_repo: 'lab/corpus', commit_sha: 'abcdef1', manifest_sha256: MANIFEST });
    expect(imported.body.paper).toMatchObject({ paper_status: 'publication_draft', stage: 'imported', imported: true, operator_actions: [] });
    expect(await call('POST', importUrl, importBody)).toEqual(imported);
    const second = await call('POST', importUrl, { ...importBody, idempotency_key: 'p-import-2', commit_sha: 'abcdef2' });
    expect(second.status).toBe(409);
    expect(second.body.detail).toContain('already recorded as imported');

    const status = await call('GET', '/control/api/status');
    expect(status.body.counts.paper_pipeline.published_imported).toBe(1);
    expect((await paperEvents(paperId)).map((event) => event.event_type)).toEqual([
      'paper_review.finalization_approved',
      'paper_review.status_changed',
      'paper.imported',
    ]);
  });

  it('is served only under publication-automation for record-import, and refuses a malformed import with 422', async () => {
    const paperId = await seedPaper('import-bad', { paper_status: 'publication_draft', review_status: 'finalized' });
    const body = { idempotency_key: 'i-1', requested_by: 'r', corpus_repo: 'lab/corpus', commit_sha: 'not-hex', manifest_sha256: MANIFEST };
    expect((await call('POST', `/control/api/publication-automation/${path(paperId)}/record-import`, body)).status).toBe(422);
    expect((await call('POST', `/control/api/paper-reviews/${path(paperId)}/record-import`, { ...body, commit_sha: 'abcdef1' })).status).toBe(404);
  });
});

describe('papers where the contract shows them', () => {
  it('lists a paper in its project detail and its run detail', async () => {
    const paperId = await seedPaper('shown', { paper_status: 'draft_review', review_status: 'unreviewed' });
    const project = await call('GET', '/control/api/projects/shown');
    expect(project.status).toBe(200);
    expect(project.body.papers.map((p: any) => p.paper_id)).toEqual([paperId]);
    const run = await call('GET', '/control/api/v1/runs/shown-20261122T100000Z');
    expect(run.status).toBe(200);
    expect(run.body.papers).toEqual([expect.objectContaining({ paper_id: paperId, paper_status: 'draft_review', review_status: 'unreviewed' })]);
  });
});
