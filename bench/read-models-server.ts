/**
 * One side of bench/read-models.ts, run in its own process: either the real Fastify app or a bare node:http server
 * calling the same read functions the v1 routes call (same SQL, same pool kind, same body), without validation,
 * authentication or Fastify. Prints `listening <port>` when ready.
 *   read-models-server.ts <fastify|bare> <database url> <token>
 */
import { withOperatorActions } from '../api/console/list-routes.ts';
import { v1Page } from '../api/v1-paging.ts';
import { workerRoutingFrom } from '../capabilities/runs/domain/worker-lanes.ts';
import { decodeCursor } from '../platform/http/cursor.ts';
import type { DispatchSettings } from '../capabilities/runs/dispatch-settings.ts';
import { AGENT_DEFAULTS } from '../capabilities/runs/dispatch-settings.ts';
import { readLanesWithWindows } from '../capabilities/runs/lanes.ts';
import { readOverview } from '../capabilities/console/overview.ts';
import type { KeysetOrder, KeysetPage } from '../platform/store/keyset.ts';
import { PAPER_ORDERS, walkPapers } from '../capabilities/papers/paper-reads.ts';
import { createPgStore } from '../platform/store/pg-store.ts';
import { QUEUE_ORDERS, walkQueueItems } from '../capabilities/queue/queue-reads.ts';
import { RUN_ORDERS, walkRuns } from '../capabilities/runs/run-reads.ts';
import { startBareServer, startBenchApp } from './bench-app.ts';

const [mode, databaseUrl, token] = process.argv.slice(2) as ['fastify' | 'bare', string, string];
const store = createPgStore({ connectionString: databaseUrl });

/** Two lanes, as the seed routes its items (bench/read-models.ts). */
const BENCH_DISPATCH: DispatchSettings = {
  liveDispatchEnabled: false,
  routing: workerRoutingFrom({
    worker_targets: {
      gpu: { wake_gate_url: 'http://127.0.0.1:9/gpu', bearer_token: 'gpu-token-0123456789', role: 'gpu_worker' },
      cpu: { wake_gate_url: 'http://127.0.0.1:9/cpu', bearer_token: 'cpu-token-0123456789', role: 'cpu_worker' },
    },
    workload_machine_targets: { gpu_required: 'gpu', cpu_only: 'cpu' },
  }),
  completionCallbackToken: 'bench-callback-token-0123456789',
  dispatchTimeoutSec: 30,
  maxWaitAfterIdleSec: 60,
  agent: AGENT_DEFAULTS,
};

if (mode === 'fastify') {
  await startBenchApp(store, token, { dispatch: BENCH_DISPATCH });
} else {
  const reads = store.reads;
  /** The route's defaults: the first sort, 50 a page, no filters; the cursor decoded as the route does. */
  const walkOf = (url: URL, orders: readonly KeysetOrder[]) => {
    const cursor = url.searchParams.get('cursor');
    const order = orders[0]!;
    return { order, after: cursor ? decodeCursor(cursor)!.key : null, limit: Number(url.searchParams.get('page_size') ?? 50) };
  };
  const page = async <Row>(url: URL, orders: readonly KeysetOrder[], read: (walk: ReturnType<typeof walkOf>) => Promise<KeysetPage<Row>>) => {
    const walk = walkOf(url, orders);
    return v1Page(await read(walk), walk.order, walk.limit);
  };
  startBareServer(async (url) => {
    switch (url.pathname) {
      case '/control/api/v1/overview':
        return readOverview(reads, { active_limit: 10, event_limit: 20 });
      case '/control/api/v1/lanes':
        return readLanesWithWindows(reads, BENCH_DISPATCH);
      case '/control/api/v1/queue':
        return withOperatorActions(await page(url, QUEUE_ORDERS, (walk) => walkQueueItems(reads, { group: 'all', ...walk })));
      case '/control/api/v1/runs':
        return page(url, RUN_ORDERS, (walk) => walkRuns(reads, walk));
      case '/control/api/v1/papers':
        return page(url, PAPER_ORDERS, (walk) => walkPapers(reads, walk));
      default:
        return undefined;
    }
  });
}
