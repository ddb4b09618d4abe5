import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createPgStore } from '../../platform/store/pg-store.ts';
import { insertProject } from '../../capabilities/runs/projects.ts';
import { insertQueueItem, type QueueItemInsert } from '../../capabilities/runs/queue-items.ts';
import { startTestApp, type TestApp } from '../support/app.ts';

let t: TestApp;
let enforcing: TestApp;

async function seedLive(app: TestApp): Promise<void> {
  const rows: [string, Partial<QueueItemInsert>][] = [
    ['core-queued', { status: 'queued', dispatch_priority: 50 }],
    ['core-paused', { status: 'paused' }],
    ['core-running', { status: 'running', lane: 'default' }],
    ['core-same', { status: 'queued' }],
  ];
  for (const [projectId, fields] of rows) {
    await insertProject(app.store, { project_id: projectId, project_name: projectId, project_dir: projectId, workload_class: 'unknown' });
    await insertQueueItem(app.store, { project_id: projectId, project_name: projectId, ...fields });
  }
}

/** Asks to requeue the paused item, reprioritise the queued one, pause the running one, and names an unknown one. */
const snapshot = (key: string, mode: string) => ({
  idempotency_key: key,
  source: 'workflow-tool',
  mode,
  captured_at: '2026-11-23T12:00:00Z',
  queue_rows: [
    { project_id: 'core-queued', status: 'queued', dispatch_priority: 5 },
    { project_id: 'core-paused', status: 'queued' },
    { project_id: 'core-running', status: 'paused' },
    { project_id: 'core-same', status: 'queued' },
    { project_id: 'core-unknown', status: 'queued' },
  ],
  paper_rows: [
    { paper_id: 'x:r1:draft', paper_status: 'eligible' },
    { paper_id: 'x:r2:draft', paper_status: 'draft_review', review_status: 'in_review' },
  ],
});

beforeAll(async () => {
  t = await startTestApp();
  enforcing = await startTestApp({ core: { mode: 'compare', enforceEnabled: true }, legacyNotesApiEnabled: true });
  await seedLive(t);
  await seedLive(enforcing);
});

afterAll(async () => {
  await t?.close();
  await enforcing?.close();
});

const post = (app: TestApp, payload: object) => app.app.inject({ method: 'POST', url: '/svc-core/snapshots/workflow-queue', headers: app.auth, payload });
const get = (app: TestApp, url: string) => app.app.inject({ method: 'GET', url, headers: app.auth });

async function ledger(app: TestApp) {
  const [snapshots, events, queue] = await Promise.all([
    app.store.query<{ n: number }>('SELECT count(*)::int AS n FROM core_snapshots'),
    app.store.query<{ n: number }>(`SELECT count(*)::int AS n FROM audit_events WHERE event_type = 'core.snapshot_recorded'`),
    app.store.query('SELECT project_id, status, dispatch_priority, updated_at FROM queue_items ORDER BY project_id'),
  ]);
  return { snapshots: snapshots.rows[0]!.n, events: events.rows[0]!.n, queue: queue.rows };
}

describe('/svc-core', () => {
  it('answers health with its mode and store', async () => {
    const response = await get(t, '/svc-core/health');
    expect(response.statusCode).toBe(200);
    expect(response.json()).toMatchObject({ ok: true, service: 'svc-core', mode: 'shadow', db_path: t.store.location });
    expect((await t.app.inject({ method: 'GET', url: '/svc-core/health' })).statusCode).toBe(401);
  });

  it('answers health 503 with ok false when its store does not answer', async () => {
    const unreachable = createPgStore({ connectionString: 'postgres://postgres@127.0.0.1:1/test' });
    const down = await startTestApp({ store: unreachable });
    try {
      const response = await get(down, '/svc-core/health');
      expect(response.statusCode).toBe(503);
      expect(response.json()).toMatchObject({ ok: false, service: 'svc-core', error: expect.stringMatching(/store does not answer/) });
    } finally {
      await down.close();
      await unreachable.close();
    }
  });

  it('records nothing in off mode, records only in shadow, and warns in compare, leaving the live queue alone', async () => {
    const before = await ledger(t);
    const off = await post(t, snapshot('core-off', 'off'));
    expect(off.statusCode, off.body).toBe(200);
    expect(off.json()).toMatchObject({ ok: true, mode: 'off', inserted: false, event_id: 0, snapshot_id: 0, queue_rows: 5, paper_rows: 2, would_apply: false });
    expect(await ledger(t)).toEqual(before);

    const shadow = await post(t, snapshot('core-shadow', 'shadow'));
    expect(shadow.json()).toMatchObject({ mode: 'shadow', inserted: true, would_apply: false, queue_rows: 5 });
    expect(shadow.json().snapshot_id).toBeGreaterThan(0);
    expect(shadow.json().warnings).toEqual([]);
    const event = await t.store.query('SELECT entity_type, payload FROM audit_events WHERE id = $1', [shadow.json().event_id]);
    expect(event.rows[0]).toMatchObject({ entity_type: 'core_snapshot', payload: { source: 'workflow-tool', mode: 'shadow' } });

    const compare = await post(t, snapshot('core-compare', 'compare'));
    expect(compare.json().warnings).toEqual([
      'core-paused: the snapshot says queued, the live queue paused',
      'core-running: the snapshot says paused, the live queue running',
      'core-unknown: in the snapshot (queued) but not in the live queue',
    ]);
    const after = await ledger(t);
    expect(after.queue).toEqual(before.queue);
    expect(after).toMatchObject({ snapshots: before.snapshots + 2, events: before.events + 2 });
  });

  it('refuses enforce with 403 unless core_enforce_enabled, writing nothing', async () => {
    const before = await ledger(t);
    const refused = await post(t, snapshot('core-enforce-refused', 'enforce'));
    expect(refused.statusCode).toBe(403);
    expect(refused.json().detail).toMatch(/core_enforce_enabled is false/);
    expect(await ledger(t)).toEqual(before);
  });

  it('enforces: applies rows to live items not in flight, never touches an item in flight, and counts what it skipped', async () => {
    const response = await post(enforcing, snapshot('core-enforce', 'enforce'));
    expect(response.statusCode, response.body).toBe(200);
    const body = response.json();
    expect(body).toMatchObject({ mode: 'enforce', inserted: true, would_apply: true });
    expect(body.applied).toEqual([
      { project_id: 'core-queued', changed: ['dispatch_priority'] },
      { project_id: 'core-paused', changed: ['status'] },
    ]);
    expect(body.skipped).toEqual({ duplicate_project_id: 0, not_in_live_queue: 1, live_row_in_flight: 1, in_flight_status_not_applied: 0, unchanged: 1 });
    const live = await enforcing.store.query<{ project_id: string; status: string; dispatch_priority: number }>(
      'SELECT project_id, status, dispatch_priority FROM queue_items ORDER BY project_id',
    );
    expect(live.rows).toEqual([
      { project_id: 'core-paused', status: 'queued', dispatch_priority: 50 },
      { project_id: 'core-queued', status: 'queued', dispatch_priority: 5 },
      { project_id: 'core-running', status: 'running', dispatch_priority: 50 },
      { project_id: 'core-same', status: 'queued', dispatch_priority: 50 },
    ]);
  });

  it('replays the first answer for the same key and body, with inserted false, and answers 409 for the same key with another body', async () => {
    const first = await post(t, snapshot('core-replay', 'shadow'));
    expect(first.json()).toMatchObject({ inserted: true, event_id: expect.any(Number), snapshot_id: expect.any(Number) });
    expect(first.json().snapshot_id).toBeGreaterThan(0);
    const before = await ledger(t);
    const again = await post(t, snapshot('core-replay', 'shadow'));
    expect(again.statusCode).toBe(200);
    // `inserted` tells whether this call inserted: a replay did not, and points at what the first call recorded.
    expect(again.json()).toEqual({ ...first.json(), inserted: false });
    expect((await post(t, snapshot('core-replay', 'shadow'))).json()).toEqual({ ...first.json(), inserted: false });
    expect(await ledger(t)).toEqual(before);
    const other = await post(t, { ...snapshot('core-replay', 'shadow'), source: 'another-tool' });
    expect(other.statusCode).toBe(409);
    // The hash covers the body as sent: naming the mode the server would default to is still another body.
    const { mode: _mode, ...withoutMode } = snapshot('core-replay', 'shadow');
    expect((await post(t, withoutMode)).statusCode).toBe(409);
  });

  it('refuses a bad row with 422 naming it, and writes nothing', async () => {
    const before = await ledger(t);
    const bad = await post(t, { ...snapshot('core-bad', 'shadow'), queue_rows: [{ project_id: 'Not A Slug', status: 'queued' }, { project_id: 'ok', status: 'sideways' }] });
    expect(bad.statusCode).toBe(422);
    const locs = bad.json().detail.map((problem: { loc: unknown[] }) => problem.loc.join('.'));
    expect(locs).toEqual(expect.arrayContaining(['body.queue_rows.0.project_id', 'body.queue_rows.1.status']));
    expect((await post(t, { source: 'no-key' })).statusCode).toBe(422);
    expect(await ledger(t)).toEqual(before);
  });

  it('projects the queue from the latest recorded snapshot', async () => {
    const response = await get(t, '/svc-core/projections/queue');
    expect(response.statusCode).toBe(200);
    const body = response.json();
    expect(body).toMatchObject({
      ok: true,
      mode: 'shadow',
      projection_version: 'svc-core.queue.v1',
      snapshot: { source: 'workflow-tool', mode: 'shadow' },
      total_queue_rows: 5,
      total_paper_rows: 2,
      draft_candidate_count: 1,
      polish_candidate_count: 1,
      active_rows: [],
      warnings: [],
    });
    expect(body.status_counts).toMatchObject({ queued: 4, paused: 1, running: 0 });
    const none = await get(t, '/svc-core/projections/queue?source=nobody');
    expect(none.json()).toMatchObject({ snapshot: null, total_queue_rows: 0, warnings: ['no snapshot has been recorded yet'] });
  });
});

describe('GET /control/api/intake/legacy-notes', () => {
  it('is 404 unless legacy_notes_api_enabled', async () => {
    const response = await get(t, '/control/api/intake/legacy-notes');
    expect(response.statusCode).toBe(404);
    expect(response.json().detail).toMatch(/legacy_notes_api_enabled is false/);
  });

  it('shows the latest legacy-notes ingest, its queued projects in dispatch order, skipped rows and recent ingests', async () => {
    const empty = await get(enforcing, '/control/api/intake/legacy-notes');
    expect(empty.json()).toMatchObject({ latest_ingest: null, queued_projects: { count: 0, items: [] }, skipped_reasons: {}, recent_events: [] });

    const ingest = await post(enforcing, { ...snapshot('notes-1', 'compare'), source: 'legacy_notes', queue_rows: [...snapshot('x', 'x').queue_rows, { project_id: 'core-same', status: 'queued' }] });
    expect(ingest.statusCode, ingest.body).toBe(200);
    const body = (await get(enforcing, '/control/api/intake/legacy-notes')).json();
    expect(body.latest_ingest).toMatchObject({ snapshot_id: ingest.json().snapshot_id, mode: 'compare', queue_rows: 6 });
    expect(body.queued_projects.items.map((row: { project_id: string }) => row.project_id)).toEqual(['core-queued', 'core-paused', 'core-same', 'core-unknown']);
    expect(body.skipped_reasons).toEqual({ duplicate_project_id: 1 });
    expect(body.recent_events.map((event: { entity_id: string }) => event.entity_id)).toEqual(['notes-1']);
  });
});
