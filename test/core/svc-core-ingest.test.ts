import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CORE_ROW_MAX_BYTES, CORE_ROW_MAX_DEPTH } from '../../api/core/core-routes.ts';
import { CORE_MODES } from '../../capabilities/core/domain/core-snapshot.ts';
import { PAPER_STATUSES, REVIEW_STATUSES, paperIdFor } from '../../capabilities/papers/domain/paper-status.ts';
import { isRunOwned, QUEUE_STATUSES } from '../../capabilities/runs/domain/queue-status.ts';
import { ensurePaper, recordDraft } from '../../capabilities/papers/store/draft-ledger.ts';
import { setReviewStatus } from '../../capabilities/papers/paper-ledger.ts';
import { insertProject } from '../../capabilities/runs/projects.ts';
import { insertQueueItem } from '../../capabilities/runs/queue-items.ts';
import { startTestApp, type TestApp } from '../support/app.ts';
import { jsonClient } from '../support/ledgers.ts';

/**
 * Core takes rows from any compatible source (docs/core.md#core): this product's own v1 queue and paper pages, sent
 * unchanged, in every mode, and a workflow tool's rows with its own fields, kept as sent. The fields Core reads are
 * still checked, and each row is bounded in size and depth.
 */

let t: TestApp;
let api: ReturnType<typeof jsonClient>;

const SNAPSHOTS = '/svc-core/snapshots/workflow-queue';
const POLISHABLE = ['draft_review', 'publication_draft', 'human_review_required'];

/** Every queue status (in-flight rows on a lane of their own, the running one on its run), plus a flagged queued row. */
async function seedQueue(): Promise<void> {
  const rows = [...QUEUE_STATUSES.map((status) => ({ status, flagged: false })), { status: 'queued' as const, flagged: true }];
  for (const [n, { status, flagged }] of rows.entries()) {
    const projectId = `ingest-q-${String(n).padStart(2, '0')}`;
    await insertProject(t.store, { project_id: projectId, project_name: `Queue ${n}`, project_dir: projectId, workload_class: 'cpu_only' });
    await insertQueueItem(t.store, {
      project_id: projectId,
      project_name: `Queue ${n}`,
      status,
      manual_review_required: flagged,
      dispatch_priority: 10 * (n % 3),
      selection_rank: n % 2,
      machine_target: n % 2 === 0 ? 'gpu-box' : null,
      workload_class: 'cpu_only',
      next_action_hint: `hint ${n}`,
      lane: isRunOwned(status) ? `lane-${n}` : null,
    });
  }
  await t.store.query(`UPDATE queue_items SET last_error = 'preflight failed', last_run_state = 'gate_error' WHERE status = 'dispatch_error'`);
}

/** Papers in every paper status and several review statuses, the drafted ones with their draft records. */
async function seedPapers(): Promise<void> {
  for (let n = 0; n < 2 * PAPER_STATUSES.length; n += 1) {
    const projectId = `ingest-p-${String(n).padStart(2, '0')}`;
    const runId = `${projectId}-20261123T1200${String(n).padStart(2, '0')}Z`;
    const paperId = paperIdFor(projectId, runId);
    const paperStatus = PAPER_STATUSES[n % PAPER_STATUSES.length]!;
    await t.store.transaction(async (tx) => {
      await insertProject(tx, { project_id: projectId, project_name: `Paper ${n}`, project_dir: projectId, workload_class: 'unknown' });
      await tx.query(
        `INSERT INTO runs (run_id, project_id, workflow_id, state, lane, wake_gate_url, workload_class, requested_by, decision, finished_at)
         VALUES ($1, $2, $3, 'reconciled', 'default', 'http://127.0.0.1:9', 'unknown', 'test', 'finalize_positive', clock_timestamp())`,
        [runId, projectId, `run:${runId}`],
      );
      await ensurePaper(tx, { paper_id: paperId, project_id: projectId, run_id: runId });
      if (paperStatus !== 'eligible') {
        await recordDraft(tx, paperId, {
          paper_status: paperStatus,
          title: `Paper ${n}`,
          writer: 'deterministic',
          writer_fallback_reason: null,
          draft_dir: `papers/${projectId}`,
          draft_artifacts: [{ path: `papers/${projectId}/paper.md`, sha256: 'a'.repeat(64), bytes: 1200 + n }],
          evidence_summary: { sha256: 'b'.repeat(64), files: ['run_notes.md', '.research/decision.json', 'results/main/metrics.json'], decision: 'finalize_positive' },
          rewrite: false,
        });
      }
      await setReviewStatus(tx, paperId, REVIEW_STATUSES[(3 * n) % REVIEW_STATUSES.length]!);
    });
  }
}

beforeAll(async () => {
  t = await startTestApp({ core: { mode: 'shadow', enforceEnabled: true }, legacyNotesApiEnabled: true });
  api = jsonClient(t);
  await seedQueue();
  await seedPapers();
});

afterAll(async () => t?.close());

type Row = Record<string, unknown>;

/** One whole v1 list: the test seeds fewer rows than a page holds. */
async function wholeList(url: string): Promise<Row[]> {
  const { status, body } = await api.get(url);
  expect(status, JSON.stringify(body)).toBe(200);
  expect(body.page.has_more).toBe(false);
  return body.items as Row[];
}

/** The fields Core reads from each kind of row, as the served OpenAPI document names them. */
async function readFields(): Promise<{ queue: string[]; paper: string[] }> {
  const { body } = await api.get('/control/api/openapi.json');
  const schema = body.paths[SNAPSHOTS].post.requestBody.content['application/json'].schema;
  return { queue: Object.keys(schema.properties.queue_rows.items.properties), paper: Object.keys(schema.properties.paper_rows.items.properties) };
}

const pick = (row: Row, fields: readonly string[]) => Object.fromEntries(fields.filter((field) => field in row).map((field) => [field, row[field]]));

async function storedRows(snapshotId: number): Promise<{ queue_rows: Row[]; paper_rows: Row[] }> {
  const stored = await t.store.query<{ queue_rows: Row[]; paper_rows: Row[] }>('SELECT queue_rows, paper_rows FROM core_snapshots WHERE snapshot_id = $1', [snapshotId]);
  return stored.rows[0]!;
}

async function recordedCounts() {
  const { rows } = await t.store.query<{ snapshots: number; keys: number }>(
    `SELECT (SELECT count(*)::int FROM core_snapshots) AS snapshots,
            (SELECT count(*)::int FROM idempotency_keys WHERE scope = 'svc-core.snapshot') AS keys`,
  );
  return rows[0]!;
}

describe('a snapshot made of this product\'s own v1 pages', () => {
  it('is accepted unchanged in every mode, stored as sent, and projected with the counts the pages show', async () => {
    const queue = await wholeList('/control/api/v1/queue?page_size=200');
    const papers = await wholeList('/control/api/v1/papers?page_size=200');
    const active = await wholeList('/control/api/v1/queue?group=active&page_size=200');
    const eligible = await wholeList('/control/api/v1/papers?status=eligible&page_size=200');
    const fields = await readFields();
    // The pages carry fields Core does not read: the snapshot must take them anyway.
    expect(Object.keys(queue[0]!)).toEqual(expect.arrayContaining(['operator_actions', 'last_run_state', 'next_action_hint', 'last_error', 'lane', 'updated_at']));
    expect(Object.keys(papers[0]!)).toEqual(expect.arrayContaining(['rank_reasons', 'draft_count', 'updated_at']));
    expect(papers.some((paper) => paper.evidence_summary !== null)).toBe(true);
    expect(new Set(queue.map((row) => row.status)).size).toBe(QUEUE_STATUSES.length);
    expect(active.length).toBeGreaterThan(0);

    const statusCounts = Object.fromEntries(QUEUE_STATUSES.map((status) => [status, queue.filter((row) => row.status === status).length]));
    const polishable = papers.filter((paper) => POLISHABLE.includes(paper.paper_status as string) && !['finalized', 'rejected'].includes(paper.review_status as string));
    expect(polishable.length).toBeGreaterThan(0);
    const activeRows = active.map((row) => pick(row, fields.queue)).sort((a, b) => (String(a.project_id) < String(b.project_id) ? -1 : 1));
    const liveBefore = await wholeList('/control/api/v1/queue?page_size=200');

    for (const mode of CORE_MODES) {
      const snapshot = { idempotency_key: `own-pages-${mode}`, source: 'own-pages', mode, queue_rows: queue, paper_rows: papers };
      const answer = await api.post(SNAPSHOTS, snapshot);
      expect(answer.status, `${mode}: ${JSON.stringify(answer.body)}`).toBe(200);
      expect(answer.body).toMatchObject({ ok: true, mode, inserted: mode !== 'off', queue_rows: queue.length, paper_rows: papers.length, would_apply: mode === 'enforce' });
      const projection = (await api.get('/svc-core/projections/queue?source=own-pages')).body;
      if (mode === 'off') {
        expect(projection.snapshot).toBeNull();
        continue;
      }
      if (mode === 'compare') expect(answer.body.warnings).toEqual([]);
      if (mode === 'enforce') {
        // The live queue is what the pages show: nothing to apply, in-flight rows left alone.
        expect(answer.body.applied).toEqual([]);
        expect(answer.body.skipped).toMatchObject({ live_row_in_flight: active.length, unchanged: queue.length - active.length, not_in_live_queue: 0 });
      }
      expect(await storedRows(answer.body.snapshot_id)).toEqual({ queue_rows: queue, paper_rows: papers });
      expect(projection).toMatchObject({
        snapshot: { snapshot_id: answer.body.snapshot_id, source: 'own-pages', mode },
        total_queue_rows: queue.length,
        total_paper_rows: papers.length,
        status_counts: statusCounts,
        draft_candidate_count: eligible.length,
        polish_candidate_count: polishable.length,
        warnings: [],
      });
      // toEqual, not toMatchObject: a field Core does not read must not come back.
      expect(projection.active_rows).toEqual(activeRows);
    }
    expect(await wholeList('/control/api/v1/queue?page_size=200')).toEqual(liveBefore);
  });
});

describe('rows from another workflow tool', () => {
  const foreignQueueRow = (projectId: string, status: string) => ({
    project_id: projectId,
    status,
    current_run_id: `${projectId}-run-7`,
    updated_at: '2026-11-23T12:00:00Z',
    owner: 'ops-team',
    tool: { name: 'flowboard', labels: ['gpu', 'nightly'], retries: { max: 3, seen: [1, 2] } },
  });
  const foreignPaperRow = { paper_id: 'flow:paper-1', paper_status: 'eligible', reviewer: null, history: [{ at: '2026-11-20', note: 'imported' }] };

  it('are accepted and stored as sent; the projection and legacy notes list only the fields Core reads', async () => {
    const fields = await readFields();
    const queueRows = [foreignQueueRow('flow-running', 'running'), foreignQueueRow('flow-queued', 'queued')];
    const answer = await api.post(SNAPSHOTS, { idempotency_key: 'foreign-1', source: 'legacy_notes', mode: 'shadow', queue_rows: queueRows, paper_rows: [foreignPaperRow] });
    expect(answer.status, JSON.stringify(answer.body)).toBe(200);
    expect(await storedRows(answer.body.snapshot_id)).toEqual({ queue_rows: queueRows, paper_rows: [foreignPaperRow] });

    const projection = (await api.get('/svc-core/projections/queue?source=legacy_notes')).body;
    expect(projection).toMatchObject({ total_queue_rows: 2, total_paper_rows: 1, draft_candidate_count: 1, status_counts: { running: 1, queued: 1 } });
    expect(projection.active_rows).toEqual([pick(queueRows[0]!, fields.queue)]);
    expect(projection.active_rows[0]).toEqual({ project_id: 'flow-running', status: 'running', current_run_id: 'flow-running-run-7' });

    const notes = (await api.get('/control/api/intake/legacy-notes')).body;
    expect(notes.queued_projects).toEqual({ count: 1, items: [pick(queueRows[1]!, fields.queue)] });
  });

  it('are covered by the idempotency hash as sent: a change to a field Core ignores is another body', async () => {
    const snapshot = { idempotency_key: 'foreign-2', mode: 'shadow', queue_rows: [foreignQueueRow('flow-a', 'queued')] };
    const first = await api.post(SNAPSHOTS, snapshot);
    expect(first.status).toBe(200);
    // The replay answers the first answer, as a call that inserted nothing.
    expect(await api.post(SNAPSHOTS, snapshot)).toEqual({ ...first, body: { ...first.body, inserted: false } });
    const changed = await api.post(SNAPSHOTS, { ...snapshot, queue_rows: [{ ...foreignQueueRow('flow-a', 'queued'), owner: 'someone-else' }] });
    expect(changed.status).toBe(409);
  });
});

describe('a bad row', () => {
  /** `levels` nested objects. */
  const nested = (levels: number): Row => (levels <= 1 ? {} : { inner: nested(levels - 1) });
  /** A row exactly `bytes` long as compact JSON. */
  const rowOfSize = (row: Row, bytes: number): Row => ({ ...row, note: 'x'.repeat(bytes - JSON.stringify({ ...row, note: '' }).length) });

  let refused = 0;
  const refusal = async (body: Row) => {
    const before = await recordedCounts();
    refused += 1;
    const answer = await api.post(SNAPSHOTS, { idempotency_key: `bad-${refused}`, mode: 'shadow', ...body });
    expect(answer.status, JSON.stringify(answer.body)).toBe(422);
    expect(await recordedCounts()).toEqual(before);
    return answer.body.detail as { loc: (string | number)[]; msg: string; type: string }[];
  };

  it('is accepted up to the size and depth bounds', async () => {
    const queueRow = { project_id: 'bounds-ok', status: 'queued' };
    const paperRow = { paper_id: 'bounds:ok', paper_status: 'eligible' };
    const answer = await api.post(SNAPSHOTS, {
      idempotency_key: 'bounds-ok',
      mode: 'shadow',
      // The row itself is one level.
      queue_rows: [{ ...queueRow, meta: nested(CORE_ROW_MAX_DEPTH - 1) }, rowOfSize(queueRow, CORE_ROW_MAX_BYTES)],
      paper_rows: [rowOfSize(paperRow, CORE_ROW_MAX_BYTES)],
    });
    expect(answer.status, JSON.stringify(answer.body)).toBe(200);
  });

  it('too large or nesting too deep is 422 naming the row', async () => {
    const queueRow = { project_id: 'bounds-bad', status: 'queued' };
    const detail = await refusal({
      queue_rows: [queueRow, rowOfSize(queueRow, CORE_ROW_MAX_BYTES + 1), { ...queueRow, meta: nested(CORE_ROW_MAX_DEPTH) }],
      paper_rows: [rowOfSize({ paper_id: 'bounds:bad', paper_status: 'eligible' }, CORE_ROW_MAX_BYTES + 1)],
    });
    expect(detail).toEqual([
      { loc: ['body', 'queue_rows', 1], msg: `queue row is larger than ${CORE_ROW_MAX_BYTES} bytes as JSON`, type: 'custom' },
      { loc: ['body', 'queue_rows', 2], msg: `queue row nests deeper than ${CORE_ROW_MAX_DEPTH} levels`, type: 'custom' },
      { loc: ['body', 'paper_rows', 0], msg: `paper row is larger than ${CORE_ROW_MAX_BYTES} bytes as JSON`, type: 'custom' },
    ]);
  });

  it('nesting far deeper than the call stack goes is 422 too, not a 500', async () => {
    const before = await recordedCounts();
    const levels = 200_000;
    const payload = `{"idempotency_key":"deep","queue_rows":[{"project_id":"deep","status":"queued","meta":${'['.repeat(levels)}${']'.repeat(levels)}}]}`;
    const answer = await t.app.inject({ method: 'POST', url: SNAPSHOTS, headers: { ...t.auth, 'content-type': 'application/json' }, payload });
    expect(answer.statusCode, answer.body).toBe(422);
    expect(answer.json().detail).toEqual([{ loc: ['body', 'queue_rows', 0], msg: `queue row nests deeper than ${CORE_ROW_MAX_DEPTH} levels`, type: 'custom' }]);
    expect(await recordedCounts()).toEqual(before);
  });

  it('with a field Core reads of the wrong type is still 422, whatever else the row carries', async () => {
    const detail = await refusal({
      queue_rows: [
        { project_id: 'typed-1', status: 'queued', dispatch_priority: '5', owner: 'ops' },
        { project_id: 'typed-2', status: 'sideways', updated_at: '2026-11-23T12:00:00Z' },
        { project_id: 'typed-3', status: 'queued', manual_review_required: 'yes' },
      ],
      paper_rows: [
        { paper_id: 'typed:1', paper_status: 'eligible', rank_score: 1.5, reviewer: 'x' },
        { paper_status: 'eligible', history: [] },
      ],
    });
    expect(detail.map((problem) => problem.loc)).toEqual([
      ['body', 'queue_rows', 0, 'dispatch_priority'],
      ['body', 'queue_rows', 1, 'status'],
      ['body', 'queue_rows', 2, 'manual_review_required'],
      ['body', 'paper_rows', 0, 'rank_score'],
      ['body', 'paper_rows', 1, 'paper_id'],
    ]);
  });

  it('does not open the top-level body: an unknown field there is still 422', async () => {
    const detail = await refusal({ queue_rows: [], owner: 'ops' });
    expect(detail).toEqual([{ loc: ['body', 'owner'], msg: 'unknown field', type: 'unrecognized_keys' }]);
  });
});

describe('the OpenAPI document', () => {
  it('names the fields Core reads in open row schemas', async () => {
    const { body } = await api.get('/control/api/openapi.json');
    const schema = body.paths[SNAPSHOTS].post.requestBody.content['application/json'].schema;
    expect(schema.additionalProperties).toBe(false);
    const queueRow = schema.properties.queue_rows.items;
    const paperRow = schema.properties.paper_rows.items;
    expect(queueRow.required).toEqual(['project_id', 'status']);
    expect(paperRow.required).toEqual(['paper_id', 'paper_status']);
    for (const row of [queueRow, paperRow]) {
      expect(row.additionalProperties).not.toBe(false);
      expect(row.description).toMatch(/kept as sent/);
    }
  });
});
