import { createHash } from 'node:crypto';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { paperIdFor } from '../../capabilities/papers/domain/paper-status.ts';
import { QUEUE_STATUSES, isRunOwned } from '../../capabilities/runs/domain/queue-status.ts';
import { insertProject } from '../../capabilities/runs/projects.ts';
import { insertQueueItem } from '../../capabilities/runs/queue-items.ts';
import type { Queryable } from '../../platform/store/store.ts';
import { startTestApp, UNREACHABLE_PAPER_WORKFLOWS, type TestApp } from '../support/app.ts';
import { deterministicPaperSettings } from '../support/paper-settings.ts';
import { seedWorkerCallback } from '../support/ledgers.ts';

let t: TestApp;
let stateDir: string;

beforeAll(async () => {
  stateDir = await mkdtemp(join(tmpdir(), 'rcp-v1-lists-'));
  t = await startTestApp({ papers: { settings: deterministicPaperSettings(stateDir), launcher: UNREACHABLE_PAPER_WORKFLOWS } }, { readStatementTimeoutMs: 300 });
});

afterAll(async () => {
  await t?.close();
  if (stateDir) await rm(stateDir, { recursive: true, force: true });
});

const STATUSES = ['queued', 'running', 'completed', 'paused', 'blocked', 'needs_review'] as const;
const RUN_STATES = ['reconciled', 'running', 'canceled'] as const;
const PAPER_STATUSES = ['eligible', 'draft_review', 'publication_draft'] as const;
let seeded = 0;

/**
 * Projects with a queue item, a run and a paper each. Priorities, ranks and scores repeat on purpose, so pages break
 * inside runs of equal values and only the tie-breaking column keeps the order total.
 */
async function seed(q: Queryable, count: number, prefix: string): Promise<void> {
  for (let i = 0; i < count; i++) {
    const n = seeded++;
    const projectId = `${prefix}-${String(n).padStart(4, '0')}`;
    const runId = `${projectId}-20261123T10${String(Math.floor(n / 60) % 60).padStart(2, '0')}${String(n % 60).padStart(2, '0')}Z`;
    await insertProject(q, { project_id: projectId, project_name: `Project ${n}`, project_dir: projectId, workload_class: 'unknown' });
    await insertQueueItem(q, {
      project_id: projectId,
      project_name: `Project ${n}`,
      status: STATUSES[n % STATUSES.length]!,
      dispatch_priority: 10 * (n % 3),
      selection_rank: n % 2,
      // In-flight rows need a lane, one each.
      lane: `lane-${n}`,
    });
    await q.query(
      `INSERT INTO runs (run_id, project_id, workflow_id, state, lane, wake_gate_url, workload_class, requested_by, decision)
       VALUES ($1, $2, $3, $4, 'default', 'http://127.0.0.1:9', 'unknown', 'test', 'finalize_positive')`,
      [runId, projectId, `run:${runId}`, RUN_STATES[n % RUN_STATES.length]],
    );
    await q.query('INSERT INTO papers (paper_id, project_id, run_id, paper_status, rank_score) VALUES ($1, $2, $3, $4, $5)', [
      paperIdFor(projectId, runId),
      projectId,
      runId,
      PAPER_STATUSES[n % PAPER_STATUSES.length],
      n % 4,
    ]);
  }
}

interface V1Page {
  items: Record<string, unknown>[];
  page: { page_size: number; returned: number; next_cursor: string | null; has_more: boolean };
}

async function get(url: string) {
  return t.app.inject({ method: 'GET', url, headers: t.auth });
}

async function page(url: string): Promise<V1Page> {
  const response = await get(url);
  expect(response.statusCode, response.body).toBe(200);
  return response.json() as V1Page;
}

/** Walks a list to its end, calling `between` after each page; returns the ids in the order seen. */
async function walk(path: string, idField: string, query: string, between: () => Promise<void> = async () => {}): Promise<string[]> {
  const ids: string[] = [];
  let cursor: string | null = null;
  for (let pages = 0; pages < 100; pages++) {
    const url = `${path}?${query}${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`;
    const body = await page(url);
    expect(body.page.returned).toBe(body.items.length);
    expect(body.page.has_more).toBe(body.page.next_cursor !== null);
    ids.push(...body.items.map((item) => String(item[idField])));
    if (!body.page.next_cursor) return ids;
    cursor = body.page.next_cursor;
    await between();
  }
  throw new Error('the walk did not end');
}

const LISTS = [
  { path: '/control/api/v1/queue', id: 'project_id', sorts: ['dispatch', '-updated_at', 'updated_at', '-created_at', 'project_id'] },
  { path: '/control/api/v1/runs', id: 'run_id', sorts: ['-created_at', 'created_at', '-updated_at', 'updated_at'] },
  { path: '/control/api/v1/projects', id: 'project_id', sorts: ['-created_at', 'created_at', 'project_id'] },
  { path: '/control/api/v1/papers', id: 'paper_id', sorts: ['-rank_score', 'rank_score', '-updated_at', 'updated_at', '-created_at', 'paper_id'] },
] as const;

describe('the v1 lists', () => {
  beforeAll(async () => {
    await t.store.transaction((tx) => seed(tx, 60, 'walk'));
  });

  it('visit every row exactly once, in each sort, while rows are inserted between pages', { timeout: 60_000 }, async () => {
    let inserted = 0;
    for (const list of LISTS) {
      for (const sort of list.sorts) {
        const before = await t.store.query<{ id: string }>(
          `SELECT ${list.id} AS id FROM ${{ '/control/api/v1/queue': 'queue_items', '/control/api/v1/runs': 'runs', '/control/api/v1/projects': 'projects', '/control/api/v1/papers': 'papers' }[list.path]}`,
        );
        let pages = 0;
        const seen = await walk(list.path, list.id, `page_size=7&sort=${sort}`, async () => {
          if (pages++ < 3) await t.store.transaction((tx) => seed(tx, 2, `ins${inserted++}`));
        });
        expect(new Set(seen).size, `${list.path} ${sort}: no row twice`).toBe(seen.length);
        const missing = before.rows.map((row) => row.id).filter((id) => !seen.includes(id));
        expect(missing, `${list.path} ${sort}: every row that existed when the walk began`).toEqual([]);
      }
    }
  });

  it('return the rows in the order the sort names, ties broken by the id', async () => {
    const papers = await walk('/control/api/v1/papers', 'paper_id', 'page_size=9');
    const rows = await t.store.query<{ paper_id: string }>('SELECT paper_id FROM papers ORDER BY rank_score DESC, paper_id DESC');
    expect(papers).toEqual(rows.rows.map((row) => row.paper_id));
    const queue = await walk('/control/api/v1/queue', 'project_id', 'page_size=11');
    const dispatchOrder = await t.store.query<{ project_id: string }>(
      'SELECT project_id FROM queue_items ORDER BY dispatch_priority, selection_rank, updated_at, project_id',
    );
    expect(queue).toEqual(dispatchOrder.rows.map((row) => row.project_id));
  });

  it('filter: queue by tab and status, runs by state and project, papers by status, every list by search', async () => {
    const running = await walk('/control/api/v1/queue', 'project_id', 'status=running&page_size=200');
    const runningRows = await t.store.query<{ n: number }>(`SELECT count(*)::int AS n FROM queue_items WHERE status = 'running'`);
    expect(running.length).toBe(runningRows.rows[0]!.n);
    const blockedTab = await page('/control/api/v1/queue?group=blocked&page_size=200');
    expect(new Set(blockedTab.items.map((item) => item.status))).toEqual(new Set(['blocked', 'needs_review']));

    const canceled = await page('/control/api/v1/runs?state=canceled&page_size=200');
    expect(canceled.items.length).toBeGreaterThan(0);
    expect(canceled.items.every((run) => run.state === 'canceled')).toBe(true);
    expect(canceled.items[0]).not.toHaveProperty('evidence');
    const ofProject = await page('/control/api/v1/runs?project=walk-0003');
    expect(ofProject.items.map((run) => run.project_id)).toEqual(['walk-0003']);
    expect(ofProject.items[0]!.paper_status).toBe('eligible');

    const drafts = await page('/control/api/v1/papers?status=draft_review&page_size=200');
    expect(drafts.items.length).toBeGreaterThan(0);
    expect(drafts.items.every((paper) => paper.paper_status === 'draft_review')).toBe(true);

    const found = await page('/control/api/v1/projects?search=walk-001');
    expect(found.items.map((project) => project.project_id).sort()).toEqual(Array.from({ length: 10 }, (_, i) => `walk-001${i}`));
    expect(found.items[0]).toHaveProperty('queue_status');
  });

  it('refuse an edited cursor, a cursor of another sort, and a page_size outside 1–200 with 422', async () => {
    const first = await page('/control/api/v1/papers?page_size=5');
    const cursor = first.page.next_cursor!;
    const edited = `${cursor.slice(0, 5)}${cursor[5] === 'A' ? 'B' : 'A'}${cursor.slice(6)}`;
    for (const bad of [edited, `${cursor}x`, 'not-a-cursor', cursor.split('.')[0]!]) {
      const response = await get(`/control/api/v1/papers?cursor=${encodeURIComponent(bad)}`);
      expect(response.statusCode, bad).toBe(422);
      expect(response.json().detail[0].loc).toEqual(['query', 'cursor']);
    }
    const otherSort = await get(`/control/api/v1/papers?sort=paper_id&cursor=${encodeURIComponent(cursor)}`);
    expect(otherSort.statusCode).toBe(422);
    expect(otherSort.json().detail[0].msg).toMatch(/belongs to sort -rank_score/);
    const queueCursor = await get(`/control/api/v1/queue?cursor=${encodeURIComponent(cursor)}`);
    expect(queueCursor.statusCode).toBe(422);
    for (const size of ['0', '201', 'x']) expect((await get(`/control/api/v1/runs?page_size=${size}`)).statusCode).toBe(422);
    expect((await get('/control/api/v1/runs?sort=run_id')).statusCode).toBe(422);
    expect((await page('/control/api/v1/runs')).page.page_size).toBe(50);
  });
});

describe('the v1 details', () => {
  it('show one paper with its checklist, project, run, review moves, packages, import and events; 404 when unknown', async () => {
    const paperId = paperIdFor('walk-0001', 'walk-0001-20261123T100001Z');
    const response = await get(`/control/api/v1/papers/${encodeURIComponent(paperId)}?event_limit=5`);
    expect(response.statusCode, response.body).toBe(200);
    const body = response.json();
    expect(body.paper.paper_id).toBe(paperId);
    expect(body.paper.checklist).toHaveLength(9);
    expect(body.project.project_id).toBe('walk-0001');
    expect(body.run.run_id).toBe('walk-0001-20261123T100001Z');
    expect(body).toMatchObject({ review_history: [], finalization_packages: [], corpus_import: null, events: [] });
    // The moves the status command takes from an unreviewed paper.
    expect(body.review_moves).toEqual(['triage_ready', 'blocked', 'rejected']);
    expect((await get('/control/api/v1/papers/nope:nope:draft')).statusCode).toBe(404);
  });

  it('show a paper\'s draft as the text recorded with it: 404 before the first draft, 409 once the file changed', async () => {
    const paperId = paperIdFor('walk-0004', 'walk-0004-20261123T100004Z');
    const draftPath = `/control/api/v1/papers/${encodeURIComponent(paperId)}/draft`;
    const before = await get(draftPath);
    expect(before.statusCode).toBe(404);
    expect(before.json().detail).toContain('has no draft yet');

    const markdown = '# A <script>draft</script>\n\nWith **Markdown** and a table.\n';
    const relative = 'papers/walk-0004/paper.md';
    await mkdir(join(stateDir, 'papers/walk-0004'), { recursive: true });
    await writeFile(join(stateDir, relative), markdown);
    const sha256 = createHash('sha256').update(markdown).digest('hex');
    const artifacts = [{ path: relative, sha256, bytes: Buffer.byteLength(markdown) }];
    await t.store.query(`UPDATE papers SET title = 'A draft', writer = 'deterministic', draft_artifacts = $2::jsonb WHERE paper_id = $1`, [paperId, JSON.stringify(artifacts)]);

    const drafted = await get(draftPath);
    expect(drafted.statusCode, drafted.body).toBe(200);
    expect(drafted.json()).toEqual({ paper_id: paperId, title: 'A draft', writer: 'deterministic', path: relative, sha256, bytes: artifacts[0]!.bytes, markdown });

    await writeFile(join(stateDir, relative), `${markdown}edited\n`);
    const changed = await get(draftPath);
    expect(changed.statusCode).toBe(409);
    expect(changed.json().detail).toContain('missing or changed since it was recorded');
    expect((await get('/control/api/v1/papers/nope:nope:draft/draft')).statusCode).toBe(404);
  });

  it('show one run with its worker callbacks, newest first, each with the gate state and reason it reported', async () => {
    const runId = 'walk-0005-20261123T100005Z';
    const callback = (key: string, eventType: string, gateState: string, reason: string, agoSec: number, ignoreReason: string | null = null) =>
      seedWorkerCallback(t.store, { key, runId, projectId: 'walk-0005', eventType, agoSec, ignoreReason, payload: { gate_state: gateState, reason, telemetry: { cpu_pct: 1 } } });
    await callback('cb-1', 'session_started', 'running', 'agent session running', 60);
    await callback('cb-2', 'wake_ready', 'wake_ready', 'quiet for 30 s', 10);
    await callback('cb-3', 'wake_ready', 'wake_ready', 'late copy', 5, 'run already finished');
    const response = await get(`/control/api/v1/runs/${runId}`);
    expect(response.statusCode, response.body).toBe(200);
    const body = response.json();
    expect(body.run.run_id).toBe(runId);
    expect(body.callbacks).toEqual([
      { idempotency_key: 'cb-3', event_type: 'wake_ready', gate_state: 'wake_ready', reason: 'late copy', ignored: true, ignore_reason: 'run already finished', received_at: expect.any(String) },
      { idempotency_key: 'cb-2', event_type: 'wake_ready', gate_state: 'wake_ready', reason: 'quiet for 30 s', ignored: false, ignore_reason: null, received_at: expect.any(String) },
      { idempotency_key: 'cb-1', event_type: 'session_started', gate_state: 'running', reason: 'agent session running', ignored: false, ignore_reason: null, received_at: expect.any(String) },
    ]);
    expect((await get('/control/api/v1/runs/walk-0006-20261123T100006Z')).json().callbacks).toEqual([]);
    expect((await get('/control/api/v1/runs/nope-20261123T100000Z')).statusCode).toBe(404);
  });

  it('show one project with its queue item, runs and papers; 404 when unknown', async () => {
    const response = await get('/control/api/v1/projects/walk-0002');
    expect(response.statusCode, response.body).toBe(200);
    const body = response.json();
    expect(body.queue_item.project_id).toBe('walk-0002');
    expect(body.runs.map((run: { run_id: string }) => run.run_id)).toEqual(['walk-0002-20261123T100002Z']);
    expect(body.papers).toHaveLength(1);
    expect((await get('/control/api/v1/projects/nope')).statusCode).toBe(404);
  });
});

describe('a read that runs out of time', () => {
  it('is cancelled by the statement timeout and answered 503, and the next read works', async () => {
    // A writer holding the table's strongest lock keeps the read waiting; the wait counts against statement_timeout.
    let release!: () => void;
    const held = new Promise<void>((resolve) => (release = resolve));
    let locked!: () => void;
    const isLocked = new Promise<void>((resolve) => (locked = resolve));
    const holder = t.store.transaction(async (tx) => {
      await tx.query('LOCK TABLE papers IN ACCESS EXCLUSIVE MODE');
      locked();
      await held;
    });
    await isLocked;
    const began = Date.now();
    const response = await get('/control/api/v1/papers');
    release();
    await holder;
    expect(response.statusCode, response.body).toBe(503);
    expect(response.json().detail).toMatch(/ran past the read-model statement timeout and was cancelled/);
    expect(Date.now() - began).toBeLessThan(3_000);
    expect((await get('/control/api/v1/papers')).statusCode).toBe(200);
  });
});

describe('the operator commands a queue row offers', () => {
  it('are exactly the ones the queue commands carry out', async () => {
    const seededRows = new Map<string, { status: (typeof QUEUE_STATUSES)[number]; flagged: boolean }>();
    await t.store.transaction(async (q) => {
      for (const status of QUEUE_STATUSES) {
        for (const flagged of [false, true]) {
          const projectId = `cmd-${status.replaceAll('_', '-')}${flagged ? '-flagged' : ''}`;
          seededRows.set(projectId, { status, flagged });
          await insertProject(q, { project_id: projectId, project_name: projectId, project_dir: projectId, workload_class: 'unknown' });
          await insertQueueItem(q, { project_id: projectId, project_name: projectId, status, manual_review_required: flagged, ...(isRunOwned(status) ? { lane: `cmd-lane-${projectId}` } : {}) });
        }
      }
    });
    const rows = (await page('/control/api/v1/queue?search=cmd-&page_size=200')).items as { project_id: string; operator_actions: string[] }[];
    expect(rows).toHaveLength(seededRows.size);
    const offered = Object.fromEntries(rows.map((row) => [row.project_id, row.operator_actions]));
    expect(offered['cmd-queued']).toEqual(['mark_paused', 'dispatch']);
    expect(offered['cmd-queued-flagged']).toEqual(['requeue', 'mark_paused']);
    expect(offered['cmd-running']).toEqual([]);
    expect(offered['cmd-paused']).toEqual(['requeue']);

    const commands = {
      requeue: (projectId: string) => ({ url: '/control/queue/requeue', payload: { project_id: projectId, requested_by: 'test' } }),
      mark_paused: (projectId: string) => ({ url: '/control/queue/mark-paused', payload: { project_id: projectId, reason: 'test', updated_by: 'test' } }),
    };
    for (const row of rows) {
      const seededRow = seededRows.get(row.project_id)!;
      for (const [command, request] of Object.entries(commands)) {
        const answer = await t.app.inject({ method: 'POST', headers: t.auth, ...request(row.project_id) });
        const changed = answer.statusCode === 200 && answer.json().changed === true;
        expect(changed, `${command} on ${row.project_id}: ${answer.body}`).toBe(row.operator_actions.includes(command));
        // Back to the seeded state, so the next command is tried on the row as it was offered.
        if (changed) await t.store.query('UPDATE queue_items SET status = $2, manual_review_required = $3 WHERE project_id = $1', [row.project_id, seededRow.status, seededRow.flagged]);
      }
      // Dispatch is offered exactly where a dispatch-next of the row would not refuse it for its own state.
      const chosen = await t.app.inject({ method: 'POST', headers: t.auth, url: '/control/dispatch-next', payload: { dry_run: true, requested_by: 'test', project_id: row.project_id } });
      expect(chosen.statusCode).toBe(200);
      const refusedForItsState = /, not queued|is flagged for manual review/.test(chosen.json().reason);
      expect(!refusedForItsState, `dispatch on ${row.project_id}: ${chosen.json().reason}`).toBe(row.operator_actions.includes('dispatch'));
    }
  });
});
