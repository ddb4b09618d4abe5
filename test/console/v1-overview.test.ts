import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PAPER_STATUSES, paperIdFor, REVIEW_STATUSES } from '../../capabilities/papers/domain/paper-status.ts';
import { QUEUE_GROUPS, QUEUE_STATUSES } from '../../capabilities/runs/domain/queue-status.ts';
import { insertProject } from '../../capabilities/runs/projects.ts';
import { insertQueueItem } from '../../capabilities/runs/queue-items.ts';
import type { Queryable } from '../../platform/store/store.ts';
import { startTestApp, type TestApp } from '../support/app.ts';

let t: TestApp;

beforeAll(async () => {
  t = await startTestApp();
  await t.store.transaction(seedEveryStatus);
});

afterAll(async () => {
  await t?.close();
});

let made = 0;
async function project(q: Queryable): Promise<string> {
  const projectId = `overview-${String(made++).padStart(3, '0')}`;
  await insertProject(q, { project_id: projectId, project_name: projectId, project_dir: projectId, workload_class: 'unknown' });
  return projectId;
}

async function run(q: Queryable, projectId: string, decision: string, sufficient: boolean): Promise<string> {
  const runId = `${projectId}-20261123T120000Z`;
  await q.query(
    `INSERT INTO runs (run_id, project_id, workflow_id, state, lane, wake_gate_url, workload_class, requested_by, decision, evidence)
     VALUES ($1, $2, $3, 'reconciled', 'default', 'http://127.0.0.1:9', 'unknown', 'test', $4, $5::jsonb)`,
    [runId, projectId, `run:${runId}`, decision, JSON.stringify({ sufficient_for_paper: sufficient })],
  );
  return runId;
}

/**
 * Every queue status with and without the manual-review flag, and a paper in every paper status and in every review
 * status, one of them imported; plus completed runs without papers, writable or not.
 */
async function seedEveryStatus(q: Queryable): Promise<void> {
  for (const status of QUEUE_STATUSES) {
    for (const flagged of [false, true]) {
      const projectId = await project(q);
      await insertQueueItem(q, { project_id: projectId, project_name: projectId, status, manual_review_required: flagged, lane: `lane-${projectId}` });
    }
  }
  const papers: [string, string][] = [
    ...PAPER_STATUSES.map((status): [string, string] => [status, 'unreviewed']),
    ...REVIEW_STATUSES.map((review): [string, string] => ['publication_draft', review]),
  ];
  for (const [paperStatus, reviewStatus] of papers) {
    const projectId = await project(q);
    const runId = await run(q, projectId, 'finalize_positive', true);
    await q.query('INSERT INTO papers (paper_id, project_id, run_id, paper_status, review_status) VALUES ($1, $2, $3, $4, $5)', [
      paperIdFor(projectId, runId),
      projectId,
      runId,
      paperStatus,
      reviewStatus,
    ]);
  }
  const imported = await q.query<{ paper_id: string }>(`SELECT paper_id FROM papers WHERE review_status = 'finalized' LIMIT 1`);
  await q.query(`INSERT INTO corpus_imports (paper_id, corpus_repo, commit_sha, manifest_sha256, requested_by) VALUES ($1, 'lab/corpus', 'abc1234', $2, 'test')`, [
    imported.rows[0]!.paper_id,
    'c'.repeat(64),
  ]);
  await run(q, await project(q), 'finalize_positive', true);
  await run(q, await project(q), 'finalize_positive', false);
  await run(q, await project(q), 'inconclusive', true);
}

async function overview(query = '') {
  const response = await t.app.inject({ method: 'GET', url: `/control/api/v1/overview${query}`, headers: t.auth });
  expect(response.statusCode, response.body).toBe(200);
  return response.json();
}

describe('GET /control/api/v1/overview', () => {
  it('counts each lane as exactly the rows that define it', async () => {
    const queue = await t.store.query<{ status: string; manual_review_required: boolean }>('SELECT status, manual_review_required FROM queue_items');
    const papers = await t.store.query<{ paper_status: string; review_status: string; imported: boolean }>(
      'SELECT p.paper_status, p.review_status, ci.paper_id IS NOT NULL AS imported FROM papers p LEFT JOIN corpus_imports ci USING (paper_id)',
    );
    const needsPerson = (row: { status: string; manual_review_required: boolean }) =>
      row.manual_review_required || ['blocked', 'needs_review', 'dispatch_error'].includes(row.status);
    // In flight on a lane, or waiting out a usage limit with its lane let go: either way its run owns it.
    const inFlight = ['dispatching', 'running', 'awaiting_wake', 'wake_received', 'reconciling', 'usage_limited'];
    const expected = {
      attention: queue.rows.filter(needsPerson).length + papers.rows.filter((p) => p.paper_status === 'human_review_required').length,
      running: queue.rows.filter((row) => !needsPerson(row) && inFlight.includes(row.status)).length,
      // One writable run without a paper and the one paper still eligible.
      write: 2,
      publish: papers.rows.filter((p) => p.review_status === 'finalized' && !p.imported).length,
      imported: 1,
    };
    const body = await overview();
    expect(body.operator_counts).toEqual(expected);
    expect(expected).toMatchObject({ attention: 13 + 3 + 1, running: 6, publish: 0 });
    expect(body.paper_pipeline).toEqual({
      write_needed: 2,
      raw_completed_no_paper_candidates: 1,
      not_writable_by_decision_gate: 1,
      publish_ready: 0,
      published_imported: 1,
    });
    const status = await t.app.inject({ method: 'GET', url: '/control/api/status', headers: t.auth });
    expect(status.json().counts.paper_pipeline).toEqual(body.paper_pipeline);
    // The flagged running item is a run waiting on its agent's question; the other flagged rows wait for a review.
    expect(body.operator_detail_counts.attention).toEqual({ agent_question: 3, dispatch_error: 2, blocked: 2, manual_review: 9, paper_human_review: 1 });
    expect(body.operator_detail_counts.queue.by_status.running).toBe(2);
    // Each queue tab counts the rows the v1 queue list shows under it (a flagged queued row is in two tabs).
    for (const group of QUEUE_GROUPS) {
      const listed = await t.app.inject({ method: 'GET', url: `/control/api/v1/queue?group=${group}&page_size=200`, headers: t.auth });
      expect(body.operator_detail_counts.queue.by_group[group], group).toBe(listed.json().items.length);
    }
    expect(body.operator_detail_counts.queue.by_group).toMatchObject({ all: 26, queued: 2, blocked: 13 + 3, active: 12 });
    expect(body.operator_detail_counts.papers.total).toBe(PAPER_STATUSES.length + REVIEW_STATUSES.length);
  });

  it('lists what needs a person, most urgent first, the active items and the recent events, each within its limit', async () => {
    const body = await overview('?active_limit=100&event_limit=3');
    const reasons: string[] = body.actionable_items.map((item: { reason: string }) => item.reason);
    expect(reasons).toEqual([
      ...Array(3).fill('agent_question'),
      ...Array(2).fill('dispatch_error'),
      ...Array(2).fill('blocked'),
      ...Array(9).fill('manual_review'),
      'paper_human_review',
    ]);
    expect(body.actionable_items[0]).toMatchObject({ kind: 'queue_item', status: 'running', hint: expect.stringMatching(/answer it/) });
    expect(body.actionable_items[1]).toMatchObject({ kind: 'queue_item', status: 'needs_review', hint: expect.stringMatching(/answer it/) });
    expect(body.active_items.map((item: { status: string }) => item.status).sort()).toEqual(
      ['awaiting_wake', 'dispatching', 'reconciling', 'running', 'usage_limited', 'wake_received'].flatMap((s) => [s, s]).sort(),
    );
    expect(body.recent_events.length).toBeLessThanOrEqual(3);

    const capped = await overview('?active_limit=4');
    expect(capped.actionable_items.map((item: { reason: string }) => item.reason)).toEqual(['agent_question', 'agent_question', 'dispatch_error', 'dispatch_error']);
    expect(capped.active_items).toHaveLength(4);
    for (const bad of ['?active_limit=0', '?active_limit=101', '?event_limit=x', '?other=1']) {
      expect((await t.app.inject({ method: 'GET', url: `/control/api/v1/overview${bad}`, headers: t.auth })).statusCode, bad).toBe(422);
    }
  });
});
