import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createServer } from '../../api/create-server.ts';
import { createLogger } from '../../platform/observability/logger.ts';
import type { QueueStatus } from '../../capabilities/runs/domain/queue-status.ts';
import { openStore } from '../../platform/store/open-store.ts';
import { insertProject } from '../../capabilities/runs/projects.ts';
import { insertQueueItem } from '../../capabilities/runs/queue-items.ts';
import type { Store } from '../../platform/store/store.ts';
import { httpOnlyDeps, LogCapture, startTestApp, TEST_TOKEN, type TestApp } from '../support/app.ts';
import { createTestDatabase } from '../support/database.ts';
import { jsonClient } from '../support/ledgers.ts';

let t: TestApp;
beforeAll(async () => {
  t = await startTestApp();
});
afterAll(async () => t.close());

const post = (url: string, payload: unknown) => jsonClient(t).post(url, payload);

interface AuditRow {
  entity_type: string;
  entity_id: string;
  event_type: string;
  payload: Record<string, unknown>;
  actor: string | null;
  request_id: string | null;
}

async function auditEvents(eventType: string, entityId?: string): Promise<AuditRow[]> {
  const { rows } = await t.store.query<AuditRow>(
    `SELECT entity_type, entity_id, event_type, payload, actor, request_id FROM audit_events
      WHERE event_type = $1 AND ($2::text IS NULL OR entity_id = $2) ORDER BY id`,
    [eventType, entityId ?? null],
  );
  return rows;
}

async function seedItem(projectId: string, status: QueueStatus, extra: { manual_review_required?: boolean; lane?: string; failures?: number } = {}) {
  await t.store.transaction(async (tx) => {
    await insertProject(tx, { project_id: projectId, project_name: `Project ${projectId}`, project_dir: projectId });
    await insertQueueItem(tx, { project_id: projectId, project_name: `Project ${projectId}`, manual_review_required: extra.manual_review_required ?? false });
    await tx.query(
      `UPDATE queue_items SET status = $2, lane = $3, dispatch_failures = $4, last_error = $5, current_run_id = $6 WHERE project_id = $1`,
      [projectId, status, extra.lane ?? null, extra.failures ?? 0, extra.failures ? 'worker said no' : null, extra.lane ? `${projectId}-20300101T000000Z` : null],
    );
  });
}

async function itemRow(projectId: string) {
  const { rows } = await t.store.query<Record<string, unknown>>('SELECT * FROM queue_items WHERE project_id = $1', [projectId]);
  return rows[0]!;
}

async function flagRows() {
  const { rows } = await t.store.query<{ name: string; value: boolean; updated_by: string | null }>(
    'SELECT name, value, updated_by FROM flags ORDER BY name',
  );
  return rows;
}

describe('POST /control/pause and /control/resume', () => {
  it('pauses, audits once, and answers changed:false without a new event on a replay', async () => {
    expect(await flagRows()).toMatchObject([{ name: 'maintenance_mode', value: false }, { name: 'queue_paused', value: false }]);
    const first = await post('/control/pause', { reason: 'GPU driver upgrade', paused_by: 'ops@test' });
    expect(first).toEqual({ status: 200, body: { ok: true, flags: { queue_paused: true, maintenance_mode: false }, changed: true } });
    expect(await flagRows()).toMatchObject([{ name: 'maintenance_mode', value: false }, { name: 'queue_paused', value: true, updated_by: 'ops@test' }]);

    const events = await auditEvents('queue.paused');
    expect(events).toHaveLength(1);
    expect(events[0]).toMatchObject({
      entity_type: 'queue',
      entity_id: 'queue',
      actor: 'ops@test',
      payload: { reason: 'GPU driver upgrade', maintenance_mode: false },
      request_id: expect.any(String),
    });

    const again = await post('/control/pause', { reason: 'still upgrading', paused_by: 'ops@test' });
    expect(again).toEqual({ status: 200, body: { ok: true, flags: { queue_paused: true, maintenance_mode: false }, changed: false } });
    expect(await auditEvents('queue.paused')).toHaveLength(1);

    // Maintenance on top of a pause is a change.
    const maintenance = await post('/control/pause', { reason: 'rack move', paused_by: 'ops@test', maintenance_mode: true });
    expect(maintenance.body).toEqual({ ok: true, flags: { queue_paused: true, maintenance_mode: true }, changed: true });
    expect((await auditEvents('queue.paused')).map((e) => e.payload.maintenance_mode)).toEqual([false, true]);

    const resumed = await post('/control/resume', { resumed_by: 'lead@test' });
    expect(resumed).toEqual({ status: 200, body: { ok: true, flags: { queue_paused: false, maintenance_mode: false }, changed: true } });
    expect(await flagRows()).toMatchObject([{ value: false, updated_by: 'lead@test' }, { value: false, updated_by: 'lead@test' }]);
    const resumedEvents = await auditEvents('queue.resumed');
    expect(resumedEvents).toHaveLength(1);
    expect(resumedEvents[0]).toMatchObject({ entity_type: 'queue', entity_id: 'queue', actor: 'lead@test' });

    expect((await post('/control/resume', { resumed_by: 'lead@test' })).body).toMatchObject({ changed: false });
    expect(await auditEvents('queue.resumed')).toHaveLength(1);
  });

  it('records exactly one change when two identical pauses race', async () => {
    const before = (await auditEvents('queue.paused')).length;
    const results = await Promise.all([1, 2, 3].map(() => post('/control/pause', { reason: 'race', paused_by: 'racer' })));
    expect(results.map((r) => r.status)).toEqual([200, 200, 200]);
    expect(results.filter((r) => r.body.changed === true)).toHaveLength(1);
    expect(await auditEvents('queue.paused')).toHaveLength(before + 1);
    await post('/control/resume', { resumed_by: 'racer' });
  });

  it('rejects unknown fields, missing fields, bad types and over-long strings with 422', async () => {
    const cases: [string, unknown, (string | number)[]][] = [
      ['/control/pause', { reason: 'x', paused_by: 'y', force: true }, ['body', 'force']],
      ['/control/pause', { paused_by: 'y' }, ['body', 'reason']],
      ['/control/pause', { reason: ' ', paused_by: 'y' }, ['body', 'reason']],
      ['/control/pause', { reason: 'x'.repeat(201), paused_by: 'y' }, ['body', 'reason']],
      ['/control/pause', { reason: 'x', paused_by: 'y', maintenance_mode: 'yes' }, ['body', 'maintenance_mode']],
      ['/control/resume', {}, ['body', 'resumed_by']],
      ['/control/resume', { resumed_by: 'y', reason: 'x' }, ['body', 'reason']],
      ['/control/queue/mark-paused', { project_id: 'p', reason: 'r' }, ['body', 'updated_by']],
      ['/control/queue/mark-paused', { project_id: '', reason: 'r', updated_by: 'u' }, ['body', 'project_id']],
      ['/control/queue/requeue', { project_id: 'p', requested_by: 'u', status: 'queued' }, ['body', 'status']],
      ['/control/queue/requeue', { project_id: 'x'.repeat(201), requested_by: 'u' }, ['body', 'project_id']],
    ];
    for (const [url, payload, loc] of cases) {
      const { status, body } = await post(url, payload);
      expect(status, `${url} ${JSON.stringify(payload)}`).toBe(422);
      expect(body.detail).toContainEqual(expect.objectContaining({ loc }));
    }
    expect(await flagRows()).toMatchObject([{ value: false }, { value: false }]);
  });

  it('needs the bearer token', async () => {
    for (const url of ['/control/pause', '/control/resume', '/control/queue/mark-paused', '/control/queue/requeue']) {
      const response = await t.app.inject({ method: 'POST', url, payload: { reason: 'x', paused_by: 'y' } });
      expect(response.statusCode).toBe(401);
      expect(response.headers['www-authenticate']).toBe('Bearer');
      expect(response.json()).toEqual({ detail: 'invalid bearer token' });
    }
  });
});

describe('POST /control/queue/mark-paused', () => {
  it.each(['queued', 'blocked', 'needs_review', 'dispatch_error'] as const)('parks a %s item with its reason, audited once', async (status) => {
    const projectId = `mp-${status.replace('_', '-')}`;
    await seedItem(projectId, status, { failures: 2 });
    const { status: code, body } = await post('/control/queue/mark-paused', { project_id: projectId, reason: 'dataset missing', updated_by: 'ops@test' });
    expect(code).toBe(200);
    expect(body).toMatchObject({
      ok: true,
      changed: true,
      queue_item: { project_id: projectId, status: 'paused', next_action_hint: 'paused by ops@test: dataset missing', last_error: 'worker said no' },
    });
    expect(await itemRow(projectId)).toMatchObject({ status: 'paused', next_action_hint: 'paused by ops@test: dataset missing' });
    const events = await auditEvents('queue_item.marked_paused', projectId);
    expect(events).toEqual([
      expect.objectContaining({
        entity_type: 'queue_item',
        actor: 'ops@test',
        payload: { reason: 'dataset missing', from_status: status, to_status: 'paused' },
      }),
    ]);

    const replay = await post('/control/queue/mark-paused', { project_id: projectId, reason: 'again', updated_by: 'ops@test' });
    expect(replay).toMatchObject({ status: 200, body: { ok: true, changed: false, queue_item: { status: 'paused', next_action_hint: 'paused by ops@test: dataset missing' } } });
    expect(await auditEvents('queue_item.marked_paused', projectId)).toHaveLength(1);
  });

  it.each([
    ['running', true],
    ['dispatching', true],
    ['awaiting_wake', true],
    ['wake_received', true],
    ['reconciling', true],
    ['completed', false],
    ['canceled', false],
  ] as const)('refuses a %s item with 409 and leaves it unchanged', async (status, inFlight) => {
    const projectId = `mp-refuse-${status.replace('_', '-')}`;
    await seedItem(projectId, status, inFlight ? { lane: `lane-${projectId}` } : {});
    const before = await itemRow(projectId);
    const { status: code, body } = await post('/control/queue/mark-paused', { project_id: projectId, reason: 'no', updated_by: 'ops' });
    expect(code).toBe(409);
    expect(body.detail).toContain(`project '${projectId}' is ${status}`);
    expect(await itemRow(projectId)).toEqual(before);
    expect(await auditEvents('queue_item.marked_paused', projectId)).toEqual([]);
  });

  it('answers 404 for an unknown project', async () => {
    const { status, body } = await post('/control/queue/mark-paused', { project_id: 'nope', reason: 'r', updated_by: 'u' });
    expect(status).toBe(404);
    expect(body).toEqual({ detail: "unknown project 'nope'" });
  });

  it('records exactly one change when two identical mark-paused calls race', async () => {
    await seedItem('mp-race', 'queued');
    const results = await Promise.all([1, 2].map(() => post('/control/queue/mark-paused', { project_id: 'mp-race', reason: 'r', updated_by: 'u' })));
    expect(results.map((r) => r.body.changed).sort()).toEqual([false, true]);
    expect(await auditEvents('queue_item.marked_paused', 'mp-race')).toHaveLength(1);
  });
});

describe('POST /control/queue/requeue', () => {
  it.each(['paused', 'blocked', 'needs_review', 'dispatch_error', 'canceled'] as const)(
    'puts a %s item back in the queue with the flag cleared, failures reset and no lane',
    async (status) => {
      const projectId = `rq-${status.replace('_', '-')}`;
      await seedItem(projectId, status, { manual_review_required: true, failures: 3 });
      await t.store.query(`UPDATE queue_items SET lane = 'old-lane', next_action_hint = 'look at it' WHERE project_id = $1`, [projectId]);
      const { status: code, body } = await post('/control/queue/requeue', { project_id: projectId, requested_by: 'lead@test' });
      expect(code).toBe(200);
      expect(body).toMatchObject({
        ok: true,
        changed: true,
        queue_item: { project_id: projectId, status: 'queued', manual_review_required: false, dispatch_failures: 0, lane: null, next_action_hint: null },
      });
      expect(await itemRow(projectId)).toMatchObject({ status: 'queued', manual_review_required: false, dispatch_failures: 0, lane: null });
      expect(await auditEvents('queue_item.requeued', projectId)).toEqual([
        expect.objectContaining({
          entity_type: 'queue_item',
          actor: 'lead@test',
          payload: { from_status: status, to_status: 'queued', cleared_manual_review: true, reset_dispatch_failures: 3 },
        }),
      ]);

      const replay = await post('/control/queue/requeue', { project_id: projectId, requested_by: 'lead@test' });
      expect(replay).toMatchObject({ status: 200, body: { ok: true, changed: false, queue_item: { status: 'queued' } } });
      expect(await auditEvents('queue_item.requeued', projectId)).toHaveLength(1);
    },
  );

  it('answers changed:false for a plain queued item and clears the review flag of a flagged one', async () => {
    await seedItem('rq-plain', 'queued');
    expect((await post('/control/queue/requeue', { project_id: 'rq-plain', requested_by: 'u' })).body).toMatchObject({ changed: false });
    expect(await auditEvents('queue_item.requeued', 'rq-plain')).toEqual([]);

    await seedItem('rq-flagged', 'queued', { manual_review_required: true });
    const flagged = await post('/control/queue/requeue', { project_id: 'rq-flagged', requested_by: 'u' });
    expect(flagged.body).toMatchObject({ changed: true, queue_item: { status: 'queued', manual_review_required: false } });
    expect(await auditEvents('queue_item.requeued', 'rq-flagged')).toHaveLength(1);
  });

  it.each([['running'], ['reconciling'], ['completed']] as const)('refuses a %s item with 409', async (status) => {
    const projectId = `rq-refuse-${status}`;
    await seedItem(projectId, status, status === 'completed' ? {} : { lane: `lane-${projectId}` });
    const before = await itemRow(projectId);
    const { status: code, body } = await post('/control/queue/requeue', { project_id: projectId, requested_by: 'u' });
    expect(code).toBe(409);
    expect(body.detail).toContain(`is ${status}`);
    expect(await itemRow(projectId)).toEqual(before);
    expect(await auditEvents('queue_item.requeued', projectId)).toEqual([]);
  });

  it('answers 404 for an unknown project and for a project without a queue row', async () => {
    expect(await post('/control/queue/requeue', { project_id: 'ghost', requested_by: 'u' })).toEqual({ status: 404, body: { detail: "unknown project 'ghost'" } });
    await t.store.transaction((tx) => insertProject(tx, { project_id: 'rowless', project_name: 'Rowless', project_dir: 'rowless' }));
    expect(await post('/control/queue/requeue', { project_id: 'rowless', requested_by: 'u' })).toEqual({
      status: 404,
      body: { detail: "project 'rowless' has no queue item" },
    });
  });

  it('shows its events in the audit log', async () => {
    const { body } = await jsonClient(t).get('/control/api/events?entity_type=queue_item&event_type=queue_item.requeued&entity_id=rq-paused');
    expect(body.items).toEqual([expect.objectContaining({ event_type: 'queue_item.requeued', entity_id: 'rq-paused' })]);
  });
});

describe('on a pg_readonly store', () => {
  let database: Awaited<ReturnType<typeof createTestDatabase>>;
  let store: Store;

  beforeAll(async () => {
    database = await createTestDatabase();
    const writer = await openStore({ backend: 'pg', pgDatabaseUrl: database.url });
    await writer.transaction(async (tx) => {
      await insertProject(tx, { project_id: 'ro', project_name: 'RO', project_dir: 'ro' });
      await insertQueueItem(tx, { project_id: 'ro', project_name: 'RO', status: 'blocked' });
    });
    await writer.close();
    store = await openStore({ backend: 'pg_readonly', pgDatabaseUrl: database.url });
  });
  afterAll(async () => {
    await store.close();
    await database.drop();
  });

  it('answers 501 to every command and changes nothing', async () => {
    const logger = createLogger({ level: 'silent', secretConfigFields: [], destination: new LogCapture() });
    const app = await createServer(httpOnlyDeps(store), logger);
    try {
      const commands: [string, Record<string, unknown>][] = [
        ['/control/pause', { reason: 'r', paused_by: 'u' }],
        ['/control/resume', { resumed_by: 'u' }],
        ['/control/queue/mark-paused', { project_id: 'ro', reason: 'r', updated_by: 'u' }],
        ['/control/queue/requeue', { project_id: 'ro', requested_by: 'u' }],
      ];
      for (const [url, payload] of commands) {
        const response = await app.inject({ method: 'POST', url, headers: { authorization: `Bearer ${TEST_TOKEN}` }, payload });
        expect(response.statusCode, url).toBe(501);
        expect(response.json()).toEqual({ detail: expect.stringContaining('read-only') });
      }
      const { rows } = await store.query<{ status: string; events: number }>(
        `SELECT (SELECT status FROM queue_items WHERE project_id = 'ro') AS status, (SELECT count(*)::int FROM audit_events) AS events`,
      );
      expect(rows[0]).toEqual({ status: 'blocked', events: 0 });
    } finally {
      await app.close();
    }
  });
});
