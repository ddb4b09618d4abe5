/**
 * Fleet benchmark: the run path on the cluster shape beside the embedded shape, in one run (docs/testing.md#benchmarks,
 * Fleet). Each shape gets the same queue, the same instant gate (bench/support/instant-gate.ts: its agent finishes at
 * once) and the same callers of live dispatch-next:
 *   cluster   the real Temporal server on Postgres and two control-plane replicas on one database and task queue, as
 *             `npm run cluster` starts them (scripts/cluster/local-cluster.ts); callers and callbacks alternate replicas
 *   embedded  one control-plane process as `npm start` runs it, with its embedded Temporal dev server, on Postgres
 * and measures
 *   runs/min through the full path (dispatch → worker accepted → callbacks → completed)     target >= 600 on the cluster
 *   the live dispatch answer p50/p99 under the callers
 *   CPU per run over all processes, from /proc: the control-plane processes and their children, the Temporal server,
 *   and Postgres (every postgres process, the reaped backends through the postmaster)     target <= 150 ms on the cluster
 *   with the split per process, to say where the time goes. The bench process itself (callers, instant gate) is shown
 *   apart and not counted: it stands for the operators and the worker hosts.
 * Needs root (the cluster's bridge), the local Postgres, the Temporal CLI and scripts/install-temporal-server.sh.
 *   npm run bench:fleet
 * Knobs (environment): BENCH_FLEET_RUNS=400 BENCH_FLEET_LANES=20 BENCH_FLEET_CALLERS=20 BENCH_LOG_LEVEL=error
 *   BENCH_FLEET_PORTS (the cluster's twelve ports)
 *   (BENCH_QUICK=1: 16 runs, 4 lanes, 4 callers; bench/knobs.ts)
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { freePort } from '../platform/temporal/temporal-dev-server.ts';
import { LocalCluster } from '../scripts/cluster/local-cluster.ts';
import { type ClusterOptions } from '../scripts/cluster/topology.ts';
import { loadNow, log, ms, stats, yes, type Stats } from './figures.ts';
import { knob } from './knobs.ts';
import { benchDatabaseUrl, dropDatabase, percentileTable, recreateDatabase } from './support.ts';
import { InstantGate } from './support/instant-gate.ts';
import { byCommand, cpuSeconds, snapshot, withDescendants, type Snapshot } from './support/process-cpu.ts';

const RUNS = knob('BENCH_FLEET_RUNS', 400, 16);
const LANES = knob('BENCH_FLEET_LANES', 20, 4);
const CALLERS = knob('BENCH_FLEET_CALLERS', 20, 4);
const LOG_LEVEL = process.env.BENCH_LOG_LEVEL ?? 'error';
const DEADLINE_MS = 300_000;
const NOOP_PAUSE_MS = 100;
const READY_TIMEOUT_MS = 120_000;

const REPO_ROOT = fileURLToPath(new URL('..', import.meta.url));
const CONTROL_TOKEN = 'bench-fleet-control-token-0123456789ab';
const GATE_TOKEN = 'bench-fleet-gate-token-0123456789abcdef';
const CALLBACK_TOKEN = 'bench-fleet-callback-token-0123456789ab';
const EMBEDDED_DATABASE = `rcp_bench_fleet_embedded_${process.pid}`;

const laneName = (index: number) => `lane-${String(index).padStart(2, '0')}`;
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** The fields both shapes share: the instant gate's lanes, live dispatch, and waits no instant agent comes near. */
function sharedFields(gate: InstantGate): Record<string, unknown> {
  return {
    control_api_bearer_token: CONTROL_TOKEN,
    completion_callback_token: CALLBACK_TOKEN,
    live_dispatch_enabled: true,
    dispatch_timeout_sec: 30,
    max_wait_after_idle_sec: 600,
    default_workload_class: 'unknown',
    worker_targets: Object.fromEntries(Array.from({ length: LANES }, (_, index) => [laneName(index), { wake_gate_url: gate.laneUrl(laneName(index)), bearer_token: GATE_TOKEN, role: 'gpu_worker' }])),
  };
}

/** A shape under test: where to call, its database, and which processes are its own. */
interface Shape {
  name: string;
  urls: string[];
  databaseUrl: string;
  /** The shape's processes in a snapshot, by the name shown in the split. */
  members(processes: Snapshot): Record<string, Set<number>>;
  stop(): Promise<void>;
}

/**
 * The cluster's ports: BENCH_FLEET_PORTS (twelve, comma-separated; the suite hands out its own), else fixed ones beside
 * `npm run cluster`'s. Temporal keeps its membership ports in a smallint column, so none may be above 32767.
 */
function clusterPorts(): ClusterOptions['ports'] {
  const given = process.env.BENCH_FLEET_PORTS?.split(',').map(Number) ?? [27233, 27243, 27234, 27235, 27239, 27290, 26933, 26934, 26935, 26939, 28787, 28797];
  if (given.length !== 12 || given.some((port) => !Number.isInteger(port) || port < 1 || port > 32767)) throw new Error('BENCH_FLEET_PORTS must be twelve ports from 1 to 32767');
  const [frontend, frontendHttp, history, matching, worker, metrics, mFrontend, mHistory, mMatching, mWorker, replica1, replica2] = given as [number, ...number[]] & number[];
  return {
    temporal: { frontend, frontendHttp: frontendHttp!, history: history!, matching: matching!, worker: worker!, metrics: metrics! },
    membership: { frontend: mFrontend!, history: mHistory!, matching: mMatching!, worker: mWorker! },
    replicas: [replica1!, replica2!],
  };
}

async function startCluster(dir: string, gate: InstantGate): Promise<Shape> {
  const tag = process.pid % 1000;
  const options: ClusterOptions = {
    dir: join(dir, 'cluster'),
    repoRoot: REPO_ROOT,
    gates: 0,
    lanesPerGate: 1,
    postgres: { host: '127.0.0.1', port: 5432, user: 'postgres' },
    naming: { prefix: `rb${tag}`, subnet: `10.235.${tag % 250}`, database: `rcp_bench_fleet_${process.pid}`, taskQueue: `rcp-bench-fleet-${process.pid}` },
    ports: clusterPorts(),
    gate: { dispatchScript: '/nonexistent', env: {}, overrides: {} },
    replicaOverrides: sharedFields(gate),
  };
  log('cluster: starting the Temporal server on Postgres and two replicas');
  const cluster = await LocalCluster.start(options, (message) => log(`cluster: ${message}`));
  const { topology } = cluster;
  return {
    name: 'cluster',
    urls: topology.replicas.map((replica) => replica.url),
    databaseUrl: benchDatabaseUrl(topology.controlPlaneDatabase),
    members: (processes) => ({
      'control-plane replicas': withDescendants(processes, topology.replicas.map((replica) => cluster.pidOf(replica.name) ?? -1)),
      'Temporal server': withDescendants(processes, [cluster.pidOf('temporal') ?? -1]),
      Postgres: byCommand(processes, 'postgres'),
    }),
    async stop() {
      await cluster.stop();
      await cluster.dropDatabases();
    },
  };
}

async function startEmbedded(dir: string, gate: InstantGate): Promise<Shape> {
  await recreateDatabase(EMBEDDED_DATABASE);
  const port = await freePort();
  const url = `http://127.0.0.1:${port}`;
  const configPath = join(dir, 'embedded.json');
  await writeFile(
    configPath,
    JSON.stringify({
      roles: ['control_plane'],
      ...sharedFields(gate),
      completion_callback_url: `${url}/control/api/worker-callback`,
      state_dir: join(dir, 'embedded-state'),
      project_root: join(dir, 'embedded-projects'),
      listen_host: '127.0.0.1',
      listen_port: port,
      control_plane_store_backend: 'pg',
      pg_database_url: benchDatabaseUrl(EMBEDDED_DATABASE),
    }),
    { mode: 0o600 },
  );
  log('embedded: starting one control-plane process with its embedded Temporal dev server');
  const child = spawn(process.execPath, [join(REPO_ROOT, 'bin', 'start.js')], {
    cwd: REPO_ROOT,
    env: { ...process.env, SVC_CONFIG: configPath, SVC_CONTROL_PLANE_CONFIG: '', TEMPORAL_ADDRESS: '' },
    stdio: ['ignore', 'ignore', 'inherit'],
    detached: true,
  });
  await waitHealthy(url, child);
  return {
    name: 'embedded',
    urls: [url],
    databaseUrl: benchDatabaseUrl(EMBEDDED_DATABASE),
    members: (processes) => {
      const all = withDescendants(processes, [child.pid ?? -1]);
      const server = new Set([...all].filter((pid) => processes.get(pid)?.comm === 'temporal'));
      const serverTree = withDescendants(processes, [...server]);
      return {
        'control-plane process': new Set([...all].filter((pid) => !serverTree.has(pid))),
        'Temporal dev server': serverTree,
        Postgres: byCommand(processes, 'postgres'),
      };
    },
    async stop() {
      try {
        process.kill(-child.pid!, 'SIGTERM');
      } catch {
        // Gone already.
      }
      await new Promise((resolve) => (child.exitCode === null ? child.once('exit', resolve) : resolve(undefined)));
      await dropDatabase(EMBEDDED_DATABASE);
    },
  };
}

async function waitHealthy(url: string, child: ChildProcess): Promise<void> {
  const deadline = Date.now() + READY_TIMEOUT_MS;
  for (;;) {
    if (child.exitCode !== null) throw new Error(`the embedded control plane exited (${child.exitCode})`);
    const response = await fetch(`${url}/healthz`).catch(() => undefined);
    if (response?.ok) return;
    if (Date.now() > deadline) throw new Error(`${url} did not answer /healthz within ${READY_TIMEOUT_MS / 1000} s`);
    await sleep(250);
  }
}

interface Figures {
  shape: string;
  completed: number;
  doubled: number;
  elapsedMs: number;
  runsPerMin: number;
  liveAnswer: Stats;
  answers: Record<string, number>;
  cpuMsPerRun: number;
  split: Record<string, number>;
  benchProcessMsPerRun: number;
}

/** Seeds RUNS items over the lanes, then drives them through the shape with CALLERS callers, measuring CPU meanwhile. */
async function measure(shape: Shape, gate: InstantGate): Promise<Figures> {
  const db = new pg.Pool({ connectionString: shape.databaseUrl, max: 2 });
  try {
    const prefix = `${shape.name}-`;
    await db.query(
      `INSERT INTO projects (project_id, project_name, project_dir, workload_class, machine_target)
       SELECT $1 || lpad(n::text, 6, '0'), 'Bench project ' || n, 'bench/' || $1 || n, 'unknown', 'lane-' || lpad((n % $3)::text, 2, '0')
         FROM generate_series(0, $2::int - 1) AS n`,
      [prefix, RUNS, LANES],
    );
    await db.query(
      `INSERT INTO queue_items (project_id, project_name, dispatch_priority, selection_rank, machine_target, workload_class)
       SELECT $1 || lpad(n::text, 6, '0'), 'Bench project ' || n, 10, n, 'lane-' || lpad((n % $3)::text, 2, '0'), 'unknown'
         FROM generate_series(0, $2::int - 1) AS n`,
      [prefix, RUNS, LANES],
    );
    gate.setCallbackUrls(shape.urls.map((url) => `${url}/control/api/worker-callback`));
    const completedCount = async () => Number((await db.query<{ n: string }>("SELECT count(*) AS n FROM queue_items WHERE status = 'completed'")).rows[0]!.n);

    const answers: Record<string, number> = {};
    const liveAnswer: number[] = [];
    let done = false;
    let turn = 0;
    const caller = async () => {
      while (!done) {
        const url = shape.urls[turn++ % shape.urls.length]!;
        const sent = performance.now();
        let action: string;
        try {
          const response = await fetch(`${url}/control/dispatch-next`, {
            method: 'POST',
            headers: { authorization: `Bearer ${CONTROL_TOKEN}`, 'content-type': 'application/json' },
            body: JSON.stringify({ dry_run: false, requested_by: 'bench-fleet' }),
          });
          const body = (await response.json()) as { action?: string };
          action = response.status === 200 ? String(body.action) : `http_${response.status}`;
          if (action === 'live_dispatch') liveAnswer.push(performance.now() - sent);
        } catch (error) {
          action = `error: ${(error as Error).message.slice(0, 60)}`;
        }
        answers[action] = (answers[action] ?? 0) + 1;
        // Every lane busy: look again a little later, as automation would, rather than spend the CPU under measure
        // on answers that dispatch nothing.
        if (action !== 'live_dispatch' && action !== 'dispatch_blocked') await sleep(NOOP_PAUSE_MS);
      }
    };

    log(`${shape.name}: ${RUNS} runs over ${LANES} lanes, ${CALLERS} callers of live dispatch-next`);
    const before = snapshot();
    const started = performance.now();
    const callers = Array.from({ length: CALLERS }, caller);
    const deadline = Date.now() + DEADLINE_MS;
    while ((await completedCount()) < RUNS && Date.now() < deadline) await sleep(50);
    const elapsedMs = performance.now() - started;
    done = true;
    await Promise.all(callers);
    await gate.settle();
    const after = snapshot();

    const completed = await completedCount();
    const doubled = Number(
      (
        await db.query<{ n: string }>(
          `SELECT count(*) AS n FROM (SELECT r.project_id FROM runs r JOIN run_transitions t ON t.run_id = r.run_id AND t.transition = 'worker_accepted'
             GROUP BY r.project_id HAVING count(*) > 1) doubled`,
        )
      ).rows[0]!.n,
    ) + [...gate.runs.values()].filter((run) => run.project_id.startsWith(prefix) && run.dispatches > 1).length;
    const groups = shape.members(new Map([...before, ...after]));
    const split = Object.fromEntries(Object.entries(groups).map(([name, members]) => [name, (cpuSeconds(before, after, members) * 1000) / Math.max(1, completed)]));
    const benchProcess = cpuSeconds(before, after, new Set([process.pid]));
    return {
      shape: shape.name,
      completed,
      doubled,
      elapsedMs,
      runsPerMin: completed / (elapsedMs / 60_000),
      liveAnswer: stats(liveAnswer),
      answers,
      cpuMsPerRun: Object.values(split).reduce((sum, value) => sum + value, 0),
      split,
      benchProcessMsPerRun: (benchProcess * 1000) / Math.max(1, completed),
    };
  } finally {
    await db.end();
  }
}

async function main(): Promise<void> {
  if (process.getuid?.() !== 0) throw new Error('bench:fleet starts the local cluster, whose bridge needs root');
  // Every process either shape starts inherits it.
  process.env.LOG_LEVEL = LOG_LEVEL;
  const dir = await mkdtemp(join(tmpdir(), 'rcp-bench-fleet-'));
  const gate = new InstantGate({ gateToken: GATE_TOKEN, callbackUrl: 'http://127.0.0.1:9/unset', callbackToken: CALLBACK_TOKEN, autoFinish: true });
  await gate.start();
  const results: Figures[] = [];
  log(`load before: ${loadNow()}`);
  try {
    for (const start of [startCluster, startEmbedded]) {
      const shape = await start(dir, gate);
      try {
        results.push(await measure(shape, gate));
      } finally {
        await shape.stop();
      }
    }
  } finally {
    await gate.stop();
    await rm(dir, { recursive: true, force: true });
  }
  log(`load after: ${loadNow()}`);

  for (const figures of results) {
    console.log(`\n${figures.shape}: ${figures.completed} of ${RUNS} runs completed in ${(figures.elapsedMs / 1000).toFixed(1)} s, doubled ${figures.doubled}`);
    console.log(`    dispatch-next answers: ${Object.entries(figures.answers).map(([action, n]) => `${action} ${n}`).join(', ')}`);
    console.log(`    CPU per run: ${Object.entries(figures.split).map(([name, value]) => `${name} ${ms(value)} ms`).join(', ')}; the bench process (callers, instant gate) ${ms(figures.benchProcessMsPerRun)} ms, not counted`);
  }
  const cluster = results.find((figures) => figures.shape === 'cluster')!;
  console.log('\nsummary');
  console.log(
    percentileTable([
      ...results.map((figures) => ({ measure: `${figures.shape} runs/min`, value: figures.runsPerMin.toFixed(0), target: figures === cluster ? '>= 600' : '', met: figures === cluster ? yes(figures.runsPerMin >= 600) : '' })),
      ...results.map((figures) => ({ measure: `${figures.shape} live answer p50 / p99`, value: `${ms(figures.liveAnswer.p50)} / ${ms(figures.liveAnswer.p99)} ms`, target: '', met: '' })),
      ...results.map((figures) => ({ measure: `${figures.shape} CPU per run, all processes`, value: `${ms(figures.cpuMsPerRun)} ms`, target: figures === cluster ? '<= 150 ms' : '', met: figures === cluster ? yes(figures.cpuMsPerRun <= 150) : '' })),
      ...results.map((figures) => ({ measure: `${figures.shape} doubled`, value: String(figures.doubled), target: '0', met: yes(figures.doubled === 0) })),
    ]),
  );
  if (results.some((figures) => figures.completed < RUNS || figures.doubled > 0)) process.exitCode = 1;
}

main().catch((error: unknown) => {
  console.error(error);
  process.exitCode = 1;
});
