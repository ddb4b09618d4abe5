import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { appendAuditEvent, listAuditEventsBefore, listAuditEventsPage } from '../../platform/store/audit-events.ts';
import { readFlags, setFlag } from '../../capabilities/runs/queue-flags.ts';
import { payloadHash } from '../../platform/http/payload-hash.ts';
import { IdempotencyConflictError, runIdempotent } from '../../platform/store/idempotency-keys.ts';
import { loadMigrations, migrate } from '../../platform/store/migrate.ts';
import { deleteExpiredSessions, deleteSession, findLiveSession, insertSession } from '../../platform/auth/session-ledger.ts';
import type { Store } from '../../platform/store/store.ts';
import { ENGINES } from '../support/engines.ts';

describe.each(ENGINES)('store on $name', (engine) => {
  let store: Store;
  let cleanup: () => Promise<void>;

  beforeAll(async () => {
    ({ store, cleanup } = await engine.open());
  });
  afterAll(async () => cleanup());

  describe('migrations', () => {
    it('records every migration once and applies nothing on a second run', async () => {
      const known = await loadMigrations();
      const recorded = await store.query<{ version: number }>('SELECT version FROM schema_migrations ORDER BY version');
      expect(recorded.rows.map((row) => row.version)).toEqual(known.map((migration) => migration.version));
      expect(await migrate(store)).toEqual([]);
    });

    it('refuses to start when an applied migration was edited afterwards', async () => {
      const known = await loadMigrations();
      const edited = known.map((migration, index) =>
        index === 0 ? { ...migration, sql: `${migration.sql}\n-- edited`, checksum: 'different' } : migration,
      );
      await expect(migrate(store, edited)).rejects.toThrow(/was changed after it was applied/);
    });

    it('rolls back a failing migration entirely', async () => {
      const known = await loadMigrations();
      const broken = [
        ...known,
        { version: 9998, name: 'creates_a_table', sql: 'CREATE TABLE should_not_exist (id int);', checksum: 'a' },
        { version: 9999, name: 'broken', sql: 'THIS IS NOT SQL;', checksum: 'b' },
      ];
      await expect(migrate(store, broken)).rejects.toThrow();
      const table = await store.query<{ present: boolean }>(
        `SELECT to_regclass('public.should_not_exist') IS NOT NULL AS present`,
      );
      expect(table.rows[0]?.present).toBe(false);
      const recorded = await store.query('SELECT version FROM schema_migrations WHERE version > 9000');
      expect(recorded.rows).toEqual([]);
    });
  });

  describe('row counts', () => {
    it('count the rows a SELECT returned and the rows a write touched, as pg does', async () => {
      expect((await store.query('SELECT generate_series(1, 3) AS n')).rowCount).toBe(3);
      expect((await store.query('SELECT 1 WHERE false')).rowCount).toBe(0);
      // One transaction: one connection, so the temporary table is there for every statement.
      const counts = await store.transaction(async (tx) => {
        await tx.query('CREATE TEMP TABLE counted (n int) ON COMMIT DROP');
        return [(await tx.query('INSERT INTO counted SELECT generate_series(1, 4)')).rowCount, (await tx.query('UPDATE counted SET n = n + 1 WHERE n > 2')).rowCount];
      });
      expect(counts).toEqual([4, 2]);
    });
  });

  describe('row values', () => {
    const sql = `SELECT 7::int8 AS id, 12.5::numeric AS score, '2026-01-02 03:04:05.678+02'::timestamptz AS at,
      NULL::timestamptz AS never`;
    const expected = { id: 7, score: 12.5, at: '2026-01-02T01:04:05.678Z', never: null };

    it('come back in one form: int8 and numeric as numbers, timestamptz as an ISO string in UTC', async () => {
      expect((await store.query(sql)).rows).toEqual([expected]);
      expect(await store.transaction(async (tx) => (await tx.query(sql)).rows)).toEqual([expected]);
    });
  });

  describe('audit events', () => {
    it('appends an event and replays the first one for the same idempotency key', async () => {
      const input = {
        entity_type: 'run',
        entity_id: 'alpha-1',
        event_type: 'run.created',
        payload: { attempt: 1 },
        idempotency_key: 'alpha-1:created',
      };
      const first = await store.transaction((tx) => appendAuditEvent(tx, input));
      const replay = await store.transaction((tx) => appendAuditEvent(tx, { ...input, payload: { attempt: 2 } }));
      expect(replay.id).toBe(first.id);
      expect(replay.payload).toEqual({ attempt: 1 });
      const page = await listAuditEventsPage(store, { entity_id: 'alpha-1' }, { offset: 0, limit: 10 });
      expect(page.total).toBe(1);
    });

    it('is append-only in the database itself: UPDATE, DELETE and TRUNCATE fail', async () => {
      await store.transaction((tx) =>
        appendAuditEvent(tx, { entity_type: 'run', entity_id: 'beta', event_type: 'run.created' }),
      );
      await expect(store.query(`UPDATE audit_events SET entity_id = 'x'`)).rejects.toThrow(/append-only/);
      await expect(store.query('DELETE FROM audit_events')).rejects.toThrow(/append-only/);
      // CASCADE: a plain TRUNCATE is refused already because core_snapshots refers to events; the trigger refuses both.
      await expect(store.query('TRUNCATE audit_events CASCADE')).rejects.toThrow(/append-only/);
      const page = await listAuditEventsPage(store, { entity_id: 'beta' }, { offset: 0, limit: 10 });
      expect(page.items).toHaveLength(1);
    });

    it('rejects event types that are not <entity>.<action>', async () => {
      await expect(
        store.transaction((tx) =>
          appendAuditEvent(tx, { entity_type: 'run', entity_id: 'gamma', event_type: 'Run Created' }),
        ),
      ).rejects.toThrow();
    });

    it('commits the event only with the change it records', async () => {
      await expect(
        store.transaction(async (tx) => {
          await appendAuditEvent(tx, { entity_type: 'run', entity_id: 'delta', event_type: 'run.created' });
          throw new Error('the change failed');
        }),
      ).rejects.toThrow('the change failed');
      const page = await listAuditEventsPage(store, { entity_id: 'delta' }, { offset: 0, limit: 10 });
      expect(page.total).toBe(0);
    });

    it('keeps the unfiltered total exact through replays and rollbacks', async () => {
      const counted = async () => (await store.query<{ n: number }>('SELECT count(*) AS n FROM audit_events')).rows[0]!.n;
      const listed = async () => (await listAuditEventsPage(store, {}, { offset: 0, limit: 1 })).total;
      const event = { entity_type: 'run', entity_id: 'total', event_type: 'run.created', idempotency_key: 'total-1' };
      await store.transaction((tx) => appendAuditEvent(tx, event));
      await store.transaction((tx) => appendAuditEvent(tx, event));
      await store
        .transaction(async (tx) => {
          await appendAuditEvent(tx, { ...event, idempotency_key: 'total-2' });
          throw new Error('rolled back');
        })
        .catch(() => undefined);
      await store.query(
        `INSERT INTO audit_events (entity_type, entity_id, event_type) SELECT 'run', 'bulk-' || n, 'run.created' FROM generate_series(1, 3) n`,
      );
      expect(await listed()).toBe(Number(await counted()));
    });

    it('lists newest first with filters, search and keyset pages', async () => {
      await store.transaction(async (tx) => {
        for (let index = 0; index < 7; index += 1) {
          await appendAuditEvent(tx, {
            entity_type: index % 2 === 0 ? 'paper_review' : 'queue_item',
            entity_id: `list-${index}`,
            event_type: index % 2 === 0 ? 'paper_review.draft_rewritten' : 'queue_item.requeued',
            payload: { index, note: index === 3 ? 'needs 100%_coverage' : 'plain' },
          });
        }
      });
      const all = await listAuditEventsPage(store, { search: 'list-' }, { offset: 0, limit: 3 });
      expect(all.total).toBe(7);
      expect(all.items.map((event) => event.entity_id)).toEqual(['list-6', 'list-5', 'list-4']);

      const papers = await listAuditEventsPage(store, { entity_type: 'paper_review', search: 'list-' }, { offset: 0, limit: 10 });
      expect(papers.total).toBe(4);
      expect(papers.items.every((event) => event.event_type === 'paper_review.draft_rewritten')).toBe(true);

      const literal = await listAuditEventsPage(store, { search: '100%_cov' }, { offset: 0, limit: 10 });
      expect(literal.items.map((event) => event.entity_id)).toEqual(['list-3']);
      const wildcardIsLiteral = await listAuditEventsPage(store, { search: '1_0' }, { offset: 0, limit: 10 });
      expect(wildcardIsLiteral.total).toBe(0);

      const byPayload = await listAuditEventsBefore(store, { payload: { index: 5 } }, { limit: 10 });
      expect(byPayload.map((event) => event.entity_id)).toEqual(['list-5']);

      const firstPage = await listAuditEventsBefore(store, { search: 'list-' }, { limit: 4 });
      const secondPage = await listAuditEventsBefore(store, { search: 'list-' }, { beforeId: firstPage.at(-1)!.id, limit: 4 });
      expect([...firstPage, ...secondPage].map((event) => event.entity_id)).toEqual(
        ['list-6', 'list-5', 'list-4', 'list-3', 'list-2', 'list-1', 'list-0'],
      );
    });
  });

  describe('idempotency keys', () => {
    it('runs a command once, replays the response, and refuses a different payload', async () => {
      let runs = 0;
      const request = { scope: 'test.command', key: 'k-1', payload: { a: 1, b: [1, 2] } };
      const first = await store.transaction((tx) => runIdempotent(tx, request, async () => ({ result: ++runs })));
      const replay = await store.transaction((tx) =>
        runIdempotent(tx, { ...request, payload: { b: [1, 2], a: 1 } }, async () => ({ result: ++runs })),
      );
      expect(first).toEqual({ response: { result: 1 }, replayed: false });
      expect(replay).toEqual({ response: { result: 1 }, replayed: true });
      await expect(
        store.transaction((tx) => runIdempotent(tx, { ...request, payload: { a: 2 } }, async () => ({ result: ++runs }))),
      ).rejects.toBeInstanceOf(IdempotencyConflictError);
      expect(runs).toBe(1);
    });

    it('keeps keys of different scopes apart', async () => {
      const one = await store.transaction((tx) =>
        runIdempotent(tx, { scope: 'scope.a', key: 'same', payload: 1 }, async () => 'a'),
      );
      const two = await store.transaction((tx) =>
        runIdempotent(tx, { scope: 'scope.b', key: 'same', payload: 2 }, async () => 'b'),
      );
      expect([one.response, two.response]).toEqual(['a', 'b']);
    });

    it('runs a command once when identical requests race', async () => {
      let runs = 0;
      const request = { scope: 'test.race', key: 'race-1', payload: { x: 1 } };
      const results = await Promise.all(
        Array.from({ length: 8 }, () =>
          store.transaction((tx) =>
            runIdempotent(tx, request, async () => {
              runs += 1;
              return { run: runs };
            }),
          ),
        ),
      );
      expect(runs).toBe(1);
      expect(new Set(results.map((result) => JSON.stringify(result.response)))).toEqual(new Set(['{"run":1}']));
    });

    it('hashes payloads independently of key order', () => {
      expect(payloadHash({ a: 1, b: { c: 2, d: 3 } })).toBe(payloadHash({ b: { d: 3, c: 2 }, a: 1 }));
      expect(payloadHash({ a: 1 })).not.toBe(payloadHash({ a: '1' }));
    });
  });

  describe('flags', () => {
    it('starts unpaused with maintenance off, and records changes', async () => {
      expect(await readFlags(store)).toEqual({ queue_paused: false, maintenance_mode: false });
      await store.transaction((tx) => setFlag(tx, 'queue_paused', true, 'operator'));
      expect(await readFlags(store)).toEqual({ queue_paused: true, maintenance_mode: false });
      await store.transaction((tx) => setFlag(tx, 'queue_paused', false, 'operator'));
    });
  });

  describe('sessions', () => {
    it('finds a live session and forgets it after deletion, idle timeout or absolute expiry', async () => {
      const hour = 60 * 60 * 1000;
      await store.transaction((tx) => insertSession(tx, { idHash: 'live', expiresAt: new Date(Date.now() + hour) }));
      await store.transaction((tx) => insertSession(tx, { idHash: 'expired', expiresAt: new Date(Date.now() - 1000) }));
      expect((await findLiveSession(store, 'live', hour))?.id_hash).toBe('live');
      expect(await findLiveSession(store, 'expired', hour)).toBeUndefined();
      await store.query(`UPDATE sessions SET last_seen_at = clock_timestamp() - interval '31 minutes' WHERE id_hash = 'live'`);
      expect(await findLiveSession(store, 'live', 30 * 60 * 1000)).toBeUndefined();
      expect(await deleteExpiredSessions(store, 30 * 60 * 1000)).toBe(2);
      expect(await store.transaction((tx) => deleteSession(tx, 'live'))).toBe(false);
    });
  });
});
