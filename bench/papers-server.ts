/**
 * One side of bench/papers.ts, run in its own process: either the real Fastify app or a bare node:http server running
 * the paper lists' SQL (listPapers, with the query the routes pass) on the same kind of pool. Prints `listening <port>`
 * when ready.
 *   papers-server.ts <fastify|bare> <database url> <token> <state dir> <project root>
 */
import { createServer as createHttpServer } from 'node:http';
import pino from 'pino';
import { createServer } from '../api/create-server.ts';
import { createLogger } from '../bin/runtime/logger.ts';
import { SECRET_FIELDS } from '../config/schema.ts';
import { pageOf } from '../http/validation.ts';
import { ServiceMetrics } from '../http/metrics.ts';
import { NO_ROUTING } from '../services/dispatch-settings.ts';
import { createPgStore } from '../store/pg-store.ts';
import { listPapers } from '../store/papers.ts';

const [mode, databaseUrl, token, stateDir, projectRoot] = process.argv.slice(2) as ['fastify' | 'bare', string, string, string, string];
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
      // The paper reads and the draft-next dry run never reach Temporal.
      runs: { startRun: noTemporal, deliverCallback: noTemporal, cancelRun: noTemporal, workflowUiUrl: () => null },
      papers: {
        settings: { stateDir, projectRoot, writer: { provider: 'deterministic', hosted: null, fallback: true }, evidenceSync: null },
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
  // The routes' defaults (api/papers.ts PapersQuery and ReviewsQuery): page 1, 50 a page, no filters.
  const server = createHttpServer(async (request, response) => {
    const url = new URL(request.url ?? '/', 'http://bench');
    const page = Number(url.searchParams.get('page') ?? 1);
    const pageSize = Number(url.searchParams.get('page_size') ?? 50);
    let body: unknown;
    if (url.pathname === '/control/api/paper-reviews' || url.pathname === '/control/api/publication-automation') {
      const query = { page, page_size: pageSize, search: undefined, review_status: undefined, paper_status: undefined, sort: url.searchParams.get('sort') ?? '-rank_score' };
      const { items, total } = await listPapers(store, query);
      body = pageOf(items, total, query);
    } else if (url.pathname === '/control/api/papers') {
      const query = { page, page_size: pageSize, search: undefined, sort: url.searchParams.get('sort') ?? '-updated_at' };
      const { items, total } = await listPapers(store, { ...query, paper_status: undefined });
      body = pageOf(items, total, query);
    } else {
      response.writeHead(404, { 'content-type': 'application/json' });
      response.end('{"error":"not found"}');
      return;
    }
    response.writeHead(200, { 'content-type': 'application/json' });
    response.end(JSON.stringify(body));
  });
  server.listen(0, '127.0.0.1', () => {
    const address = server.address();
    console.log(`listening ${typeof address === 'object' && address ? address.port : 0}`);
  });
}
