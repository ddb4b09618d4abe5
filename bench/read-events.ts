/**
 * Read-path benchmark: GET /control/api/events?page_size=50 and /control/api/v1/events over 100k audit events,
 * the real app beside a bare node:http server running the same SQL. Targets: ratio >= 0.6, p99 <= 15 ms.
 *   npm run bench            (BENCH_DURATION_SEC=10, BENCH_CONNECTIONS=10 by default)
 */
import { fileURLToPath } from 'node:url';
import autocannon from 'autocannon';
import { openStore } from '../store/open-store.ts';
import { benchDatabaseUrl, ensureDatabase, percentileTable, startBenchServer } from './support.ts';

const EVENT_COUNT = 100_000;
const DATABASE = 'rcp_bench_read_events';
const TOKEN = 'bench-token-0123456789abcdef0123';
const DURATION_SEC = Number(process.env.BENCH_DURATION_SEC ?? 10);
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 10);
const SERVER_SCRIPT = fileURLToPath(new URL('./read-events-server.ts', import.meta.url));

async function seed(url: string): Promise<void> {
  const store = await openStore({ backend: 'pg', pgDatabaseUrl: url });
  try {
    const existing = await store.query<{ n: number }>('SELECT count(*) AS n FROM audit_events');
    const missing = EVENT_COUNT - Number(existing.rows[0]?.n ?? 0);
    if (missing > 0) {
      console.log(`seeding ${missing} audit events`);
      await store.query(
        `INSERT INTO audit_events (entity_type, entity_id, event_type, payload)
         SELECT (ARRAY['run','queue_item','paper_review','research'])[1 + n % 4],
                'project-' || (n % 997),
                (ARRAY['run.state_changed','queue_item.requeued','paper_review.draft_rewritten','research.candidate_admitted'])[1 + n % 4],
                jsonb_build_object('seq', n, 'note', 'bench event ' || n)
         FROM generate_series(1, $1::int) AS n`,
        [missing],
      );
      await store.query('ANALYZE audit_events');
    }
  } finally {
    await store.close();
  }
}


async function measure(port: number, path: string) {
  const result = await autocannon({
    url: `http://127.0.0.1:${port}${path}`,
    headers: { authorization: `Bearer ${TOKEN}` },
    connections: CONNECTIONS,
    duration: DURATION_SEC,
  });
  if (result.non2xx > 0 || result.errors > 0) throw new Error(`${path}: ${result.non2xx} non-2xx, ${result.errors} errors`);
  return { rps: result.requests.average, p50: result.latency.p50, p99: result.latency.p99 };
}

async function main() {
  await ensureDatabase(DATABASE);
  const url = benchDatabaseUrl(DATABASE);
  await seed(url);

  const fastify = await startBenchServer(SERVER_SCRIPT, ['fastify', url, TOKEN]);
  const bare = await startBenchServer(SERVER_SCRIPT, ['bare', url, TOKEN]);
  try {
    const rows = [];
    for (const path of ['/control/api/events?page_size=50', '/control/api/v1/events?page_size=50']) {
      // A short warm-up so JIT and pool connections are in place before measuring.
      await autocannon({ url: `http://127.0.0.1:${fastify.port}${path}`, headers: { authorization: `Bearer ${TOKEN}` }, duration: 2 });
      await autocannon({ url: `http://127.0.0.1:${bare.port}${path}`, duration: 2 });
      const app = await measure(fastify.port, path);
      const baseline = await measure(bare.port, path);
      rows.push({
        endpoint: path,
        'app req/s': app.rps.toFixed(0),
        'app p50 ms': app.p50,
        'app p99 ms': app.p99,
        'bare req/s': baseline.rps.toFixed(0),
        'bare p50 ms': baseline.p50,
        'bare p99 ms': baseline.p99,
        ratio: (app.rps / baseline.rps).toFixed(2),
        'p99 <= 15 ms': app.p99 <= 15 ? 'yes' : 'no',
      });
    }
    console.log(`\n${EVENT_COUNT} audit events, ${CONNECTIONS} connections, ${DURATION_SEC} s per run, node ${process.version}\n`);
    console.log(percentileTable(rows));
  } finally {
    fastify.child.kill('SIGTERM');
    bare.child.kill('SIGTERM');
  }
}

await main();
