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
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client, Connection } from '@temporalio/client';
import pino from 'pino';
import { startControlPlane, type RunningControlPlane } from '../bin/control-plane-process.ts';
import { locateTemporalCli, temporalCliInstallHint } from '../platform/temporal/temporal-cli.ts';
import { freePort, startTemporalDevServer, type TemporalDevServer } from '../platform/temporal/temporal-dev-server.ts';
import type { Config } from '../platform/config/schema.ts';
import { workerRoutingFrom } from '../capabilities/runs/domain/worker-lanes.ts';
import { nextDispatchCandidate } from '../capabilities/runs/dispatch-candidates.ts';
import { openStore } from '../platform/store/open-store.ts';
import type { Store } from '../platform/store/store.ts';
import { benchBareWorkflows, type Baseline } from './bare-workflow-baseline.ts';
import { benchConfig, CALLBACK_TOKEN, CONTROL_QUEUE, controlApi, DATABASE, GATE_TOKEN, laneName, seedItems } from './dispatch-bench-setup.ts';
import { printReport, type DryRunScenario, type FullPath, type LiveLatency } from './dispatch-report.ts';
import { loadNow, log, ms, stats } from './figures.ts';
import { knob, QUICK } from './knobs.ts';
import { benchDatabaseUrl, dropDatabase, recreateDatabase } from './support.ts';
import { epochMs, InstantGate } from './support/instant-gate.ts';
import { HeldWriter, measureUnderWriterLoad, seedDraftCandidates, type WriterLoadFigures } from './support/writer-load.ts';

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


const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const loadStart = loadNow();

// ---------------------------------------------------------------------------------------------------------------
// (a) dry-run dispatch-next over a long queue

async function benchDryRun(store: Store, api: ReturnType<typeof controlApi>, config: Config): Promise<DryRunScenario[]> {
  log(`(a) seeding ${QUEUED_ROWS} queued rows over ${LANES} lanes`);
  const seedStart = performance.now();
  await seedItems(store, 'seed-', QUEUED_ROWS, { spreadPriorities: true, lanes: LANES });
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
  await seedItems(store, 'live-', total, { spreadPriorities: false, lanes: LANES });
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

// ---------------------------------------------------------------------------------------------------------------
// (c) many runs over many lanes through the full path

async function benchFullPath(store: Store, api: ReturnType<typeof controlApi>, gate: InstantGate): Promise<FullPath> {
  gate.setAutoFinish(true);
  const prefix = 'full-';
  await seedItems(store, prefix, FULL_RUNS, { spreadPriorities: false, lanes: LANES });
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
      config = benchConfig(dir, await freePort(), gate, temporal.address, writer.url, LANES);
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
    baseline = await benchBareWorkflows(temporal.address, { warmup: WARMUP, measured: LIVE_RUNS });

    const full = await benchFullPath(store, api, gate);

    log(`(d) ${LOAD_CALLS} live dispatches idle, then ${LOAD_CALLS} with ${DRAFTS} draft-next calls waiting on a held writer`);
    const loadConnection = await Connection.connect({ address: temporal.address });
    const load = await benchWriterLoad(store, api, gate, writer, config, new Client({ connection: loadConnection })).finally(() => loadConnection.close());

    printReport(dry, live, baseline, full, load, config.paper_activity_slots, performance.now() - benchStart, { lanes: LANES, callers: CALLERS, queuedRows: QUEUED_ROWS, loadStart });
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
  await seedItems(store, 'load-', 2 * LOAD_CALLS, { spreadPriorities: false, lanes: LANES });
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

let exitCode = 0;
try {
  await main();
} catch (error) {
  console.error(error);
  exitCode = 1;
}
// The Temporal SDK's native runtime keeps handles open; the bench is done.
process.exit(exitCode);
