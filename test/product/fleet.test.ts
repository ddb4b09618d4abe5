import { readFileSync } from 'node:fs';
import { chmod, mkdir, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Client, Connection } from '@temporalio/client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LocalCluster } from '../../scripts/cluster/local-cluster.ts';
import { clusterNetwork, type ClusterOptions } from '../../scripts/cluster/topology.ts';
import { openStore } from '../../platform/store/open-store.ts';
import { insertProject } from '../../capabilities/runs/projects.ts';
import { insertQueueItem } from '../../capabilities/runs/queue-items.ts';
import type { Store } from '../../platform/store/store.ts';
import { CallbackFanOut } from '../support/callback-fan-out.ts';
import { FAKE_AGENT_PATH } from '../support/gate.ts';
import { clusterTestPorts, testPort } from '../support/ports.ts';
import { TEST_TEMPORAL_SQL_CONNECTIONS } from '../support/database.ts';

// expected duration: ~70 s (the real Temporal server, two replicas and three worker hosts, under four faults)

/**
 * The fleet under faults (docs/operations.md#running-on-several-machines): the real Temporal server on Postgres, two
 * control-plane replicas on one database and task queue, and three worker hosts, each a gate in a network namespace
 * of its own with twelve lanes — the cluster `npm run cluster` starts, on names and ports of the test's own. Two
 * callers dispatch 36 runs live, alternating replicas, while the test
 *   1. SIGKILLs one replica while the runs are being dispatched, and starts it again;
 *   2. takes a worker host's link down for 20 s while its runs' finishing callbacks are due;
 *   3. SIGKILLs the Temporal server as the first run finishes, and starts it again;
 *   4. all along, delivers every callback of the third host to both replicas at the same moment.
 * Every run must complete exactly once: every item completed by one run, each agent started once, every workflow
 * closed, every callback delivered, and no call answered 500. The recovery figures are printed.
 */

const REPO_ROOT = fileURLToPath(new URL('../..', import.meta.url));
const RUNS = 36;
/** One run per lane: a lane whose run finished gets no other, so none is dispatched to while its host is cut off. */
const LANES_PER_GATE = 12;
const LINK_DOWN_MS = 20_000;

let dir: string;
let cluster: LocalCluster;
let fanOut: CallbackFanOut;
let store: Store;
/** Each run's agent starts in a sandbox that shows only this directory of the test's (agent_writable_paths). */
const agentShared = () => join(dir, 'agent-shared');
const agentStarts = () => join(agentShared(), 'agent-starts.jsonl');

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'rcp-fleet-'));
  await mkdir(agentShared(), { mode: 0o777 });
  await chmod(agentShared(), 0o777);
  const tag = process.pid % 1000;
  const naming = { prefix: `rf${tag}`, subnet: `10.234.${tag % 250}`, database: `rcp_fleet_${process.pid}`, taskQueue: `rcp-fleet-${process.pid}` };
  const fanOutPort = await testPort();
  const fanOutUrl = `http://${clusterNetwork(naming).hostAddress}:${fanOutPort}/control/api/worker-callback`;
  const options: ClusterOptions = {
    dir: join(dir, 'cluster'),
    repoRoot: REPO_ROOT,
    gates: 3,
    lanesPerGate: LANES_PER_GATE,
    postgres: { host: '127.0.0.1', port: 5432, user: 'postgres' },
    naming,
    ports: await clusterTestPorts(),
    gate: {
      dispatchScript: FAKE_AGENT_PATH,
      env: { FAKE_AGENT_COUNTER_FILE: agentStarts() },
      // The shortest quiet window; thresholds no busy CI machine can miss (the rule itself has unit tests).
      overrides: {
        sample_interval_sec: 2,
        idle_sustain_sec: 30,
        cpu_idle_threshold_pct: 100,
        gpu_idle_avg_threshold_pct: 100,
        gpu_idle_peak_threshold_pct: 100,
        vram_delta_threshold_mib: 1_000_000,
        default_workload_class: 'unknown',
        completion_callback_timeout_sec: 5,
        // The agent's environment is an allow-list: the fake agent's counter reaches it by name, in a place it may write.
        agent_credential_env: ['FAKE_AGENT_COUNTER_FILE'],
        agent_writable_paths: [agentShared()],
      },
    },
    replicaOverrides: { default_workload_class: 'unknown' },
    temporalSqlConnections: TEST_TEMPORAL_SQL_CONNECTIONS,
    // The third host's callbacks go through the fan-out, which posts each to both replicas at once.
    callbackUrls: (gate, replicaUrls) => (gate.name === 'gate-3' ? [fanOutUrl] : replicaUrls),
  };
  cluster = await LocalCluster.start(options, () => undefined);
  fanOut = await CallbackFanOut.start(cluster.topology.network.hostAddress, fanOutPort, cluster.topology.replicas.map((replica) => replica.callbackUrl));
  store = await openStore({ backend: 'pg', pgDatabaseUrl: `postgres://postgres@127.0.0.1:5432/${cluster.topology.controlPlaneDatabase}` });
  const lanes = cluster.topology.gates.flatMap((gate) => gate.lanes);
  await store.transaction(async (tx) => {
    for (let index = 0; index < RUNS; index++) {
      const projectId = `fleet-${String(index).padStart(2, '0')}`;
      const lane = lanes[index % lanes.length]!;
      await insertProject(tx, { project_id: projectId, project_name: `Fleet ${index}`, project_dir: projectId, workload_class: 'unknown', machine_target: lane });
      await insertQueueItem(tx, { project_id: projectId, project_name: `Fleet ${index}`, machine_target: lane, workload_class: 'unknown' });
    }
  });
}, 240_000);

afterAll(async () => {
  await fanOut?.close();
  await store?.close();
  await cluster?.stop();
  await cluster?.dropDatabases().catch(() => undefined);
  // RCP_FLEET_KEEP=1 keeps the cluster's folder (configs, process logs) for a look after a failure.
  if (dir && process.env.RCP_FLEET_KEEP !== '1') await rm(dir, { recursive: true, force: true });
}, 120_000);

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

async function until(what: string, check: () => Promise<boolean>, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`${what} did not happen within ${timeoutMs / 1000} s`);
    await sleep(200);
  }
}

/** What the replica logged of a request it answered 500, so that a failure says its cause. */
function loggedError(replicaName: string, requestId: string | null): string {
  const lines = readFileSync(cluster.logFile(replicaName), 'utf8').split('\n');
  const logged = lines.filter((line) => requestId !== null && line.includes(requestId) && /"level":(50|60)/.test(line));
  return logged.length === 0 ? ' (nothing logged for it)' : `; logged: ${logged.join('\n').slice(0, 2000)}`;
}

/** Items whose agent is at work: dispatched, not yet finished. */
const AT_WORK = ['awaiting_wake', 'running'];

/** How many items have one of these statuses (on these lanes, when given). */
async function countWithStatus(statuses: string[], lanes?: string[]): Promise<number> {
  const { rows } = await store.query<{ n: string }>(
    'SELECT count(*) AS n FROM queue_items WHERE status = ANY($1) AND ($2::text[] IS NULL OR machine_target = ANY($2))',
    [statuses, lanes ?? null],
  );
  return Number(rows[0]!.n);
}

/** Transitions after which a run waits on its next step; `dispatching` is the part a control plane carries alone. */
const WAITING = { any: ['claimed', 'prepared', 'worker_accepted', 'session_started', 'wake_received', 'reconciling'], dispatching: ['claimed', 'prepared'] };

/**
 * For the runs waiting at `at` (their last transition before it one of `waiting`, on `lanes` when given): how many, and
 * how long after `from` the first and the last of them next moved, in ms.
 */
async function recovery(at: Date, from: Date, waiting: string[], lanes?: string[]): Promise<{ runs: number; first_ms: number | null; all_ms: number | null }> {
  const { rows } = await store.query<{ first: number | null; last: number | null; runs: string }>(
    `WITH last_before AS (
       SELECT DISTINCT ON (t.run_id) t.run_id, t.transition FROM run_transitions t JOIN runs r USING (run_id)
       WHERE t.created_at < $1 AND ($3::text[] IS NULL OR r.lane = ANY($3))
       ORDER BY t.run_id, t.created_at DESC
     ), moved AS (
       SELECT l.run_id, min(t.created_at) AS at FROM last_before l JOIN run_transitions t USING (run_id)
       WHERE l.transition = ANY($4) AND t.created_at > $2 GROUP BY l.run_id
     )
     SELECT count(*) AS runs, extract(epoch FROM min(at) - $2) * 1000 AS first, extract(epoch FROM max(at) - $2) * 1000 AS last FROM moved`,
    [at, from, lanes ?? null, waiting],
  );
  const row = rows[0]!;
  return { runs: Number(row.runs), first_ms: row.first === null ? null : Math.round(Number(row.first)), all_ms: row.last === null ? null : Math.round(Number(row.last)) };
}

describe('the fleet under faults', () => {
  it('completes every run exactly once through a replica killed, a host cut off, Temporal killed and callbacks delivered twice at once', { timeout: 240_000 }, async () => {
    const { topology } = cluster;
    const [replica1, replica2] = topology.replicas as [(typeof topology.replicas)[number], (typeof topology.replicas)[number]];
    const token = topology.tokens.control;
    const down = new Set<string>();
    const statuses = new Map<number, number>();
    const serverErrors: string[] = [];
    let stop = false;

    // Two callers, each starting on another replica and alternating; a replica that is down is skipped.
    const caller = async (offset: number) => {
      for (let call = offset; !stop; call++) {
        const replica = [replica1, replica2].filter((candidate) => !down.has(candidate.name))[call % (2 - down.size)]!;
        try {
          const answer = await fetch(`${replica.url}/control/dispatch-next`, {
            method: 'POST',
            headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
            body: JSON.stringify({ dry_run: false, requested_by: 'fleet-test' }),
            signal: AbortSignal.timeout(30_000),
          });
          statuses.set(answer.status, (statuses.get(answer.status) ?? 0) + 1);
          const body = (await answer.json()) as { action?: string; detail?: string; request_id?: string };
          if (answer.status >= 500) {
            const requestId = body.request_id ?? answer.headers.get('x-request-id');
            serverErrors.push(`${answer.status} from ${replica.name}: ${JSON.stringify(body.detail)} (request ${requestId})${answer.status === 500 ? loggedError(replica.name, requestId) : ''}`);
          }
          if (body.action !== 'live_dispatch') await sleep(300);
        } catch {
          // The replica or Temporal went away mid-call; the run it started (if any) goes on.
          await sleep(300);
        }
      }
    };
    const callers = [caller(0), caller(1)];
    const started = Date.now();
    const faults: Record<string, { at: Date; from: Date; waiting: string[]; lanes?: string[] }> = {};
    let temporalRestartMs = 0;

    try {
      // 1. A replica dies while the runs are being dispatched; it comes back 5 s later.
      await until('8 runs to be dispatched', async () => (await countWithStatus(AT_WORK)) >= 8, 60_000);
      let at = new Date();
      down.add(replica1.name);
      await cluster.kill(replica1.name);
      faults.replica_killed = { at, from: at, waiting: WAITING.dispatching };
      await sleep(5_000);
      await cluster.startReplica(replica1);
      down.delete(replica1.name);

      // 2. A worker host is cut off for 20 s, from some 15 s after its agents started: its runs' quiet windows end, and
      // their finishing callbacks are due, while it is cut off.
      const cutOff = topology.gates[1]!;
      await until(`every run of ${cutOff.name} to have started`, async () => (await countWithStatus(['running'], cutOff.lanes)) === LANES_PER_GATE, 90_000);
      await sleep(15_000);
      const linkDown = new Date();
      await cluster.setLink(cutOff, false);

      // 3. The Temporal server dies as the first run finishes, and is started again.
      await until('a run to finish', async () => (await countWithStatus(['wake_received', 'reconciling', 'completed'])) > 0, 60_000);
      at = new Date();
      await cluster.kill('temporal');
      await cluster.startTemporal();
      temporalRestartMs = Date.now() - at.getTime();
      faults.temporal_killed = { at, from: new Date(), waiting: WAITING.any };

      await sleep(Math.max(0, linkDown.getTime() + LINK_DOWN_MS - Date.now()));
      await cluster.setLink(cutOff, true);
      faults.host_cut_off = { at: linkDown, from: new Date(), waiting: WAITING.any, lanes: cutOff.lanes };

      await until('every run to complete', async () => (await countWithStatus(['completed'])) === RUNS, 120_000);
    } finally {
      stop = true;
      await Promise.all(callers);
    }
    const figures: Record<string, unknown> = {};
    for (const [fault, { at, from, waiting, lanes }] of Object.entries(faults)) figures[fault] = await recovery(at, from, waiting, lanes);
    figures.temporal_restart_ms = temporalRestartMs;
    figures.total_s = Math.round((Date.now() - started) / 1000);
    figures.callbacks_delivered_to_both_at_once = fanOut.deliveredToSeveral;
    figures.dispatch_next_statuses = Object.fromEntries(statuses);
    console.log(`fleet recovery figures (runs: those mid-dispatch at the replica's death, in flight at Temporal's, on the host cut off; first_ms and all_ms: from the fault, Temporal's return or the link's return to the first and the last of their next transitions): ${JSON.stringify(figures)}`);

    // Every item completed by exactly one run, recorded once.
    const items = await store.query<{ project_id: string; status: string }>('SELECT project_id, status FROM queue_items ORDER BY project_id');
    expect(items.rows).toHaveLength(RUNS);
    expect(items.rows.filter((row) => row.status !== 'completed')).toEqual([]);
    const reconciled = await store.query<{ project_id: string; n: string }>("SELECT project_id, count(*) AS n FROM runs WHERE state = 'reconciled' GROUP BY project_id HAVING count(*) <> 1");
    expect(reconciled.rows).toEqual([]);
    const completions = await store.query<{ n: string }>("SELECT count(*) AS n FROM run_transitions WHERE transition = 'completed'");
    expect(Number(completions.rows[0]!.n)).toBe(RUNS);

    // Each agent started once: one dispatch-script start per item.
    const runsByProject = new Map((await store.query<{ run_id: string; project_id: string }>("SELECT run_id, project_id FROM runs WHERE state = 'reconciled'")).rows.map((row) => [row.run_id, row.project_id]));
    const starts = readFileSync(agentStarts(), 'utf8').trim().split('\n').map((line) => (JSON.parse(line) as { run_id: string }).run_id);
    const startsPerProject = new Map<string, number>();
    for (const runId of starts) {
      const project = runsByProject.get(runId) ?? `not reconciled: ${runId}`;
      startsPerProject.set(project, (startsPerProject.get(project) ?? 0) + 1);
    }
    expect([...startsPerProject.entries()].filter(([, count]) => count !== 1)).toEqual([]);
    expect(startsPerProject.size).toBe(RUNS);

    // Every workflow closed, each completed.
    const connection = await Connection.connect({ address: topology.temporal.address });
    try {
      const client = new Client({ connection, namespace: topology.namespace });
      const open: string[] = [];
      for (const { workflow_id } of (await store.query<{ workflow_id: string }>('SELECT workflow_id FROM runs')).rows) {
        const { status } = await client.workflow.getHandle(workflow_id).describe();
        if (status.name !== 'COMPLETED') open.push(`${workflow_id}: ${status.name}`);
      }
      expect(open).toEqual([]);
    } finally {
      await connection.close();
    }

    // Every callback delivered: no gate holds one still to send, and the fan-out did deliver to both at once. A callback
    // refused while Temporal was down, or sent while its host was cut off, may still wait out its retry pause (at most
    // a minute) after its run completed through another.
    const pendingCallbacks = async (gate: (typeof topology.gates)[number]) => {
      const answer = await fetch(`${gate.url}/dashboard/api`, { headers: { authorization: `Bearer ${gate.token}` } });
      return ((await answer.json()) as { totals: { callback_pending: number } }).totals.callback_pending;
    };
    for (const gate of topology.gates) await until(`${gate.name} to have delivered every callback`, async () => (await pendingCallbacks(gate)) === 0, 75_000);
    expect(fanOut.deliveredToSeveral).toBeGreaterThan(0);
    expect(serverErrors.filter((error) => error.startsWith('500'))).toEqual([]);
    cluster.checkNoneExited();
  });
});
