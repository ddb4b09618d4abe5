import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createServer } from '../../api/create-server.ts';
import { createLogger } from '../../platform/observability/logger.ts';
import { appendAuditEvent } from '../../platform/store/audit-events.ts';
import { openStore } from '../../platform/store/open-store.ts';
import { StoreReadOnlyError, type Store } from '../../platform/store/store.ts';
import { httpOnlyDeps, LogCapture, TEST_TOKEN } from '../support/app.ts';
import { createTestDatabase, type TestDatabase } from '../support/database.ts';

let database: TestDatabase;
let store: Store;

beforeAll(async () => {
  database = await createTestDatabase();
  const writer = await openStore({ backend: 'pg', pgDatabaseUrl: database.url });
  await writer.transaction((tx) =>
    appendAuditEvent(tx, { entity_type: 'run', entity_id: 'seen', event_type: 'run.created' }),
  );
  await writer.close();
  store = await openStore({ backend: 'pg_readonly', pgDatabaseUrl: database.url });
});
afterAll(async () => {
  await store.close();
  await database.drop();
});

describe('pg_readonly', () => {
  it('refuses writes in the store and in the database itself', async () => {
    expect(store.backend).toBe('pg_readonly');
    await expect(store.transaction(async () => undefined)).rejects.toBeInstanceOf(StoreReadOnlyError);
    await expect(
      store.query(`INSERT INTO audit_events (entity_type, entity_id, event_type) VALUES ('run', 'x', 'run.created')`),
    ).rejects.toThrow(/read-only transaction/);
  });

  it('serves reads and answers 501 to a write over HTTP', async () => {
    const logger = createLogger({ level: 'silent', secretConfigFields: [], destination: new LogCapture() });
    const app = await createServer(httpOnlyDeps(store), logger);
    try {
      const auth = { authorization: `Bearer ${TEST_TOKEN}` };
      const events = await app.inject({ method: 'GET', url: '/control/api/events', headers: auth });
      expect(events.json()).toMatchObject({ total: 1, items: [{ entity_id: 'seen' }] });
      const health = await app.inject({ method: 'GET', url: '/control/health', headers: auth });
      expect(health.json()).toMatchObject({ ok: true, store_backend: 'pg_readonly' });

      const login = await app.inject({ method: 'POST', url: '/control/api/session', payload: { token: TEST_TOKEN } });
      expect(login.statusCode).toBe(501);
      expect(login.json()).toEqual({ detail: expect.stringContaining('read-only') });

      // A dry run only reads, so it still answers; the live command is refused.
      const smoke = (dry_run: boolean) =>
        app.inject({ method: 'POST', url: '/control/api/research/generate-batch', headers: auth, payload: { requested_by: 'op', dry_run } });
      expect((await smoke(true)).statusCode).toBe(200);
      expect((await smoke(false)).statusCode).toBe(501);
    } finally {
      await app.close();
    }
  });

  it('refuses to start on a database whose schema is behind this build', async () => {
    const empty = await createTestDatabase();
    try {
      const raw = await openStore({ backend: 'pg', pgDatabaseUrl: empty.url });
      await raw.query('DELETE FROM schema_migrations');
      await raw.close();
      await expect(openStore({ backend: 'pg_readonly', pgDatabaseUrl: empty.url })).rejects.toThrow(/lacks migrations 1/);
    } finally {
      await empty.drop();
    }
  });
});
