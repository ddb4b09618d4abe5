/**
 * Read-model benchmark (docs/testing.md#read-models): over 100k queue items (and their projects), 100k runs,
 * 10k papers and 1M audit events, GET /control/api/v1/overview, /v1/lanes, /v1/queue (the first page and one
 * 90,000 rows deep), /v1/runs and /v1/papers, each on the real app beside a bare node:http server calling the same
 * read functions (bench/read-models-server.ts), with 10 connections and then one.
 *   targets: every list p99 <= 15 ms and >= 0.9x the bare server's req/s; overview p99 <= 30 ms; a deep page
 *   costs what the first does.
 * One fresh Postgres database, dropped at the end.
 *   npm run bench:read-models
 * Knobs (environment): BENCH_DURATION_SEC=10 BENCH_WARMUP_SEC=2 BENCH_CONNECTIONS=10 BENCH_QUEUE=100000 BENCH_PAPERS=10000
 *   BENCH_EVENTS=1000000 (BENCH_QUICK=1: small counts, seconds; bench/knobs.ts); BENCH_KEEP_DATABASE=1 leaves the seeded database for a closer look (its name is printed).
 */
import type { ChildProcess } from 'node:child_process';
import { availableParallelism } from 'node:os';
import { fileURLToPath } from 'node:url';
import { encodeCursor } from '../platform/http/cursor.ts';
import { openStore } from '../platform/store/open-store.ts';
import type { Store } from '../platform/store/store.ts';
import { checkSameAnswer, loadNow, loadSideBySide, log, stopBenchServer, warmUp, yes, type LoadFigures } from './figures.ts';
import { knob } from './knobs.ts';
import { benchDatabaseUrl, dropDatabase, percentileTable, recreateDatabase, startBenchServer } from './support.ts';

const QUEUE_ROWS = knob('BENCH_QUEUE', 100_000, 1_000);
const PAPERS = knob('BENCH_PAPERS', 10_000, 100);
const EVENTS = knob('BENCH_EVENTS', 1_000_000, 2_000);
const DURATION_SEC = knob('BENCH_DURATION_SEC', 10, 1);
const CONNECTIONS = knob('BENCH_CONNECTIONS', 10, 4);
const WARMUP_SEC = knob('BENCH_WARMUP_SEC', 2, 0);
const ALONE_SEC = Math.max(1, Math.round(DURATION_SEC / 2));
const DEEP_OFFSET = Math.floor(QUEUE_ROWS * 0.9);
const TARGET = { ratio: 0.9, listP99: 15, overviewP99: 30 } as const;

const DATABASE = `rcp_bench_read_models_${process.pid}`;
const TOKEN = 'bench-token-0123456789abcdef0123';
const SERVER_SCRIPT = fileURLToPath(new URL('./read-models-server.ts', import.meta.url));
const auth = { authorization: `Bearer ${TOKEN}` };
const loadStart = loadNow();

// ---------------------------------------------------------------------------------------------------------------
// Seed: each ledger in one statement

/**
 * Item n: status by n % 20 (half completed, a fifth queued, the rest paused, blocked, needs_review, dispatch_error,
 * canceled, and queued but flagged), items 0 and 1 in flight on the two lanes; priorities and ranks repeat so pages
 * break inside ties. Run n belongs to item n, started 5 minutes after run n-1; every tenth run has a paper.
 */
async function seed(store: Store): Promise<void> {
  await store.query(
    `INSERT INTO projects (project_id, project_name, project_dir, workload_class, created_at)
     SELECT 'bench-' || lpad(n::text, 6, '0'), 'Bench project ' || n, 'bench/' || n,
            CASE WHEN n % 2 = 0 THEN 'gpu_required' ELSE 'cpu_only' END,
            timestamptz '2025-01-01 00:00:00+00' + n * interval '5 minutes'
       FROM generate_series(0, $1 - 1) AS n`,
    [QUEUE_ROWS],
  );
  await store.query(
    `INSERT INTO queue_items (project_id, project_name, status, manual_review_required, dispatch_priority, selection_rank,
                              workload_class, current_run_id, lane, created_at, updated_at)
     SELECT 'bench-' || lpad(n::text, 6, '0'), 'Bench project ' || n,
            CASE WHEN n = 0 THEN 'running' WHEN n = 1 THEN 'awaiting_wake'
                 ELSE (ARRAY['completed','completed','completed','completed','completed','completed','completed','completed',
                             'completed','completed','queued','queued','queued','queued','paused','blocked','needs_review',
                             'dispatch_error','canceled','queued'])[1 + n % 20] END,
            n % 20 = 19, (n % 7) * 10, n % 5,
            CASE WHEN n % 2 = 0 THEN 'gpu_required' ELSE 'cpu_only' END,
            CASE WHEN n < 2 THEN 'bench-' || lpad(n::text, 6, '0') || '-' || to_char(timestamptz '2025-01-01 00:00:00+00' + n * interval '5 minutes', 'YYYYMMDD"T"HH24MISS"Z"') END,
            CASE WHEN n < 2 OR n % 20 < 10 THEN (CASE WHEN n % 2 = 0 THEN 'gpu' ELSE 'cpu' END) END,
            timestamptz '2025-01-01 00:00:00+00' + n * interval '5 minutes',
            timestamptz '2025-06-01 00:00:00+00' + ((n::bigint * 7919) % 100003) * interval '1 minute'
       FROM generate_series(0, $1 - 1) AS n`,
    [QUEUE_ROWS],
  );
  await store.query(
    `INSERT INTO runs (run_id, project_id, workflow_id, state, lane, wake_gate_url, workload_class, requested_by, decision,
                       evidence, finished_at, created_at, updated_at)
     SELECT id, project_id, 'run:' || id, state, lane, 'http://127.0.0.1:9/' || lane, workload_class, 'bench', decision,
            jsonb_build_object('sufficient_for_paper', n % 4 <> 3), CASE WHEN n >= 2 THEN started + interval '2 hours' END, started,
            started + interval '2 hours'
       FROM (SELECT n, 'bench-' || lpad(n::text, 6, '0') AS project_id,
                    'bench-' || lpad(n::text, 6, '0') || '-' || to_char(timestamptz '2025-01-01 00:00:00+00' + n * interval '5 minutes', 'YYYYMMDD"T"HH24MISS"Z"') AS id,
                    CASE WHEN n = 0 THEN 'running' WHEN n = 1 THEN 'awaiting_wake'
                         ELSE (ARRAY['reconciled','reconciled','reconciled','reconciled','canceled','gate_error'])[1 + n % 6] END AS state,
                    CASE WHEN n % 2 = 0 THEN 'gpu' ELSE 'cpu' END AS lane,
                    CASE WHEN n % 2 = 0 THEN 'gpu_required' ELSE 'cpu_only' END AS workload_class,
                    (ARRAY['finalize_positive','inconclusive','negative'])[1 + n % 3] AS decision,
                    timestamptz '2025-01-01 00:00:00+00' + n * interval '5 minutes' AS started
               FROM generate_series(0, $1 - 1) AS n) AS r`,
    [QUEUE_ROWS],
  );
  await store.query(
    `INSERT INTO papers (paper_id, project_id, run_id, paper_status, review_status, rank_score, title, created_at, updated_at)
     SELECT r.project_id || ':' || r.run_id || ':draft', r.project_id, r.run_id,
            (ARRAY['draft_review','publication_draft','human_review_required','eligible','draft_review'])[1 + seq % 5],
            (ARRAY['unreviewed','triage_ready','in_review','changes_requested','approved_for_finalization','finalized'])[1 + seq % 6],
            ((seq * 2654435761) % 141)::int - 50, 'Bench paper ' || seq,
            r.finished_at, r.finished_at + ((seq * 104729) % 100003) * interval '1 minute'
       FROM (SELECT runs.*, row_number() OVER (ORDER BY run_id) AS seq FROM runs WHERE state = 'reconciled') AS r
      WHERE seq <= $1`,
    [PAPERS],
  );
  await store.query(
    `INSERT INTO corpus_imports (paper_id, corpus_repo, commit_sha, manifest_sha256, requested_by)
     SELECT paper_id, 'lab/corpus', 'abc1234', encode(sha256(convert_to(paper_id, 'UTF8')), 'hex'), 'bench'
       FROM papers WHERE review_status = 'finalized' AND rank_score % 2 = 0`,
  );
  await store.query(
    `INSERT INTO audit_events (entity_type, entity_id, event_type, payload, actor, created_at)
     SELECT 'run', 'bench-' || lpad((n % $2)::text, 6, '0'),
            (ARRAY['run.worker_accepted','run.session_started','run.reconciling','run.completed'])[1 + n % 4],
            jsonb_build_object('lane', CASE WHEN n % 2 = 0 THEN 'gpu' ELSE 'cpu' END, 'seq', n), 'bench',
            timestamptz '2025-01-01 00:00:00+00' + n * interval '1 second'
       FROM generate_series(1, $1) AS n`,
    [EVENTS, QUEUE_ROWS],
  );
  for (const table of ['projects', 'queue_items', 'runs', 'papers', 'corpus_imports', 'audit_events']) await store.query(`VACUUM ANALYZE ${table}`);
}

/** The cursor of the page that starts DEEP_OFFSET rows into the dispatch order, as the route renders keys. */
async function deepQueueCursor(store: Store): Promise<string> {
  const result = await store.query<{ key: string[] }>(
    `SELECT ARRAY[dispatch_priority::text, selection_rank::text, to_char(updated_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"'), project_id] AS key
       FROM queue_items ORDER BY dispatch_priority, selection_rank, updated_at, project_id OFFSET $1 LIMIT 1`,
    [DEEP_OFFSET - 1],
  );
  return encodeCursor({ sort: 'dispatch', key: result.rows[0]!.key });
}

// ---------------------------------------------------------------------------------------------------------------
// Load

interface PathFigures {
  name: string;
  path: string;
  target: number;
  app: LoadFigures;
  bare: LoadFigures;
  appAlone: LoadFigures;
  bareAlone: LoadFigures;
}

async function benchPath(appPort: number, barePort: number, name: string, path: string, target: number): Promise<PathFigures> {
  await checkSameAnswer(appPort, barePort, path, auth);
  const at = (port: number) => `http://127.0.0.1:${port}${path}`;
  await warmUp([at(appPort), at(barePort)], auth, WARMUP_SEC, CONNECTIONS);
  const { app, bare } = await loadSideBySide({ app: at(appPort), bare: at(barePort) }, auth, DURATION_SEC, CONNECTIONS);
  const { app: appAlone, bare: bareAlone } = await loadSideBySide({ app: at(appPort), bare: at(barePort) }, auth, ALONE_SEC, 1);
  log(`${name}: app ${app.rps.toFixed(0)} req/s p99 ${app.p99} ms, bare ${bare.rps.toFixed(0)} req/s p99 ${bare.p99} ms; alone p99 ${appAlone.p99} / ${bareAlone.p99} ms`);
  return { name, path, target, app, bare, appAlone, bareAlone };
}

// ---------------------------------------------------------------------------------------------------------------

async function main(): Promise<void> {
  const began = Date.now();
  await recreateDatabase(DATABASE);
  const url = benchDatabaseUrl(DATABASE);
  let servers: { port: number; child: ChildProcess }[] = [];
  try {
    const store = await openStore({ backend: 'pg', pgDatabaseUrl: url });
    log(`seeding ${QUEUE_ROWS} queue items and runs, ${PAPERS} papers, ${EVENTS} audit events`);
    const seeded = Date.now();
    await seed(store);
    log(`seeded in ${((Date.now() - seeded) / 1000).toFixed(0)} s`);
    const deep = await deepQueueCursor(store);
    await store.close();

    const app = await startBenchServer(SERVER_SCRIPT, ['fastify', url, TOKEN]);
    const bare = await startBenchServer(SERVER_SCRIPT, ['bare', url, TOKEN]);
    servers = [app, bare];
    const paths: [string, string, number][] = [
      ['v1/overview', '/control/api/v1/overview', TARGET.overviewP99],
      ['v1/lanes', '/control/api/v1/lanes', TARGET.listP99],
      ['v1/queue first page', '/control/api/v1/queue', TARGET.listP99],
      [`v1/queue ${DEEP_OFFSET} rows deep`, `/control/api/v1/queue?cursor=${encodeURIComponent(deep)}`, TARGET.listP99],
      ['v1/runs', '/control/api/v1/runs', TARGET.listP99],
      ['v1/papers', '/control/api/v1/papers', TARGET.listP99],
    ];
    const figures: PathFigures[] = [];
    for (const [name, path, target] of paths) figures.push(await benchPath(app.port, bare.port, name, path, target));
    printReport(figures, Date.now() - began);
  } finally {
    for (const server of servers) await stopBenchServer(server);
    if (process.env.BENCH_KEEP_DATABASE === '1') log(`kept database ${DATABASE}`);
    else await dropDatabase(DATABASE);
  }
}

function printReport(figures: PathFigures[], totalMs: number): void {
  console.log(`\nread-models bench: node ${process.version}, ${availableParallelism()} CPUs, load average ${loadStart} at the start and ${loadNow()} at the end`);
  console.log('The load generator, both servers and Postgres share this machine.\n');
  console.log(`${CONNECTIONS} connections, ${DURATION_SEC} s per side`);
  console.log(
    percentileTable(
      figures.map((f) => ({
        read: f.name,
        'app req/s': f.app.rps.toFixed(0),
        'app p50/p99 ms': `${f.app.p50} / ${f.app.p99}`,
        'bare req/s': f.bare.rps.toFixed(0),
        'bare p50/p99 ms': `${f.bare.p50} / ${f.bare.p99}`,
        ratio: (f.app.rps / f.bare.rps).toFixed(2),
        [`ratio >= ${TARGET.ratio}`]: yes(f.app.rps / f.bare.rps >= TARGET.ratio),
        'p99 target ms': f.target,
        'p99 met': yes(f.app.p99 <= f.target),
      })),
    ),
  );
  console.log(`\none connection, ${ALONE_SEC} s per side: what a request costs without queueing behind the others`);
  console.log(
    percentileTable(
      figures.map((f) => ({
        read: f.name,
        'app p50/p99 ms': `${f.appAlone.p50} / ${f.appAlone.p99}`,
        'bare p50/p99 ms': `${f.bareAlone.p50} / ${f.bareAlone.p99}`,
        'app p99 met': yes(f.appAlone.p99 <= f.target),
      })),
    ),
  );
  const first = figures.find((f) => f.name === 'v1/queue first page')!;
  const deep = figures.find((f) => f.name.includes('rows deep'))!;
  console.log(
    `\ndeep page vs first page (one connection): p50 ${deep.appAlone.p50} vs ${first.appAlone.p50} ms, p99 ${deep.appAlone.p99} vs ${first.appAlone.p99} ms; ` +
      `req/s at ${CONNECTIONS} connections ${deep.app.rps.toFixed(0)} vs ${first.app.rps.toFixed(0)}`,
  );
  console.log(`\nwhole bench ${(totalMs / 1000).toFixed(0)} s`);
}

await main();
