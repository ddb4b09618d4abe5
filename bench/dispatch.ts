/**
 * Dispatch benchmark: the control plane's run path with an instantly finishing agent (bench/support/instant-gate.ts).
 *   (a) dry-run POST /control/dispatch-next p50/p99 over 100k queued rows on 20 lanes       target p99 <= 20 ms
 *   (b) live dispatch -> worker accepted, and finishing callback -> completed, p50/p99, beside
 *       bare workflows with one activity on the same Temporal server                           target <= 2x
 *   (c) 200 runs over 20 lanes through the full path, 20 parallel callers: runs/min, lost claims per run,
 *       live_dispatch answer p50, lost runs, doubled runs         target >= 600/min, <= 2, <= 300 ms, 0, 0
 *   (d) live dispatch answer p99 while 20 draft-next calls wait on a slow hosted writer, against idle, in one run
 *       (bench/support/writer-load.ts)                                                          target <= 1.2x
 * One Temporal dev server (headless) and one fresh Postgres database (dropped at the end); the control plane runs in
 * this process (startControlPlane), as `npm start` runs it.
 *   npm run bench:dispatch
 * Knobs (environment): BENCH_QUEUED_ROWS=100000 BENCH_DRY_RUNS=2000 BENCH_DRY_RUNS_BUSY=300 BENCH_LIVE_RUNS=60
 *   BENCH_FULL_RUNS=200 BENCH_LANES=20 BENCH_CALLERS=20 BENCH_DRAFTS=20 BENCH_LOAD_CALLS=40 BENCH_LOG_LEVEL=error (BENCH_QUICK=1: small counts, seconds;
 *   bench/knobs.ts)
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { availableParallelism, tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Client, Connection } from '@temporalio/client';
import { bundleWorkflowCode, NativeConnection, Worker } from '@temporalio/worker';
import pino from 'pino';
import { startControlPlane, type RunningControlPlane } from '../bin/control-plane-process.ts';
import { locateTemporalCli, temporalCliInstallHint } from '../platform/temporal/temporal-cli.ts';
import { freePort, startTemporalDevServer, type TemporalDevServer } from '../platform/temporal/temporal-dev-server.ts';
import { ConfigFileSchema, type Config } from '../platform/config/schema.ts';
import { workerRoutingFrom } from '../capabilities/runs/domain/worker-lanes.ts';
import { nextDispatchCandidate } from '../capabilities/runs/dispatch-candidates.ts';
import { openStore } from '../platform/store/open-store.ts';
import type { Store } from '../platform/store/store.ts';
import { loadNow, log, ms, stats, type Stats } from './figures.ts';
import { knob, QUICK } from './knobs.ts';
import { benchDatabaseUrl, dropDatabase, percentileTable, recreateDatabase } from './support.ts';
import { epochMs, InstantGate } from './support/instant-gate.ts';
import { HeldWriter, measureUnderWriterLoad, seedDraftCandidates, type WriterLoadFigures } from './support/writer-load.ts';
import { goSignal, readyQuery, type bareSignalWorkflow, type bareWorkflow } from './workflows/bare.ts';

const QUEUED_ROWS = knob('BENCH_QUEUED_ROWS', 100_000, 2_000);
const DRY_RUNS = knob('BENCH_DRY_RUNS', 2000, 100);
const DRY_RUNS_BUSY = knob('BENCH_DRY_RUNS_BUSY', 300, 30);
const LIVE_RUNS = knob('BENCH_LIVE_RUNS', 60, 5);
const FULL_RUNS = knob('BENCH_FULL_RUNS', 200, 20);
const LANES = knob('BENCH_LANES', 20, 4);
const CALLERS = knob('BENCH_CALLERS', 20, 4);
const DRAFTS = knob('BENCH_DRAFTS', 20, 4);
const LOAD_CALLS = knob('BENCH_LOAD_CALLS', 40, 5);
const LOG_LEVEL = process.env.BENCH_LOG_LEVEL ?? 'error';
const WARMUP = QUICK ? 2 : 10;
const FULL_PATH_DEADLINE_MS = 300_000;

const CONTROL_TOKEN = 'bench-control-token-0123456789abcdef';
const GATE_TOKEN = 'bench-gate-token-0123456789abcdef';
const CALLBACK_TOKEN = 'bench-callback-token-0123456789abcd';
const DATABASE = `rcp_bench_dispatch_${process.pid}`;
const CONTROL_QUEUE = `bench-control-plane-${process.pid}`;
const BARE_QUEUE = `bench-bare-${process.pid}`;
const BARE_WORKFLOWS = fileURLToPath(new URL('./workflows/bare.ts', import.meta.url));

const laneName = (index: number) => `lane-${String(index).padStart(2, '0')}`;
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const loadStart = loadNow();

// ---------------------------------------------------------------------------------------------------------------
// Figures

const ratio = (value: number, baseline: number) => (baseline > 0 ? `${(value / baseline).toFixed(2)}x` : '-');

// ---------------------------------------------------------------------------------------------------------------
// Database and control plane


function benchConfig(dir: string, port: number, gate: InstantGate, temporalAddress: string, writerUrl: string): Config {
  const targets = Object.fromEntries(
    Array.from({ length: LANES }, (_, index) => [laneName(index), { wake_gate_url: gate.laneUrl(laneName(index)), bearer_token: GATE_TOKEN, role: 'gpu_worker' }]),
  );
  const parsed = ConfigFileSchema.parse({
    roles: ['control_plane'],
    control_api_bearer_token: CONTROL_TOKEN,
    completion_callback_url: `http://127.0.0.1:${port}/control/api/worker-callback`,
    completion_callback_token: CALLBACK_TOKEN,
    state_dir: join(dir, 'state'),
    project_root: join(dir, 'projects'),
    dispatch_script_path: join(dir, 'unused-dispatch.sh'),
    listen_host: '127.0.0.1',
    listen_port: port,
    control_plane_store_backend: 'pg',
    pg_database_url: benchDatabaseUrl(DATABASE),
    temporal_address: temporalAddress,
    temporal_task_queue: CONTROL_QUEUE,
    live_dispatch_enabled: true,
    dispatch_timeout_sec: 30,
    max_wait_after_idle_sec: 600,
    default_workload_class: 'unknown',
    worker_targets: targets,
    paper_writer_provider: 'openai_compatible',
    paper_writer_base_url: writerUrl,
    paper_writer_model: 'bench-writer',
    paper_writer_timeout_sec: 600,
  });
  return { ...parsed, research_provider_api_key: undefined };
}

interface ApiAnswer {
  status: number;
  body: Record<string, unknown>;
}

function controlApi(baseUrl: string) {
  return async (path: string, body: unknown): Promise<ApiAnswer> => {
    const response = await fetch(`${baseUrl}${path}`, {
      method: 'POST',
      headers: { authorization: `Bearer ${CONTROL_TOKEN}`, 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });
    const text = await response.text();
    return { status: response.status, body: (text ? JSON.parse(text) : {}) as Record<string, unknown> };
  };
}

/**
 * Projects and their queue rows in two statements. In order (the runs of (b) and (c)), item i goes to lane i % LANES
 * and sorts before item i + 1. Spread (the long queue of (a)): priorities 0-99 and ranks 0-999 scattered over the
 * rows, each priority on every lane, as a long real queue has them.
 */
async function seedItems(store: Store, prefix: string, count: number, options: { spreadPriorities: boolean }): Promise<void> {
  const lane = options.spreadPriorities ? `'lane-' || lpad(((n / 100) % $3)::text, 2, '0')` : `'lane-' || lpad((n % $3)::text, 2, '0')`;
  const order = options.spreadPriorities ? 'n % 100, (n * 7919) % 1000' : '10, n';
  await store.query(
    `INSERT INTO projects (project_id, project_name, project_dir, workload_class, machine_target)
     SELECT $1 || lpad(n::text, 6, '0'), 'Bench project ' || n, 'bench/' || $1 || n, 'unknown', ${lane}
       FROM generate_series(0, $2::int - 1) AS n`,
    [prefix, count, LANES],
  );
  await store.query(
    `INSERT INTO queue_items (project_id, project_name, dispatch_priority, selection_rank, machine_target, workload_class)
     SELECT $1 || lpad(n::text, 6, '0'), 'Bench project ' || n, ${order}, ${lane}, 'unknown'
       FROM generate_series(0, $2::int - 1) AS n`,
    [prefix, count, LANES],
  );
  await store.query('ANALYZE projects');
  await store.query('ANALYZE queue_items');
}

// ---------------------------------------------------------------------------------------------------------------
// (a) dry-run dispatch-next over a long queue

interface DryRunScenario {
  name: string;
  busyLanes: number;
  http: Stats;
  sql: Stats;
  action: string;
}

async function benchDryRun(store: Store, api: ReturnType<typeof controlApi>, config: Config): Promise<DryRunScenario[]> {
  log(`(a) seeding ${QUEUED_ROWS} queued rows over ${LANES} lanes`);
  const seedStart = performance.now();
  await seedItems(store, 'seed-', QUEUED_ROWS, { spreadPriorities: true });
  log(`(a) seeded in ${((performance.now() - seedStart) / 1000).toFixed(1)} s`);
  const routing = workerRoutingFrom(config);
  const scenarios: DryRunScenario[] = [];
  const busyCounts = [0, Math.floor(LANES / 2), LANES - 1, LANES];
  for (const busyLanes of busyCounts) {
    // A busy lane holds one running item (the first of its lane in dispatch order), as a claimed run leaves it.
    const busy = Array.from({ length: busyLanes }, (_, index) => laneName(index));
    await store.query(
      `UPDATE queue_items SET status = 'running', lane = machine_target
        WHERE project_id IN (SELECT DISTINCT ON (machine_target) project_id FROM queue_items
                              WHERE machine_target = ANY($1::text[]) AND status = 'queued'
                              ORDER BY machine_target, dispatch_priority, selection_rank, updated_at, project_id)
          AND NOT EXISTS (SELECT 1 FROM queue_items active WHERE active.lane = queue_items.machine_target AND active.status = 'running')`,
      [busy],
    );
    // The noop case scans the whole queue (~0.1 s a call), so it gets fewer calls to keep the bench short.
    const iterations = busyLanes === 0 ? DRY_RUNS : busyLanes === LANES ? Math.min(150, DRY_RUNS_BUSY) : DRY_RUNS_BUSY;
    const expected = busyLanes < LANES ? 'dry_run_dispatch' : 'noop';
    const call = () => api('/control/dispatch-next', { dry_run: true, requested_by: 'bench', force_preflight: false });
    for (let i = 0; i < (busyLanes === LANES ? 10 : 50); i++) await call();
    const samples: number[] = [];
    for (let i = 0; i < iterations; i++) {
      const started = performance.now();
      const answer = await call();
      samples.push(performance.now() - started);
      if (answer.status !== 200 || answer.body.action !== expected) {
        throw new Error(`dry run answered ${answer.status} ${String(answer.body.action)}, expected ${expected}: ${JSON.stringify(answer.body).slice(0, 400)}`);
      }
    }
    // The candidate query alone, without HTTP, flags and the active count.
    const sqlSamples: number[] = [];
    for (let i = 0; i < Math.min(busyLanes === LANES ? 50 : 200, iterations); i++) {
      const started = performance.now();
      await nextDispatchCandidate(store, routing);
      sqlSamples.push(performance.now() - started);
    }
    const name = busyLanes === 0 ? `all ${LANES} lanes idle` : busyLanes === LANES ? `all ${LANES} lanes busy (noop)` : `${busyLanes} of ${LANES} lanes busy`;
    const scenario = { name, busyLanes, http: stats(samples), sql: stats(sqlSamples), action: expected };
    scenarios.push(scenario);
    log(`(a) ${name}: p50 ${ms(scenario.http.p50)} ms, p99 ${ms(scenario.http.p99)} ms over ${iterations} calls`);
  }
  return scenarios;
}

// ---------------------------------------------------------------------------------------------------------------
// (b) live dispatch and callback latency, beside bare workflows

interface LiveLatency {
  dispatch: Stats;
  callback: Stats;
  stages: Record<string, Stats>;
}

async function transitionTimes(store: Store, runId: string): Promise<Map<string, number>> {
  const result = await store.query<{ transition: string; at: number }>(
    `SELECT transition, extract(epoch FROM created_at) * 1000 AS at FROM run_transitions WHERE run_id = $1`,
    [runId],
  );
  return new Map(result.rows.map((row) => [row.transition, Number(row.at)]));
}

async function waitForTransition(store: Store, runId: string, transition: string, timeoutMs = 30_000): Promise<Map<string, number>> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const times = await transitionTimes(store, runId);
    if (times.has(transition)) return times;
    if (Date.now() > deadline) throw new Error(`${runId} did not reach ${transition} within ${timeoutMs} ms (has: ${[...times.keys()].join(', ')})`);
    await sleep(3);
  }
}

async function benchLiveLatency(store: Store, api: ReturnType<typeof controlApi>, gate: InstantGate): Promise<LiveLatency> {
  gate.setAutoFinish(false);
  const total = WARMUP + LIVE_RUNS;
  await seedItems(store, 'live-', total, { spreadPriorities: false });
  const dispatch: number[] = [];
  const callback: number[] = [];
  const stageSamples: Record<string, number[]> = {
    'request → claimed': [],
    'claimed → prepared (preflight, prepare)': [],
    'prepared → worker_accepted (dispatch)': [],
    'worker_accepted → HTTP answer': [],
    'finishing callback → wake_received': [],
    'wake_received → completed (reconcile)': [],
  };
  for (let i = 0; i < total; i++) {
    const sentAt = epochMs();
    const answer = await api('/control/dispatch-next', { dry_run: false, requested_by: 'bench' });
    const answeredAt = epochMs();
    if (answer.status !== 200 || answer.body.action !== 'live_dispatch') {
      throw new Error(`live dispatch answered ${answer.status}: ${JSON.stringify(answer.body).slice(0, 400)}`);
    }
    const runId = String(answer.body.run_id);
    // session_started first, applied before the finishing callback is sent, so the finishing one is timed alone.
    await gate.postStarted(runId);
    await waitForTransition(store, runId, 'session_started');
    const finished = await gate.postFinished(runId);
    if (finished.ignored) throw new Error(`the finishing callback of ${runId} was ignored`);
    const times = await waitForTransition(store, runId, 'completed');
    if (i < WARMUP) continue;
    const at = (name: string) => times.get(name) ?? NaN;
    dispatch.push(answeredAt - sentAt);
    callback.push(at('completed') - finished.sentAt);
    stageSamples['request → claimed']!.push(at('claimed') - sentAt);
    stageSamples['claimed → prepared (preflight, prepare)']!.push(at('prepared') - at('claimed'));
    stageSamples['prepared → worker_accepted (dispatch)']!.push(at('worker_accepted') - at('prepared'));
    stageSamples['worker_accepted → HTTP answer']!.push(answeredAt - at('worker_accepted'));
    stageSamples['finishing callback → wake_received']!.push(at('wake_received') - finished.sentAt);
    stageSamples['wake_received → completed (reconcile)']!.push(at('completed') - at('wake_received'));
  }
  return {
    dispatch: stats(dispatch),
    callback: stats(callback),
    stages: Object.fromEntries(Object.entries(stageSamples).map(([name, samples]) => [name, stats(samples)])),
  };
}

interface Baseline {
  startToResult: Stats;
  signalToResult: Stats;
  stop(): Promise<void>;
}

async function benchBareWorkflows(address: string): Promise<Baseline> {
  const { code } = await bundleWorkflowCode({ workflowsPath: BARE_WORKFLOWS, logger: quietLogger });
  const workerConnection = await NativeConnection.connect({ address });
  const worker = await Worker.create({
    connection: workerConnection,
    namespace: 'default',
    taskQueue: BARE_QUEUE,
    workflowBundle: { code },
    activities: { touch: async (input: string) => input },
  });
  const running = worker.run();
  const connection = await Connection.connect({ address });
  const client = new Client({ connection, namespace: 'default' });
  const stop = async () => {
    if (worker.getState() === 'RUNNING') worker.shutdown();
    await running.catch(() => undefined);
    await connection.close();
    await workerConnection.close();
  };
  try {
    const startToResult: number[] = [];
    const signalToResult: number[] = [];
    for (let i = 0; i < WARMUP + LIVE_RUNS; i++) {
      const started = performance.now();
      await client.workflow.execute<typeof bareWorkflow>('bareWorkflow', { taskQueue: BARE_QUEUE, workflowId: `bare-${process.pid}-${i}`, args: ['x'] });
      const elapsed = performance.now() - started;
      if (i >= WARMUP) startToResult.push(elapsed);
    }
    for (let i = 0; i < WARMUP + LIVE_RUNS; i++) {
      const handle = await client.workflow.start<typeof bareSignalWorkflow>('bareSignalWorkflow', {
        taskQueue: BARE_QUEUE,
        workflowId: `bare-signal-${process.pid}-${i}`,
        args: ['x'],
      });
      // The query answers once the first workflow task ran, so the signal meets a waiting workflow.
      await handle.query(readyQuery);
      const started = performance.now();
      await handle.signal(goSignal);
      await handle.result();
      const elapsed = performance.now() - started;
      if (i >= WARMUP) signalToResult.push(elapsed);
    }
    return { startToResult: stats(startToResult), signalToResult: stats(signalToResult), stop };
  } catch (error) {
    await stop();
    throw error;
  }
}

const quietLogger = {
  log: () => undefined,
  trace: () => undefined,
  debug: () => undefined,
  info: () => undefined,
  warn: () => undefined,
  error: (message: string, meta?: Record<string, unknown>) => console.error(message, meta ?? ''),
};

// ---------------------------------------------------------------------------------------------------------------
// (c) many runs over many lanes through the full path

interface FullPath {
  runs: number;
  completed: number;
  lost: number;
  doubled: number;
  doubledDetail: string;
  laneOverlaps: number;
  elapsedMs: number;
  runsPerMin: number;
  answers: Record<string, number>;
  liveAnswer: Stats;
  statuses: string;
  callbacksIgnored: number;
  callbackErrors: number;
}

async function benchFullPath(store: Store, api: ReturnType<typeof controlApi>, gate: InstantGate): Promise<FullPath> {
  gate.setAutoFinish(true);
  const prefix = 'full-';
  await seedItems(store, prefix, FULL_RUNS, { spreadPriorities: false });
  const countCompleted = async () =>
    Number((await store.query<{ n: number }>(`SELECT count(*) AS n FROM queue_items WHERE project_id LIKE 'full-%' AND status = 'completed'`)).rows[0]!.n);

  const answers: Record<string, number> = {};
  const liveAnswer: number[] = [];
  const started = epochMs();
  const deadline = started + FULL_PATH_DEADLINE_MS;
  let done = false;

  const caller = async () => {
    while (!done && epochMs() < deadline) {
      const sent = performance.now();
      let action: string;
      try {
        const answer = await api('/control/dispatch-next', { dry_run: false, requested_by: 'bench' });
        action = answer.status === 200 ? String(answer.body.action) : `http_${answer.status}`;
        if (action === 'live_dispatch') liveAnswer.push(performance.now() - sent);
        if (action === 'dispatch_blocked' && String(answer.body.reason).startsWith('claim lost')) action = 'dispatch_blocked (claim lost)';
      } catch (error) {
        action = `error: ${(error as Error).message.slice(0, 60)}`;
      }
      answers[action] = (answers[action] ?? 0) + 1;
      if (action !== 'live_dispatch' && !action.startsWith('dispatch_blocked')) await sleep(10);
    }
  };
  const monitor = async () => {
    while (!done && epochMs() < deadline) {
      if ((await countCompleted()) >= FULL_RUNS) break;
      await sleep(50);
    }
    done = true;
  };
  log(`(c) ${FULL_RUNS} runs over ${LANES} lanes, ${CALLERS} parallel callers of live dispatch-next`);
  await Promise.all([monitor(), ...Array.from({ length: CALLERS }, caller)]);
  await gate.settle();
  // A last look, in case the final completions landed after the deadline check.
  await sleep(200);

  const completed = await countCompleted();
  const lastCompleted = await store.query<{ at: number | null }>(
    `SELECT max(extract(epoch FROM t.created_at) * 1000) AS at FROM run_transitions t JOIN runs r USING (run_id)
      WHERE t.transition = 'completed' AND r.project_id LIKE 'full-%'`,
  );
  const elapsedMs = Number(lastCompleted.rows[0]?.at ?? epochMs()) - started;

  // Doubled: a project with two runs the worker accepted, a run the gate was sent twice, a project sent under two run ids.
  const acceptedTwice = await store.query<{ project_id: string; n: number }>(
    `SELECT r.project_id, count(*) AS n FROM runs r JOIN run_transitions t ON t.run_id = r.run_id AND t.transition = 'worker_accepted'
      WHERE r.project_id LIKE 'full-%' GROUP BY r.project_id HAVING count(*) > 1`,
  );
  const gateRuns = [...gate.runs.values()].filter((run) => run.project_id.startsWith(prefix));
  const sentTwice = gateRuns.filter((run) => run.dispatches > 1);
  const runIdsPerProject = new Map<string, number>();
  for (const run of gateRuns) runIdsPerProject.set(run.project_id, (runIdsPerProject.get(run.project_id) ?? 0) + 1);
  const projectsSentTwice = [...runIdsPerProject.values()].filter((n) => n > 1).length;
  const doubledProjects = new Set([
    ...acceptedTwice.rows.map((row) => row.project_id),
    ...sentTwice.map((run) => run.project_id),
    ...[...runIdsPerProject.entries()].filter(([, n]) => n > 1).map(([project]) => project),
  ]);

  // At most one run per lane at a time: claimed → completed spans of one lane must not overlap.
  const overlaps = await store.query<{ n: number }>(
    `WITH spans AS (
       SELECT r.run_id, r.lane, min(t.created_at) AS s, max(t.created_at) AS e
         FROM runs r JOIN run_transitions t USING (run_id) WHERE r.project_id LIKE 'full-%' GROUP BY r.run_id, r.lane)
     SELECT count(*) AS n FROM spans a JOIN spans b ON a.lane = b.lane AND a.run_id < b.run_id AND a.s < b.e AND b.s < a.e`,
  );
  const statuses = await store.query<{ status: string; n: number }>(
    `SELECT status, count(*) AS n FROM queue_items WHERE project_id LIKE 'full-%' GROUP BY status ORDER BY status`,
  );
  return {
    runs: FULL_RUNS,
    completed,
    lost: FULL_RUNS - completed,
    doubled: doubledProjects.size,
    doubledDetail: `accepted twice ${acceptedTwice.rows.length}, /dispatch twice for one run_id ${sentTwice.length}, one project under two run_ids ${projectsSentTwice}`,
    laneOverlaps: Number(overlaps.rows[0]!.n),
    elapsedMs,
    runsPerMin: completed / (elapsedMs / 60_000),
    answers,
    liveAnswer: stats(liveAnswer),
    statuses: statuses.rows.map((row) => `${row.status} ${row.n}`).join(', '),
    callbacksIgnored: gateRuns.filter((run) => run.started?.ignored || run.finished?.ignored).length,
    callbackErrors: gateRuns.filter((run) => run.callbackError).length,
  };
}

// ---------------------------------------------------------------------------------------------------------------

async function main(): Promise<void> {
  const benchStart = performance.now();
  const binaryPath = locateTemporalCli();
  if (!binaryPath) throw new Error(temporalCliInstallHint());
  const dir = await mkdtemp(join(tmpdir(), 'rcp-bench-dispatch-'));
  let temporal: TemporalDevServer | undefined;
  let store: Store | undefined;
  let gate: InstantGate | undefined;
  let controlPlane: RunningControlPlane | undefined;
  let baseline: Baseline | undefined;
  let writer: HeldWriter | undefined;
  let databaseCreated = false;
  try {
    log('starting a headless Temporal dev server');
    temporal = await startTemporalDevServer({ binaryPath, namespace: 'default', headless: true, logFile: join(dir, 'temporal.log') });
    await recreateDatabase(DATABASE);
    databaseCreated = true;
    store = await openStore({ backend: 'pg', pgDatabaseUrl: benchDatabaseUrl(DATABASE) });

    gate = new InstantGate({ gateToken: GATE_TOKEN, callbackUrl: '', callbackToken: CALLBACK_TOKEN, autoFinish: false });
    await gate.start();
    writer = await HeldWriter.start();
    log(`starting the control plane (Temporal ${temporal.address}, database ${DATABASE})`);
    let config: Config;
    // The port must be in the config before the server binds it; one found free can be taken meanwhile: pick again.
    for (let attempt = 1; ; attempt++) {
      config = benchConfig(dir, await freePort(), gate, temporal.address, writer.url);
      gate.callbackUrl = config.completion_callback_url;
      try {
        controlPlane = await startControlPlane(config, pino({ level: LOG_LEVEL }));
        break;
      } catch (error) {
        if (attempt >= 3 || (error as NodeJS.ErrnoException).code !== 'EADDRINUSE') throw error;
      }
    }
    const api = controlApi(controlPlane.url);

    const dry = await benchDryRun(store, api, config);
    await store.query(`DELETE FROM queue_items WHERE project_id LIKE 'seed-%'`);
    await store.query(`DELETE FROM projects WHERE project_id LIKE 'seed-%'`);
    await store.query('VACUUM ANALYZE queue_items');

    log(`(b) ${LIVE_RUNS} live runs one after another (plus ${WARMUP} warm-up)`);
    const live = await benchLiveLatency(store, api, gate);
    log('(b) bare workflows with one activity on the same Temporal server');
    baseline = await benchBareWorkflows(temporal.address);

    const full = await benchFullPath(store, api, gate);

    log(`(d) ${LOAD_CALLS} live dispatches idle, then ${LOAD_CALLS} with ${DRAFTS} draft-next calls waiting on a held writer`);
    const loadConnection = await Connection.connect({ address: temporal.address });
    const load = await benchWriterLoad(store, api, gate, writer, config, new Client({ connection: loadConnection })).finally(() => loadConnection.close());

    printReport(dry, live, baseline, full, load, config.paper_activity_slots, performance.now() - benchStart);
  } finally {
    await controlPlane?.stop().catch((error: unknown) => console.error('control plane stop:', error));
    await baseline?.stop().catch(() => undefined);
    await gate?.stop().catch(() => undefined);
    await writer?.close().catch(() => undefined);
    await store?.close().catch(() => undefined);
    if (databaseCreated) await dropDatabase(DATABASE).catch((error: unknown) => console.error('drop database:', error));
    await temporal?.stop().catch(() => undefined);
    await rm(dir, { recursive: true, force: true });
  }
}

// ---------------------------------------------------------------------------------------------------------------
// (d) live dispatch under writer load

async function benchWriterLoad(store: Store, api: ReturnType<typeof controlApi>, gate: InstantGate, writer: HeldWriter, config: Config, temporal: Client): Promise<WriterLoadFigures> {
  gate.setAutoFinish(true);
  await seedItems(store, 'load-', 2 * LOAD_CALLS, { spreadPriorities: false });
  await seedDraftCandidates(store, config.project_root, DRAFTS);
  const dispatchOnce = async () => {
    const sentAt = epochMs();
    const answer = await api('/control/dispatch-next', { dry_run: false, requested_by: 'bench' });
    const elapsed = epochMs() - sentAt;
    if (answer.status !== 200 || answer.body.action !== 'live_dispatch') throw new Error(`live dispatch answered ${answer.status}: ${JSON.stringify(answer.body).slice(0, 400)}`);
    // The run finishes at once: wait for it, so every call finds its lane as idle as the last.
    await waitForTransition(store, String(answer.body.run_id), 'completed');
    return elapsed;
  };
  return measureUnderWriterLoad({
    calls: LOAD_CALLS,
    drafts: DRAFTS,
    writer,
    dispatchOnce,
    draftNext: () => api('/control/papers/draft-next', { dry_run: false, requested_by: 'bench' }),
    papersInFlight: async () => Number((await temporal.workflow.count(`WorkflowType = 'paperWorkflow' AND ExecutionStatus = 'Running' AND TaskQueue = '${CONTROL_QUEUE}'`)).count),
    // Each draft-next drafts its own candidate; the paper worker runs paper_activity_slots of their writer calls.
    writerCallsExpected: Math.min(DRAFTS, config.paper_activity_slots),
  });
}

function printReport(dry: DryRunScenario[], live: LiveLatency, baseline: Baseline, full: FullPath, load: WriterLoadFigures, paperSlots: number, totalMs: number): void {
  console.log(`\ndispatch bench: node ${process.version}, ${availableParallelism()} CPUs, load average ${loadStart} at the start and ${loadNow()} at the end`);
  console.log(`${LANES} lanes; the control plane runs in this process on a local headless Temporal dev server and Postgres`);
  console.log('The agent finishes at once (bench/support/instant-gate.ts): a real gate reports readiness only after a quiet');
  console.log('window of at least 30 s, so these figures are the control plane and Temporal, not the agent or the gate.\n');

  console.log(`(a) dry-run POST /control/dispatch-next, force_preflight false, ${QUEUED_ROWS} queued rows over ${LANES} lanes`);
  console.log(
    percentileTable(
      dry.map((scenario) => ({
        lanes: scenario.name,
        answer: scenario.action,
        calls: scenario.http.n,
        'p50 ms': ms(scenario.http.p50),
        'p99 ms': ms(scenario.http.p99),
        'mean ms': ms(scenario.http.mean),
        'max ms': ms(scenario.http.max),
        'query alone p50/p99 ms': `${ms(scenario.sql.p50)} / ${ms(scenario.sql.p99)}`,
        'p99 <= 20 ms': scenario.http.p99 <= 20 ? 'yes' : 'no',
      })),
    ),
  );

  console.log(`\n(b) live runs one at a time (${live.dispatch.n} measured) beside bare workflows with one activity (${baseline.startToResult.n} each)`);
  console.log(
    percentileTable([
      row('dispatch-next live → worker accepted (HTTP round trip)', live.dispatch),
      row('  baseline: bare workflow start → result', baseline.startToResult),
      { measure: '  ratio', 'p50 ms': ratio(live.dispatch.p50, baseline.startToResult.p50), 'p99 ms': ratio(live.dispatch.p99, baseline.startToResult.p99), 'mean ms': '', 'max ms': '' },
      row('finishing callback posted → queue item completed', live.callback),
      row('  baseline: bare workflow signal → result', baseline.signalToResult),
      { measure: '  ratio', 'p50 ms': ratio(live.callback.p50, baseline.signalToResult.p50), 'p99 ms': ratio(live.callback.p99, baseline.signalToResult.p99), 'mean ms': '', 'max ms': '' },
    ]),
  );
  console.log('\n    stages (run_transitions.created_at):');
  console.log(
    percentileTable(Object.entries(live.stages).map(([name, figures]) => row(`    ${name}`, figures)))
      .split('\n')
      .map((line) => `    ${line}`)
      .join('\n'),
  );

  console.log(`\n(c) ${full.runs} runs over ${LANES} lanes, ${CALLERS} parallel callers of live dispatch-next, agent finishing at once`);
  console.log(`    completed ${full.completed} in ${(full.elapsedMs / 1000).toFixed(1)} s; queue rows: ${full.statuses}`);
  console.log(`    dispatch-next answers: ${Object.entries(full.answers).map(([action, n]) => `${action} ${n}`).join(', ')}`);
  console.log(`    live_dispatch answer under contention: p50 ${ms(full.liveAnswer.p50)} ms, p99 ${ms(full.liveAnswer.p99)} ms`);
  console.log(`    doubled check: ${full.doubledDetail}; overlapping runs on one lane ${full.laneOverlaps}`);
  console.log(`    callbacks ignored ${full.callbacksIgnored}, callbacks not accepted ${full.callbackErrors}`);

  console.log(`\n(d) live dispatch answers, idle and with ${load.drafts} draft-next calls under way (${load.writerCallsHeld} writer calls held, ${paperSlots} paper slots)`);
  console.log(
    percentileTable([
      row('dispatch-next live, idle', load.idle),
      row(`dispatch-next live, ${load.drafts} drafts in flight`, load.loaded),
      { measure: '  ratio', 'p50 ms': ratio(load.loaded.p50, load.idle.p50), 'p99 ms': ratio(load.loaded.p99, load.idle.p99), 'mean ms': '', 'max ms': '' },
    ]),
  );

  const yes = (ok: boolean) => (ok ? 'yes' : 'NO');
  const idle = dry[0]!;
  const worstDry = dry.reduce((worst, scenario) => (scenario.http.p99 > worst.http.p99 ? scenario : worst), idle);
  console.log('\nsummary');
  const lostClaimsPerRun = (full.answers['dispatch_blocked (claim lost)'] ?? 0) / Math.max(1, full.completed);
  console.log(
    percentileTable([
      { measure: `(a) dry-run dispatch-next p50 / p99, ${idle.name}`, value: `${ms(idle.http.p50)} / ${ms(idle.http.p99)} ms`, target: 'p99 <= 20 ms', met: yes(idle.http.p99 <= 20) },
      { measure: `(a) dry-run dispatch-next p50 / p99, worst: ${worstDry.name}`, value: `${ms(worstDry.http.p50)} / ${ms(worstDry.http.p99)} ms`, target: 'p99 <= 20 ms', met: yes(worstDry.http.p99 <= 20) },
      {
        measure: '(b) dispatch → worker accepted p50 / p99 (bare start → result)',
        value: `${ms(live.dispatch.p50)} / ${ms(live.dispatch.p99)} ms (${ms(baseline.startToResult.p50)} / ${ms(baseline.startToResult.p99)}) = ${ratio(live.dispatch.p50, baseline.startToResult.p50)} / ${ratio(live.dispatch.p99, baseline.startToResult.p99)}`,
        target: '<= 2x',
        met: yes(live.dispatch.p50 <= 2 * baseline.startToResult.p50 && live.dispatch.p99 <= 2 * baseline.startToResult.p99),
      },
      {
        measure: '(b) callback → completed p50 / p99 (bare signal → result)',
        value: `${ms(live.callback.p50)} / ${ms(live.callback.p99)} ms (${ms(baseline.signalToResult.p50)} / ${ms(baseline.signalToResult.p99)}) = ${ratio(live.callback.p50, baseline.signalToResult.p50)} / ${ratio(live.callback.p99, baseline.signalToResult.p99)}`,
        target: '<= 2x',
        met: yes(live.callback.p50 <= 2 * baseline.signalToResult.p50 && live.callback.p99 <= 2 * baseline.signalToResult.p99),
      },
      { measure: `(c) runs/min (${full.completed} of ${full.runs} over ${LANES} lanes)`, value: full.runsPerMin.toFixed(0), target: '>= 600', met: yes(full.runsPerMin >= 600) },
      { measure: '(c) lost claim attempts per run', value: lostClaimsPerRun.toFixed(2), target: '<= 2', met: yes(lostClaimsPerRun <= 2) },
      { measure: `(c) live_dispatch answer p50 under ${CALLERS} callers`, value: `${ms(full.liveAnswer.p50)} ms`, target: '<= 300 ms', met: yes(full.liveAnswer.p50 <= 300) },
      { measure: '(c) lost', value: String(full.lost), target: '0', met: yes(full.lost === 0) },
      { measure: '(c) doubled', value: String(full.doubled), target: '0', met: yes(full.doubled === 0) },
      {
        measure: `(d) live dispatch p99 with ${load.drafts} drafts in flight / idle`,
        value: `${ms(load.loaded.p99)} / ${ms(load.idle.p99)} ms = ${ratio(load.loaded.p99, load.idle.p99)}`,
        target: '<= 1.2x',
        met: yes(load.loaded.p99 <= 1.2 * load.idle.p99),
      },
    ]),
  );
  console.log(`\nwhole bench ${(totalMs / 1000).toFixed(0)} s`);
}

function row(measure: string, figures: Stats): Record<string, string> {
  return { measure, 'p50 ms': ms(figures.p50), 'p99 ms': ms(figures.p99), 'mean ms': ms(figures.mean), 'max ms': ms(figures.max) };
}

let exitCode = 0;
try {
  await main();
} catch (error) {
  console.error(error);
  exitCode = 1;
}
// The Temporal SDK's native runtime keeps handles open; the bench is done.
process.exit(exitCode);
