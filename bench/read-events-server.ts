/**
 * One side of bench/read-events.ts, run in its own process: either the real Fastify app or a bare node:http server
 * running the same SQL on the same kind of pool. Prints `listening <port>` when ready.
 */
import { createServer as createHttpServer } from 'node:http';
import { listAuditEventsBefore, listAuditEventsPage } from '../store/audit-events.ts';
import { createPgStore } from '../store/pg-store.ts';
import { announce, startBenchApp } from './bench-app.ts';

const [mode, databaseUrl, token] = process.argv.slice(2) as ['fastify' | 'bare', string, string];
const store = createPgStore({ connectionString: databaseUrl });

if (mode === 'fastify') {
  await startBenchApp(store, token);
} else {
  const server = createHttpServer(async (request, response) => {
    const url = new URL(request.url ?? '/', 'http://bench');
    const pageSize = Number(url.searchParams.get('page_size') ?? 50);
    let body: unknown;
    if (url.pathname === '/control/api/events') {
      const page = await listAuditEventsPage(store, {}, { offset: 0, limit: pageSize });
      body = { ...page, page: 1, page_size: pageSize, has_more: page.total > pageSize };
    } else {
      const rows = await listAuditEventsBefore(store, {}, { limit: pageSize + 1 });
      body = { items: rows.slice(0, pageSize), page: { page_size: pageSize, returned: Math.min(rows.length, pageSize), has_more: rows.length > pageSize } };
    }
    response.writeHead(200, { 'content-type': 'application/json' });
    response.end(JSON.stringify(body));
  });
  server.listen(0, '127.0.0.1', () => announce(server));
}
