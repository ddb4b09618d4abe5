/**
 * Paper benchmark.
 *   (1) GET /control/api/paper-reviews (-rank_score) and GET /control/api/papers (-updated_at), 50 a page, over 10k
 *       papers: the real app beside a bare node:http server running the same SQL.  targets: ratio >= 0.6, p99 <= 20 ms
 *       (then each side again with one connection, for a request's latency without queueing behind the others)
 *   (2) dry-run POST /control/papers/draft-next over 10k completed runs, 9,990 of them with a drafted paper; the
 *       dry run reads the evidence files of the undrafted runs' projects from a temp project_root.  target: p99 <= 25 ms
 *   (3) the deterministic draft of one paper (deterministicDraft) and its automated checklist (judgeDraft), in process.
 * One fresh Postgres database, dropped at the end; each HTTP side in its own process (bench/papers-server.ts).
 *   npm run bench:papers
 * Knobs (environment): BENCH_DURATION_SEC=10 BENCH_WARMUP_SEC=2 BENCH_CONNECTIONS=10 BENCH_PAPERS=10000
 *   BENCH_DRAFT_CALLS=2000 BENCH_DRAFTS=2000 (BENCH_QUICK=1: small counts, seconds; bench/knobs.ts); BENCH_EXPLAIN=1 prints the candidate query's plan even when (2) meets its target.
 */
import type { ChildProcess } from 'node:child_process';
import { mkdir, mkdtemp, rm } from 'node:fs/promises';
import { availableParallelism, tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { DRAFT_NEXT_CANDIDATES } from '../capabilities/papers/paper-drafting.ts';
import { readEvidence } from '../capabilities/papers/paper-evidence.ts';
import { ServiceSecrets } from '../platform/config/service-secrets.ts';
import { openStore } from '../platform/store/open-store.ts';
import { listDraftCandidates } from '../capabilities/papers/store/draft-ledger.ts';
import type { Store } from '../platform/store/store.ts';
import { loadNow, loadSideBySide, log, ms, stopBenchServer, timeEach, warmUp, yes, type LoadFigures, type Stats } from './figures.ts';
import { knob } from './knobs.ts';
import { writeProjectFiles } from './paper-bench-evidence.ts';
import { benchDraft, type DraftFigures } from './paper-draft-bench.ts';
import { benchDatabaseUrl, dropDatabase, percentileTable, recreateDatabase, startBenchServer } from './support.ts';

const PAPER_COUNT = knob('BENCH_PAPERS', 10_000, 200);
const PROJECT_COUNT = Math.max(10, Math.floor(PAPER_COUNT / 5));
const UNDRAFTED = 10;
const DURATION_SEC = knob('BENCH_DURATION_SEC', 10, 1);
const WARMUP_SEC = knob('BENCH_WARMUP_SEC', 2, 0);
const CONNECTIONS = knob('BENCH_CONNECTIONS', 10, 4);
const ALONE_SEC = Math.max(1, Math.round(DURATION_SEC / 2));
const DRAFT_CALLS = knob('BENCH_DRAFT_CALLS', 2000, 50);
const DRAFTS = knob('BENCH_DRAFTS', 2000, 50);
const TARGET = { ratio: 0.6, listP99: 20, draftNextP99: 25 } as const;

const DATABASE = `rcp_bench_papers_${process.pid}`;
const TOKEN = 'bench-token-0123456789abcdef0123';
const SERVER_SCRIPT = fileURLToPath(new URL('./papers-server.ts', import.meta.url));

const loadStart = loadNow();

// ---------------------------------------------------------------------------------------------------------------
// Figures

function row(measure: string, figures: Stats): Record<string, string> {
  return { measure, calls: String(figures.n), 'p50 ms': ms(figures.p50), 'p99 ms': ms(figures.p99), 'mean ms': ms(figures.mean), 'max ms': ms(figures.max) };
}

// ---------------------------------------------------------------------------------------------------------------
// Database


const RUN_EVIDENCE = { run_notes: true, decision_file: true, results_json_files: 1, decision: 'finalize_positive', sufficient_for_paper: true };

/**
 * Projects, completed runs and one drafted paper per run, each in one statement. Run n belongs to project
 * n % PROJECT_COUNT and started n * 53 minutes after 2025-01-01 (its run_id carries that time, so every id is unique).
 * Papers get rank scores from -50 to 90 (rankPaper's range, many ties) and updated_at scattered over two years.
 */
async function seed(store: Store): Promise<void> {
  await store.query(
    `INSERT INTO projects (project_id, project_name, project_dir, workload_class)
     SELECT 'bench-p' || lpad(n::text, 5, '0'), 'Bench project ' || n || ': sparse attention at small scale',
            'bench/bench-p' || lpad(n::text, 5, '0'),
            (ARRAY['inference_eval', 'training', 'gpu_required', 'cpu_only'])[1 + n % 4]
       FROM generate_series(0, $1::int - 1) AS n`,
    [PROJECT_COUNT],
  );
  await store.query(
    `INSERT INTO runs (run_id, project_id, workflow_id, state, lane, wake_gate_url, workload_class, requested_by, session_id,
                       decision, decision_summary, evidence, finished_at, created_at, updated_at)
     SELECT s.project_id || '-' || to_char(s.started AT TIME ZONE 'UTC', 'YYYYMMDD"T"HH24MISS"Z"'),
            s.project_id, 'run:' || s.project_id || ':' || s.n, 'reconciled', 'lane-' || lpad((s.n % 20)::text, 2, '0'),
            'http://127.0.0.1:9/gate/lane-' || lpad((s.n % 20)::text, 2, '0'), 'inference_eval', 'bench',
            'session-' || s.n, 'finalize_positive', 'The method beat the baseline on the main metric.', $2::jsonb,
            s.started + ((s.n::bigint * 7919) % 720) * interval '1 minute', s.started,
            s.started + ((s.n::bigint * 7919) % 720 + 2) * interval '1 minute'
       FROM (SELECT n, 'bench-p' || lpad((n % $3)::text, 5, '0') AS project_id,
                    timestamptz '2025-01-01 00:00:00+00' + n * interval '53 minutes' AS started
               FROM generate_series(0, $1::int - 1) AS n) AS s`,
    [PAPER_COUNT, JSON.stringify(RUN_EVIDENCE), PROJECT_COUNT],
  );
  await store.query(
    `INSERT INTO papers (paper_id, project_id, run_id, paper_status, review_status, rank_score, rank_reasons, title, writer,
                         draft_dir, draft_artifacts, evidence_summary, draft_count, drafted_at, created_at, updated_at)
     SELECT r.project_id || ':' || r.run_id || ':draft', r.project_id, r.run_id, 'draft_review',
            (ARRAY['unreviewed', 'triage_ready', 'in_review', 'changes_requested'])[1 + (r.seq % 4)],
            s.score,
            jsonb_build_array('evidence: run notes and decision file (+20)', 'result files: 1 results JSON file (+10)',
                              'decision: finalize_positive (+25)', 'recency: finished 40 days before ranking (+0)',
                              'review: unreviewed (' || (s.score - 55) || ')'),
            pr.project_name || ': a positive result', 'deterministic',
            'papers/' || r.project_id || ':' || r.run_id || ':draft',
            jsonb_build_array(
              jsonb_build_object('path', 'papers/' || r.run_id || '/paper.md', 'sha256', encode(sha256(convert_to(r.run_id, 'UTF8')), 'hex'), 'bytes', 4000 + r.seq % 3000),
              jsonb_build_object('path', 'papers/' || r.run_id || '/draft.json', 'sha256', encode(sha256(convert_to(r.project_id, 'UTF8')), 'hex'), 'bytes', 600 + r.seq % 200)),
            jsonb_build_object('sha256', encode(sha256(convert_to(r.workflow_id, 'UTF8')), 'hex'),
                               'files', jsonb_build_array('run_notes.md', '.research/decision.json', 'results/main/metrics.json'),
                               'decision', 'finalize_positive'),
            1, r.finished_at + interval '5 minutes', r.finished_at + interval '1 minute',
            timestamptz '2024-06-01 00:00:00+00' + ((r.seq::bigint * 104729) % 100003) * interval '10 minutes'
       FROM (SELECT runs.*, row_number() OVER (ORDER BY run_id) AS seq FROM runs) AS r
       JOIN projects pr ON pr.project_id = r.project_id
       CROSS JOIN LATERAL (SELECT ((r.seq * 2654435761) % 141)::int - 50 AS score) AS s`,
  );
  for (const table of ['projects', 'runs', 'papers']) await store.query(`VACUUM ANALYZE ${table}`);
}

// ---------------------------------------------------------------------------------------------------------------
// Servers and load


const auth = { authorization: `Bearer ${TOKEN}` };


async function getJson(port: number, path: string): Promise<{ items: { paper_id: string; rank_score: number; updated_at: string }[]; total: number }> {
  const response = await fetch(`http://127.0.0.1:${port}${path}`, { headers: auth });
  if (response.status !== 200) throw new Error(`${path} answered ${response.status}: ${(await response.text()).slice(0, 400)}`);
  return (await response.json()) as { items: { paper_id: string; rank_score: number; updated_at: string }[]; total: number };
}

/** The two sides answer the same page, so the comparison is of the same work. */
async function checkSameAnswer(fastifyPort: number, barePort: number, path: string): Promise<void> {
  const [app, bare] = await Promise.all([getJson(fastifyPort, path), getJson(barePort, path)]);
  const ids = (page: typeof app) => page.items.map((item) => item.paper_id).join();
  if (app.total !== PAPER_COUNT || app.items.length !== 50 || ids(app) !== ids(bare) || app.total !== bare.total) {
    throw new Error(`${path}: the app and the bare server disagree (app ${app.items.length} of ${app.total}, bare ${bare.items.length} of ${bare.total})`);
  }
}

// ---------------------------------------------------------------------------------------------------------------
// (1) paper lists

const LIST_PATHS = ['/control/api/paper-reviews', '/control/api/papers'] as const;

interface ListFigures {
  path: string;
  app: LoadFigures;
  bare: LoadFigures;
  /** One connection at a time: the latency of a request on its own, without queueing behind the others. */
  appAlone: LoadFigures;
  bareAlone: LoadFigures;
}

async function benchLists(fastifyPort: number, barePort: number): Promise<ListFigures[]> {
  const figures: ListFigures[] = [];
  for (const path of LIST_PATHS) {
    await checkSameAnswer(fastifyPort, barePort, path);
    const urls = { app: `http://127.0.0.1:${fastifyPort}${path}`, bare: `http://127.0.0.1:${barePort}${path}` };
    await warmUp([urls.app, urls.bare], auth, WARMUP_SEC, CONNECTIONS);
    log(`(1) ${path}: ${DURATION_SEC} s each side, ${CONNECTIONS} connections`);
    const { app, bare } = await loadSideBySide(urls, auth, DURATION_SEC, CONNECTIONS);
    log(`(1) ${path}: app ${app.rps.toFixed(0)} req/s p99 ${app.p99} ms, bare ${bare.rps.toFixed(0)} req/s p99 ${bare.p99} ms`);
    const { app: appAlone, bare: bareAlone } = await loadSideBySide(urls, auth, ALONE_SEC, 1);
    figures.push({ path, app, bare, appAlone, bareAlone });
  }
  return figures;
}

// ---------------------------------------------------------------------------------------------------------------
// (2) draft-next dry run

interface DraftNextFigures {
  http: Stats;
  query: Stats;
  evidence: Stats;
  answer: { paper_id: string; skipped: number; found: string[] };
  candidates: number;
  plan: string[] | null;
}

const CANDIDATE_SQL_FOR_EXPLAIN = `EXPLAIN (ANALYZE, BUFFERS)
SELECT r.run_id, r.project_id, pr.project_name, pr.project_dir, r.decision, r.decision_summary, r.evidence,
       r.finished_at, p.paper_id, p.paper_status
  FROM runs r
  JOIN projects pr ON pr.project_id = r.project_id
  LEFT JOIN papers p ON p.run_id = r.run_id
 WHERE r.state = 'reconciled' AND r.decision = ANY (ARRAY['finalize_positive'])
   AND r.evidence -> 'sufficient_for_paper' = 'true'::jsonb
   AND (r.paper_status IS NULL OR r.paper_status = 'eligible')
 ORDER BY r.finished_at ASC NULLS LAST, r.run_id
 LIMIT ${DRAFT_NEXT_CANDIDATES}`;

/**
 * Takes the papers of UNDRAFTED runs (in distinct projects) away, so draft-next has that many candidates, and writes
 * evidence for some of their projects: in candidate order, no directory, notes only, no directory, then complete
 * evidence, and complete evidence for a few later ones. The dry run skips three and reads the fourth's files.
 */
async function prepareDraftNext(store: Store, projectRoot: string): Promise<number> {
  const step = Math.floor(PAPER_COUNT / UNDRAFTED);
  const runs = await store.query<{ run_id: string }>(
    `SELECT run_id FROM (SELECT run_id, row_number() OVER (ORDER BY run_id) - 1 AS i FROM runs) AS r WHERE i % $1 = 7 AND i < $2`,
    [step, step * UNDRAFTED],
  );
  const deleted = await store.query('DELETE FROM papers WHERE run_id = ANY($1::text[])', [runs.rows.map((r) => r.run_id)]);
  if (deleted.rowCount !== UNDRAFTED) throw new Error(`expected to take away ${UNDRAFTED} papers, took ${deleted.rowCount}`);
  for (const table of ['papers', 'runs']) await store.query(`VACUUM ANALYZE ${table}`);
  const candidates = await listDraftCandidates(store, { force: false, limit: DRAFT_NEXT_CANDIDATES });
  if (candidates.length !== UNDRAFTED || new Set(candidates.map((c) => c.project_dir)).size !== UNDRAFTED) {
    throw new Error(`expected ${UNDRAFTED} candidates in distinct projects, found ${candidates.length}`);
  }
  const layout: ('none' | 'notes_only' | 'complete')[] = ['none', 'notes_only', 'none', 'complete', 'none', 'complete', 'none', 'notes_only', 'complete', 'none'];
  for (const [index, candidate] of candidates.entries()) {
    const which = layout[index] ?? 'none';
    if (which !== 'none') await writeProjectFiles(projectRoot, candidate.project_dir, candidate.project_name, which);
  }
  return candidates.length;
}

async function benchDraftNext(store: Store, port: number, projectRoot: string): Promise<DraftNextFigures> {
  const candidates = await prepareDraftNext(store, projectRoot);
  const call = async () => {
    const response = await fetch(`http://127.0.0.1:${port}/control/papers/draft-next`, {
      method: 'POST',
      headers: { ...auth, 'content-type': 'application/json' },
      body: JSON.stringify({ dry_run: true, requested_by: 'bench' }),
    });
    const body = (await response.json()) as { action?: string; paper_id?: string; skipped?: unknown[]; evidence?: { complete: boolean; found: string[] } };
    if (response.status !== 200 || body.action !== 'dry_run_draft' || body.skipped?.length !== 3 || !body.evidence?.complete) {
      throw new Error(`draft-next dry run answered ${response.status}: ${JSON.stringify(body).slice(0, 600)}`);
    }
    return body;
  };
  const first = await call();
  for (let i = 0; i < 100; i++) await call();
  log(`(2) draft-next dry run: ${DRAFT_CALLS} calls one after another`);
  const http = await timeEach(DRAFT_CALLS, call);
  log(`(2) draft-next dry run: p50 ${ms(http.p50)} ms, p99 ${ms(http.p99)} ms`);

  // Its parts alone, in this process: the candidate query, and the evidence reads of the four candidates looked at.
  for (let i = 0; i < 20; i++) await listDraftCandidates(store, { force: false, limit: DRAFT_NEXT_CANDIDATES });
  const query = await timeEach(Math.min(500, DRAFT_CALLS), () => listDraftCandidates(store, { force: false, limit: DRAFT_NEXT_CANDIDATES }));
  const looked = (await listDraftCandidates(store, { force: false, limit: DRAFT_NEXT_CANDIDATES })).slice(0, 4);
  const readAll = async () => {
    for (const candidate of looked) await readEvidence(projectRoot, candidate.project_dir, { secrets: ServiceSecrets.none });
  };
  for (let i = 0; i < 20; i++) await readAll();
  const evidence = await timeEach(Math.min(500, DRAFT_CALLS), readAll);

  let plan: string[] | null = null;
  if (http.p99 > TARGET.draftNextP99 || process.env.BENCH_EXPLAIN === '1') {
    plan = (await store.query<{ 'QUERY PLAN': string }>(CANDIDATE_SQL_FOR_EXPLAIN)).rows.map((r) => r['QUERY PLAN']);
  }
  return { http, query, evidence, answer: { paper_id: first.paper_id ?? '', skipped: first.skipped?.length ?? 0, found: first.evidence?.found ?? [] }, candidates, plan };
}

// ---------------------------------------------------------------------------------------------------------------

async function main(): Promise<void> {
  const benchStart = performance.now();
  const dir = await mkdtemp(join(tmpdir(), 'rcp-bench-papers-'));
  const stateDir = join(dir, 'state');
  const projectRoot = join(dir, 'projects');
  await mkdir(stateDir, { recursive: true });
  await mkdir(projectRoot, { recursive: true });
  let store: Store | undefined;
  let fastify: { port: number; child: ChildProcess } | undefined;
  let bare: { port: number; child: ChildProcess } | undefined;
  let databaseCreated = false;
  try {
    await recreateDatabase(DATABASE);
    databaseCreated = true;
    const url = benchDatabaseUrl(DATABASE);
    store = await openStore({ backend: 'pg', pgDatabaseUrl: url });
    log(`seeding ${PROJECT_COUNT} projects, ${PAPER_COUNT} completed runs and ${PAPER_COUNT} papers`);
    const seedStart = performance.now();
    await seed(store);
    log(`seeded in ${((performance.now() - seedStart) / 1000).toFixed(1)} s`);

    fastify = await startBenchServer(SERVER_SCRIPT, ['fastify', url, TOKEN, stateDir, projectRoot]);
    bare = await startBenchServer(SERVER_SCRIPT, ['bare', url, TOKEN, stateDir, projectRoot]);
    const lists = await benchLists(fastify.port, bare.port);
    await stopBenchServer(bare);
    bare = undefined;

    const draftNext = await benchDraftNext(store, fastify.port, projectRoot);
    await stopBenchServer(fastify);
    fastify = undefined;

    const draft = await benchDraft(projectRoot, DRAFTS);
    printReport(lists, draftNext, draft, performance.now() - benchStart);
  } finally {
    await stopBenchServer(fastify);
    await stopBenchServer(bare);
    await store?.close().catch(() => undefined);
    if (databaseCreated) await dropDatabase(DATABASE).catch((error: unknown) => console.error('drop database:', error));
    await rm(dir, { recursive: true, force: true });
  }
}

function printReport(lists: ListFigures[], draftNext: DraftNextFigures, draft: DraftFigures, totalMs: number): void {
  console.log(`\npapers bench: node ${process.version}, ${availableParallelism()} CPUs, load average ${loadStart} at the start and ${loadNow()} at the end`);
  console.log('The load generator, both servers and Postgres share this machine.\n');

  console.log(`(1) GET paper lists, page_size 50, default sort, over ${PAPER_COUNT} papers; ${CONNECTIONS} connections, ${DURATION_SEC} s per side`);
  console.log(
    percentileTable(
      lists.map(({ path, app, bare }) => ({
        endpoint: path,
        'app req/s': app.rps.toFixed(0),
        'app p50 ms': app.p50,
        'app p99 ms': app.p99,
        'bare req/s': bare.rps.toFixed(0),
        'bare p50 ms': bare.p50,
        'bare p99 ms': bare.p99,
        ratio: (app.rps / bare.rps).toFixed(2),
        [`ratio >= ${TARGET.ratio}`]: yes(app.rps / bare.rps >= TARGET.ratio),
        [`p99 <= ${TARGET.listP99} ms`]: yes(app.p99 <= TARGET.listP99),
      })),
    ),
  );

  console.log(`\n    the same with one connection (${ALONE_SEC} s per side): what a request costs without queueing behind the others`);
  console.log(
    percentileTable(
      lists.map(({ path, appAlone, bareAlone }) => ({
        endpoint: path,
        'app req/s': appAlone.rps.toFixed(0),
        'app p50 ms': appAlone.p50,
        'app p99 ms': appAlone.p99,
        'bare req/s': bareAlone.rps.toFixed(0),
        'bare p50 ms': bareAlone.p50,
        'bare p99 ms': bareAlone.p99,
      })),
    )
      .split('\n')
      .map((line) => `    ${line}`)
      .join('\n'),
  );

  console.log(`\n(2) dry-run POST /control/papers/draft-next over ${PAPER_COUNT} completed runs, ${PAPER_COUNT - draftNext.candidates} with a drafted paper`);
  console.log(`    answer: would draft ${draftNext.answer.paper_id} after skipping ${draftNext.answer.skipped} (evidence read: ${draftNext.answer.found.join(', ')})`);
  console.log(
    percentileTable([
      row('draft-next dry run (HTTP round trip, one caller)', draftNext.http),
      row('  listDraftCandidates alone', draftNext.query),
      row('  readEvidence of the 4 candidates looked at', draftNext.evidence),
    ]),
  );
  if (draftNext.plan) console.log(`\n    candidate query plan:\n${draftNext.plan.map((line) => `      ${line}`).join('\n')}`);

  console.log(`\n(3) deterministic draft: notes ${draft.notesBytes} bytes, ${draft.resultFiles} results files with ${draft.numbers} numbers -> ${draft.markdownBytes} bytes of Markdown`);
  console.log(
    percentileTable([
      row('deterministicDraft', draft.draft),
      row('judgeDraft (with resultValues, as activities/papers/paper-activities.ts calls it)', draft.judge),
    ]),
  );
  console.log(`    automated checklist passed: ${draft.passed ? 'yes' : `no (${draft.failed.join('; ')})`}`);

  console.log('\nsummary');
  console.log(
    percentileTable([
      ...lists.flatMap(({ path, app, bare }) => [
        { measure: `(1) ${path} app / bare req/s`, value: `${app.rps.toFixed(0)} / ${bare.rps.toFixed(0)} = ${(app.rps / bare.rps).toFixed(2)}x`, target: `>= ${TARGET.ratio}x`, met: yes(app.rps / bare.rps >= TARGET.ratio) },
        { measure: `(1) ${path} app p50 / p99`, value: `${app.p50} / ${app.p99} ms`, target: `p99 <= ${TARGET.listP99} ms`, met: yes(app.p99 <= TARGET.listP99) },
      ]),
      { measure: '(2) draft-next dry run p50 / p99', value: `${ms(draftNext.http.p50)} / ${ms(draftNext.http.p99)} ms`, target: `p99 <= ${TARGET.draftNextP99} ms`, met: yes(draftNext.http.p99 <= TARGET.draftNextP99) },
      { measure: '(3) deterministicDraft median / p99', value: `${ms(draft.draft.p50)} / ${ms(draft.draft.p99)} ms`, target: '-', met: '-' },
      { measure: '(3) judgeDraft median / p99', value: `${ms(draft.judge.p50)} / ${ms(draft.judge.p99)} ms`, target: '-', met: '-' },
    ]),
  );
  console.log(`\nwhole bench ${(totalMs / 1000).toFixed(0)} s`);
}

await main();
