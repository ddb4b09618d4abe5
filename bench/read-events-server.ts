/**
 * One side of bench/read-events.ts, run in its own process: either the real Fastify app or a bare node:http server
 * running the same SQL on the same kind of pool. Prints `listening <port>` when ready.
 */
import { createServer as createHttpServer } from 'node:http';
import { tmpdir } from 'node:os';
import pino from 'pino';
import { createServer } from '../api/create-server.ts';
import { createLogger } from '../bin/runtime/logger.ts';
import { SECRET_FIELDS } from '../config/schema.ts';
import { listAuditEventsBefore, listAuditEventsPage } from '../store/audit-events.ts';
import { NO_ROUTING } from '../services/dispatch-settings.ts';
import { createPgStore } from '../store/pg-store.ts';
import { ServiceMetrics } from '../http/metrics.ts';

const [mode, databaseUrl, token] = process.argv.slice(2) as ['fastify' | 'bare', string, string];
const store = createPgStore({ connectionString: databaseUrl });

const noTemporal = () => Promise.reject(new Error('the benchmark server has no Temporal connection'));

if (mode === 'fastify') {
  // The production logger at its default level, writing where nothing reads it.
  const logger = createLogger({ level: 'info', secretConfigFields: SECRET_FIELDS, destination: pino.destination('/dev/null') });
  const app = await createServer(
    {
      store,
      controlApiToken: token,
      sessionCookieSecure: false,
      dbPath: store.location,
      defaultWorkloadClass: 'inference_eval',
      dispatch: { liveDispatchEnabled: false, routing: NO_ROUTING, completionCallbackToken: token, dispatchTimeoutSec: 30, maxWaitAfterIdleSec: 60 },
      // The event reads never reach Temporal.
      runs: { startRun: noTemporal, deliverCallback: noTemporal, cancelRun: noTemporal, workflowUiUrl: () => null },
      papers: {
        settings: { stateDir: tmpdir(), projectRoot: tmpdir(), writer: { provider: 'deterministic', hosted: null, fallback: true }, evidenceSync: null },
        launcher: { startStep: noTemporal, stepResult: noTemporal, runRewriteBatch: noTemporal },
      },
      metrics: new ServiceMetrics(),
      core: { mode: 'shadow', enforceEnabled: false },
      legacyNotesApiEnabled: false,
    },
    logger,
  );
  await app.listen({ host: '127.0.0.1', port: 0 });
  const address = app.server.address();
  console.log(`listening ${typeof address === 'object' && address ? address.port : 0}`);
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
  server.listen(0, '127.0.0.1', () => {
    const address = server.address();
    console.log(`listening ${typeof address === 'object' && address ? address.port : 0}`);
  });
}
