/**
 * Read-path benchmark: GET /control/api/events?page_size=50 and /control/api/v1/events over 100k audit events,
 * the real app beside a bare node:http server running the same SQL and answering the same body. Targets: ratio >= 0.9,
 * p99 <= 15 ms.
 *   npm run bench
 * Knobs (environment): BENCH_DURATION_SEC=10 BENCH_WARMUP_SEC=2 BENCH_CONNECTIONS=10 BENCH_EVENTS=100000
 *   (BENCH_QUICK=1: small counts, seconds; bench/knobs.ts). The full run keeps its seeded rcp_bench_read_events
 *   database for the next; a quick run seeds a database of its own and drops it.
 */
import { fileURLToPath } from 'node:url';
import { openStore } from '../platform/store/open-store.ts';
import { checkSameAnswer, loadNow, loadSideBySide, stopBenchServer, warmUp } from './figures.ts';
import { knob, QUICK } from './knobs.ts';
import { benchDatabaseUrl, dropDatabase, ensureDatabase, percentileTable, startBenchServer } from './support.ts';

const EVENT_COUNT = knob('BENCH_EVENTS', 100_000, 2_000);
const DATABASE = QUICK ? `rcp_bench_read_events_quick_${process.pid}` : 'rcp_bench_read_events';
const TOKEN = 'bench-token-0123456789abcdef0123';
const DURATION_SEC = knob('BENCH_DURATION_SEC', 10, 1);
const WARMUP_SEC = knob('BENCH_WARMUP_SEC', 2, 0);
const CONNECTIONS = knob('BENCH_CONNECTIONS', 10, 4);
const TARGET = { ratio: 0.9, p99: 15 } as const;
const SERVER_SCRIPT = fileURLToPath(new URL('./read-events-server.ts', import.meta.url));
const PATHS = ['/control/api/events?page_size=50', '/control/api/v1/events?page_size=50'];
const auth = { authorization: `Bearer ${TOKEN}` };

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


async function main() {
  const loadStart = loadNow();
  await ensureDatabase(DATABASE);
  const url = benchDatabaseUrl(DATABASE);
  await seed(url);

  const fastify = await startBenchServer(SERVER_SCRIPT, ['fastify', url, TOKEN]);
  const bare = await startBenchServer(SERVER_SCRIPT, ['bare', url, TOKEN]);
  try {
    const rows = [];
    for (const path of PATHS) {
      await checkSameAnswer(fastify.port, bare.port, path, auth);
      const at = (port: number) => `http://127.0.0.1:${port}${path}`;
      await warmUp([at(fastify.port), at(bare.port)], auth, WARMUP_SEC, CONNECTIONS);
      const { app, bare: baseline } = await loadSideBySide({ app: at(fastify.port), bare: at(bare.port) }, auth, DURATION_SEC, CONNECTIONS);
      const ratio = app.rps / baseline.rps;
      rows.push({
        endpoint: path,
        'app req/s': app.rps.toFixed(0),
        'app p50 ms': app.p50,
        'app p99 ms': app.p99,
        'bare req/s': baseline.rps.toFixed(0),
        'bare p50 ms': baseline.p50,
        'bare p99 ms': baseline.p99,
        ratio: ratio.toFixed(2),
        [`ratio >= ${TARGET.ratio}`]: ratio >= TARGET.ratio ? 'yes' : 'NO',
        [`p99 <= ${TARGET.p99} ms`]: app.p99 <= TARGET.p99 ? 'yes' : 'NO',
      });
    }
    console.log(`\n${EVENT_COUNT} audit events, ${CONNECTIONS} connections, ${DURATION_SEC} s per run, node ${process.version}, load average ${loadStart} at the start and ${loadNow()} at the end\n`);
    console.log(percentileTable(rows));
  } finally {
    await stopBenchServer(fastify);
    await stopBenchServer(bare);
    if (QUICK) await dropDatabase(DATABASE);
  }
}

await main();
