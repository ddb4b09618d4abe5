/**
 * One side of bench/read-events.ts, run in its own process: either the real Fastify app or a bare node:http server
 * calling the same read functions the routes call (same SQL, same pool, same body), without validation,
 * authentication or Fastify. Prints `listening <port>` when ready.
 */
import { auditEventsByCursor, EVENT_ORDERS } from '../api/console/event-routes.ts';
import { pageOf } from '../platform/http/validation.ts';
import { listAuditEventsPage } from '../platform/store/audit-events.ts';
import { createPgStore } from '../platform/store/pg-store.ts';
import { startBareServer, startBenchApp } from './bench-app.ts';

const [mode, databaseUrl, token] = process.argv.slice(2) as ['fastify' | 'bare', string, string];
const store = createPgStore({ connectionString: databaseUrl });

if (mode === 'fastify') {
  await startBenchApp(store, token);
} else {
  startBareServer(async (url) => {
    const pageSize = Number(url.searchParams.get('page_size') ?? 50);
    if (url.pathname === '/control/api/events') {
      const { items, total } = await listAuditEventsPage(store, {}, { offset: 0, limit: pageSize });
      return pageOf(items, total, { page: 1, page_size: pageSize });
    }
    return auditEventsByCursor(store.reads, {}, { order: EVENT_ORDERS[0]!, after: null, limit: pageSize });
  });
}
