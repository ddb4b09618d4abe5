/**
 * One side of bench/papers.ts, run in its own process: either the real Fastify app or a bare node:http server running
 * the paper lists' SQL (listPapers, with the query the routes pass) on the same kind of pool. Prints `listening <port>`
 * when ready.
 *   papers-server.ts <fastify|bare> <database url> <token> <state dir> <project root>
 */
import { pageOf } from '../platform/http/validation.ts';
import { createPgStore } from '../platform/store/pg-store.ts';
import { startBareServer, startBenchApp } from './bench-app.ts';
import { listPapers } from '../capabilities/papers/paper-ledger.ts';

const [mode, databaseUrl, token, stateDir, projectRoot] = process.argv.slice(2) as ['fastify' | 'bare', string, string, string, string];
const store = createPgStore({ connectionString: databaseUrl });

if (mode === 'fastify') {
  await startBenchApp(store, token, { stateDir, projectRoot });
} else {
  // The routes' defaults (api/papers/paper-routes.ts PapersQuery and ReviewsQuery): page 1, 50 a page, no filters.
  startBareServer(async (url) => {
    const page = Number(url.searchParams.get('page') ?? 1);
    const pageSize = Number(url.searchParams.get('page_size') ?? 50);
    if (url.pathname === '/control/api/paper-reviews' || url.pathname === '/control/api/publication-automation') {
      const query = { page, page_size: pageSize, search: undefined, review_status: undefined, paper_status: undefined, sort: url.searchParams.get('sort') ?? '-rank_score' };
      const { items, total } = await listPapers(store, query);
      return pageOf(items, total, query);
    }
    if (url.pathname === '/control/api/papers') {
      const query = { page, page_size: pageSize, search: undefined, sort: url.searchParams.get('sort') ?? '-updated_at' };
      const { items, total } = await listPapers(store, { ...query, paper_status: undefined });
      return pageOf(items, total, query);
    }
    return undefined;
  });
}
