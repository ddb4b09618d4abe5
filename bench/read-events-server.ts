/**
 * One side of bench/read-events.ts, run in its own process: either the real Fastify app or a bare node:http server
 * running the same SQL on the same kind of pool. Prints `listening <port>` when ready.
 */
import { listAuditEventsBefore, listAuditEventsPage } from '../store/audit-events.ts';
import { createPgStore } from '../store/pg-store.ts';
import { startBareServer, startBenchApp } from './bench-app.ts';

const [mode, databaseUrl, token] = process.argv.slice(2) as ['fastify' | 'bare', string, string];
const store = createPgStore({ connectionString: databaseUrl });

if (mode === 'fastify') {
  await startBenchApp(store, token);
} else {
  startBareServer(async (url) => {
    const pageSize = Number(url.searchParams.get('page_size') ?? 50);
    if (url.pathname === '/control/api/events') {
      const page = await listAuditEventsPage(store, {}, { offset: 0, limit: pageSize });
      return { ...page, page: 1, page_size: pageSize, has_more: page.total > pageSize };
    }
    const rows = await listAuditEventsBefore(store, {}, { limit: pageSize + 1 });
    return { items: rows.slice(0, pageSize), page: { page_size: pageSize, returned: Math.min(rows.length, pageSize), has_more: rows.length > pageSize } };
  });
}
