import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { TEMPORAL_SERVER_VERSION } from '../platform/temporal/temporal-server.ts';
import { cgroupMounts } from '../worker-gate/run-cgroups/mounts.ts';
import { LocalCluster } from './cluster/local-cluster.ts';
import { LOCAL_CLUSTER_NAMING, LOCAL_CLUSTER_PORTS, type ClusterOptions } from './cluster/topology.ts';

/**
 * `npm run cluster` (docs/operations.md#running-on-several-machines): on this one machine, the shape a lab runs on several — the
 * real Temporal server on the local Postgres, two control-plane replicas sharing one database and task queue, and
 * worker hosts, each a gate with the simulated agent in a network namespace of its own, reached through
 * worker_targets. It prints the topology and runs until Ctrl-C, which stops every process and removes every namespace;
 * a start after a crash first removes what the crashed one left.
 */

const REPO_ROOT = fileURLToPath(new URL('..', import.meta.url));

/**
 * Each gate's runs in cgroups of their own, as on a worker host: the gates share this process's cgroup (a login
 * session's, which no gate takes as its own), so they are given the v2 hierarchy's root, where the cluster's root may
 * make them a subtree each. `auto` still takes the v1 hierarchies where that root offers no memory and pids
 * controllers (a machine whose controllers sit in v1).
 */
function runCgroupOverrides(): Record<string, unknown> {
  const unified = cgroupMounts().find((mount) => mount.version === 2 && mount.root === '/');
  return { run_cgroup_mode: 'auto', ...(unified ? { run_cgroup_v2_root: unified.mountPoint } : {}) };
}
const options: ClusterOptions = {
  dir: join(REPO_ROOT, 'state', 'cluster'),
  repoRoot: REPO_ROOT,
  gates: Number(process.env.RCP_CLUSTER_GATES ?? 3),
  lanesPerGate: 1,
  postgres: { host: '127.0.0.1', port: 5432, user: 'postgres' },
  naming: LOCAL_CLUSTER_NAMING,
  ports: LOCAL_CLUSTER_PORTS,
  gate: { dispatchScript: join(REPO_ROOT, 'worker-gate', 'simulated-agent.sh'), env: {}, overrides: runCgroupOverrides() },
  replicaOverrides: {},
};

/** A closed terminal (SIGHUP) makes writes to it fail: the stop must still run to the end, so a failed write is dropped. */
for (const stream of [process.stdout, process.stderr]) stream.on('error', () => undefined);
const print = (text: string) => {
  try {
    console.log(text);
  } catch {
    // The terminal is gone; the stop goes on.
  }
};
const log = (message: string) => print(`[cluster] ${message}`);

/**
 * Ctrl-C (SIGINT), SIGTERM and a closed terminal (SIGHUP) all stop the cluster, from the moment this process starts:
 * a signal during the start stops the cluster as soon as it is up. The handlers stay for the whole run, so a second
 * signal during the stop is answered with a line and does not end this process half-way (which left the Temporal
 * server, the gates, their namespaces and the bridge behind). For the same reason `npm run cluster` runs this file in
 * one process (`node --import tsx`), not under the `tsx` command: that command relays a signal to its child and
 * SIGKILLs the child when it has not acknowledged the signal within about 60 ms, which a busy machine exceeds.
 */
const STOP_SIGNALS = ['SIGINT', 'SIGTERM', 'SIGHUP'] as const;
let stopRequested: NodeJS.Signals | undefined;
const stopSignal = new Promise<NodeJS.Signals>((resolve) => {
  for (const signal of STOP_SIGNALS) {
    process.on(signal, () => {
      if (stopRequested) {
        log(`${signal}: already stopping (on ${stopRequested}); every process, namespace and the bridge are being removed, please wait`);
        return;
      }
      stopRequested = signal;
      resolve(signal);
    });
  }
});

/**
 * Runs one start-up script; false when the start is to stop instead. Ctrl-C reaches the script's processes too (the
 * Temporal server build among them), so a script that a stop signal ended has not failed: the stop goes on, quietly.
 * It runs asynchronously so that this process's signal handlers have run by the time the script's end is seen.
 */
async function step(script: string): Promise<boolean> {
  const child = spawn('bash', [join(REPO_ROOT, 'scripts', script)], { stdio: 'inherit' });
  const [status, signal] = (await once(child, 'close')) as [number | null, NodeJS.Signals | null];
  // The stop signal reaches the step's process group too, and may be seen here before its handler has run.
  if (stopRequested || (signal && (STOP_SIGNALS as readonly string[]).includes(signal))) {
    log(`scripts/${script} stopped (${stopRequested ?? signal}); the cluster is not started`);
    return false;
  }
  if (signal) throw new Error(`scripts/${script} was killed (${signal})`);
  if (status !== 0) throw new Error(`scripts/${script} failed (output above)`);
  return true;
}

function describe(cluster: LocalCluster): string {
  const { topology } = cluster;
  return [
    '',
    'The cluster is up:',
    `  Temporal server v${TEMPORAL_SERVER_VERSION}  ${topology.temporal.address}  namespace ${topology.namespace}, task queue ${topology.taskQueue}, databases ${topology.temporal.databases.main} and ${topology.temporal.databases.visibility}`,
    ...topology.replicas.map((replica) => `  ${replica.name}  ${replica.url}  dashboard ${replica.url}/control/dashboard-v2  database ${topology.controlPlaneDatabase}`),
    ...topology.gates.map((gate) => `  ${gate.name}  ${gate.url}  network namespace ${gate.namespace}  token ${join(cluster.tokensDir, `${gate.name}.token`)}`),
    `  control API token  ${join(cluster.tokensDir, 'control-api.token')}`,
    `  configs, state and logs under ${options.dir}`,
    '',
    'Ctrl-C stops every process and removes the namespaces.',
  ].join('\n');
}

async function main(): Promise<void> {
  if (!Number.isInteger(options.gates) || options.gates < 1 || options.gates > 20) throw new Error('RCP_CLUSTER_GATES must be a whole number from 1 to 20');
  if (process.getuid?.() !== 0) throw new Error('npm run cluster makes network namespaces, which needs root');
  log('checking Postgres and the Temporal server build');
  if (!(await step('ensure-postgres.sh')) || !(await step('install-temporal-server.sh')) || stopRequested) return;
  const cluster = await LocalCluster.start(options, log);
  if (!stopRequested) print(describe(cluster));
  try {
    await new Promise<void>((resolve, reject) => {
      const timer = setInterval(() => {
        try {
          cluster.checkNoneExited();
        } catch (error) {
          clearInterval(timer);
          reject(error);
        }
      }, 1_000);
      void stopSignal.then(() => {
        clearInterval(timer);
        resolve();
      });
    });
  } finally {
    log(`stopping${stopRequested ? ` (${stopRequested})` : ''}`);
    await cluster.stop();
    log('stopped; no process or namespace is left');
  }
}

main().catch((error: unknown) => {
  console.error(`[cluster] ERROR: ${(error as Error).message}`);
  process.exitCode = 1;
});
