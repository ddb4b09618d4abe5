import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { closeSync, existsSync, mkdirSync, openSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Connection } from '@temporalio/client';
import { msToTs } from '@temporalio/common/lib/time.js';
import pg from 'pg';
import { TEMPORAL_SERVER_VERSION } from '../bin/runtime/temporal-server.ts';
import { cacheRoot } from '../bin/runtime/temporal-cli.ts';
import { clusterNamespaces, makeNetwork, namespacePids, removeNetwork } from './cluster/network.ts';
import { gateConfig, planCluster, replicaConfig, temporalServerConfig, type ClusterOptions, type Topology } from './cluster/topology.ts';

/**
 * `npm run cluster` (README "Running on several machines"): on this one machine, the shape a lab runs on several — the
 * real Temporal server on the local Postgres, two control-plane replicas sharing one database and task queue, and
 * worker hosts, each a gate with the simulated agent in a network namespace of its own, reached through
 * worker_targets. It prints the topology and runs until Ctrl-C, which stops every process and removes every namespace;
 * a start after a crash first removes what the crashed one left (state/cluster/processes.json names its processes).
 */

const REPO_ROOT = fileURLToPath(new URL('..', import.meta.url));
const options: ClusterOptions = {
  dir: join(REPO_ROOT, 'state', 'cluster'),
  repoRoot: REPO_ROOT,
  gates: Number(process.env.RCP_CLUSTER_GATES ?? 3),
  postgres: { host: '127.0.0.1', port: 5432, user: 'postgres' },
};
const RECORD = join(options.dir, 'processes.json');
const READY_TIMEOUT_MS = 180_000;

const log = (message: string) => console.log(`[cluster] ${message}`);

interface Started {
  name: string;
  child: ChildProcess;
  logFile: string;
}
const started: Started[] = [];

function step(script: string): void {
  const result = spawnSync('bash', [join(REPO_ROOT, 'scripts', script)], { stdio: 'inherit' });
  if (result.status !== 0) throw new Error(`scripts/${script} failed (output above)`);
}

function record(): void {
  writeFileSync(RECORD, JSON.stringify(started.map(({ name, child }) => ({ name, pid: child.pid }))));
}

/** Starts a process in its own process group, its output appended to logs/<name>.log. */
function startProcess(name: string, command: string, args: string[], env: Record<string, string> = {}): Started {
  mkdirSync(join(options.dir, 'logs'), { recursive: true });
  const logFile = join(options.dir, 'logs', `${name}.log`);
  const out = openSync(logFile, 'a');
  const child = spawn(command, args, { cwd: REPO_ROOT, env: { ...process.env, ...env }, stdio: ['ignore', out, out], detached: true });
  closeSync(out);
  const entry = { name, child, logFile };
  started.push(entry);
  record();
  return entry;
}

const alive = (pid: number) => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

function killGroup(pid: number, signal: NodeJS.Signals): void {
  try {
    process.kill(-pid, signal);
  } catch {
    // Gone already.
  }
}

/** Every process left in the cluster's namespaces (agents the gates started, in groups of their own). */
async function killNamespaceProcesses(): Promise<void> {
  for (const namespace of await clusterNamespaces()) {
    for (const pid of await namespacePids(namespace)) {
      try {
        process.kill(pid, 'SIGKILL');
      } catch {
        // Gone already.
      }
    }
  }
}

/** Whether a process is one this script started: its command line or its environment names the cluster's folder. */
function belongsToCluster(pid: number): boolean {
  for (const file of ['cmdline', 'environ']) {
    try {
      if (readFileSync(`/proc/${pid}/${file}`, 'utf8').includes(options.dir)) return true;
    } catch {
      // Gone, or not ours to read.
    }
  }
  return false;
}

/** What a crashed start left: its processes (by the record, each only if it still is one of ours), its namespaces' processes and its network. */
async function removeLeftovers(): Promise<void> {
  if (existsSync(RECORD)) {
    const previous = JSON.parse(readFileSync(RECORD, 'utf8')) as { name: string; pid: number }[];
    for (const { name, pid } of previous) {
      if (!belongsToCluster(pid)) continue;
      log(`stopping ${name} (pid ${pid}), left by an earlier start`);
      killGroup(pid, 'SIGKILL');
    }
  }
  await killNamespaceProcesses();
  await removeNetwork();
}

async function adminQuery(sql: string): Promise<void> {
  const client = new pg.Client({ host: options.postgres.host, port: options.postgres.port, user: options.postgres.user, database: 'postgres' });
  await client.connect();
  try {
    await client.query(sql);
  } finally {
    await client.end();
  }
}

async function freshDatabase(name: string): Promise<void> {
  await adminQuery(`DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`);
  await adminQuery(`CREATE DATABASE "${name}"`);
}

/** Temporal's two databases, their schemas set up and brought up to date by its own SQL tool. */
async function setUpTemporalSchemas(topology: Topology): Promise<void> {
  const dir = join(cacheRoot(), `temporal-server-${TEMPORAL_SERVER_VERSION}`);
  const tool = join(dir, 'temporal-sql-tool');
  for (const [database, schema] of [[topology.temporal.databases.main, 'temporal'], [topology.temporal.databases.visibility, 'visibility']] as const) {
    await freshDatabase(database);
    const base = ['--plugin', 'postgres12', '--ep', options.postgres.host, '-p', String(options.postgres.port), '-u', options.postgres.user, '--db', database];
    for (const args of [['setup-schema', '-v', '0.0'], ['update-schema', '-d', join(dir, 'schema', 'postgresql', 'v12', schema, 'versioned')]]) {
      const result = spawnSync(tool, [...base, ...args], { encoding: 'utf8' });
      if (result.status !== 0) throw new Error(`temporal-sql-tool ${args[0]} on ${database} failed:\n${result.stdout}${result.stderr}`);
    }
  }
}

async function until<T>(what: string, probe: () => Promise<T | undefined>, timeoutMs: number, check: () => void = () => undefined): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    check();
    const value = await probe().catch(() => undefined);
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`${what} did not happen within ${timeoutMs / 1000} s`);
    await new Promise((resolve) => setTimeout(resolve, 500));
  }
}

/** Fails at once when a started process has exited, naming its log. */
function noneExited(): void {
  const gone = started.find(({ child }) => child.exitCode !== null || child.signalCode !== null);
  if (gone) throw new Error(`${gone.name} exited (${gone.child.exitCode ?? gone.child.signalCode}); see ${gone.logFile}`);
}

async function startTemporal(topology: Topology): Promise<void> {
  mkdirSync(join(options.dir, 'temporal'), { recursive: true });
  writeFileSync(topology.temporal.configFile, temporalServerConfig(topology, options));
  const server = join(cacheRoot(), `temporal-server-${TEMPORAL_SERVER_VERSION}`, 'temporal-server');
  startProcess('temporal', server, ['--config-file', topology.temporal.configFile, '--allow-no-auth', 'start']);
  await until('the Temporal server to answer', async () => {
    const connection = await Connection.connect({ address: topology.temporal.address, connectTimeout: 2_000 });
    try {
      await connection.workflowService.registerNamespace({ namespace: topology.namespace, workflowExecutionRetentionPeriod: msToTs('3 days') }).catch((error: { code?: number }) => {
        // ALREADY_EXISTS: a registration an earlier attempt made.
        if (error.code !== 6) throw error;
      });
      await connection.workflowService.describeNamespace({ namespace: topology.namespace });
      return true;
    } finally {
      await connection.close();
    }
  }, READY_TIMEOUT_MS, noneExited);
}

function writeConfig(dir: string, config: Record<string, unknown>): string {
  mkdirSync(dir, { recursive: true });
  const path = join(dir, 'config.json');
  writeFileSync(path, `${JSON.stringify(config, null, 2)}\n`, { mode: 0o600 });
  return path;
}

async function healthy(url: string): Promise<true | undefined> {
  const response = await fetch(`${url}/healthz`, { signal: AbortSignal.timeout(2_000) });
  return response.ok ? true : undefined;
}

async function stopAll(): Promise<void> {
  // Replicas first (they stop their workers), then the gates and what they started, then Temporal.
  for (const group of [started.filter((s) => s.name.startsWith('control-plane')), started.filter((s) => s.name.startsWith('gate')), started.filter((s) => s.name === 'temporal')]) {
    for (const { child } of group) if (child.pid) killGroup(child.pid, 'SIGTERM');
    const deadline = Date.now() + 15_000;
    while (group.some(({ child }) => child.pid && alive(child.pid) && child.exitCode === null) && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 200));
    for (const { child } of group) if (child.pid) killGroup(child.pid, 'SIGKILL');
  }
  await killNamespaceProcesses();
  await removeNetwork();
  rmSync(RECORD, { force: true });
}

async function main(): Promise<void> {
  if (!Number.isInteger(options.gates) || options.gates < 1 || options.gates > 20) throw new Error('RCP_CLUSTER_GATES must be a whole number from 1 to 20');
  if (process.getuid?.() !== 0) throw new Error('npm run cluster makes network namespaces, which needs root');
  await removeLeftovers();
  rmSync(options.dir, { recursive: true, force: true });
  mkdirSync(options.dir, { recursive: true, mode: 0o700 });

  log('checking Postgres and the Temporal server build');
  step('ensure-postgres.sh');
  step('install-temporal-server.sh');
  const topology = planCluster(options);

  log(`setting up Temporal's databases (${topology.temporal.databases.main}, ${topology.temporal.databases.visibility}) with temporal-sql-tool`);
  await setUpTemporalSchemas(topology);
  await freshDatabase(topology.controlPlaneDatabase);
  log(`starting the Temporal server v${TEMPORAL_SERVER_VERSION} at ${topology.temporal.address}`);
  await startTemporal(topology);

  log(`making ${topology.gates.length} worker hosts (network namespaces on a bridge)`);
  await makeNetwork(topology.gates);
  const tokensDir = join(options.dir, 'tokens');
  mkdirSync(tokensDir, { recursive: true, mode: 0o700 });
  writeFileSync(join(tokensDir, 'control-api.token'), `${topology.tokens.control}\n`, { mode: 0o600 });
  for (const gate of topology.gates) {
    writeFileSync(join(tokensDir, `${gate.name}.token`), `${gate.token}\n`, { mode: 0o600 });
    const config = writeConfig(gate.dir, gateConfig(topology, options, gate));
    startProcess(gate.name, 'ip', ['netns', 'exec', gate.namespace, process.execPath, join(REPO_ROOT, 'bin', 'start.js')], { SVC_CONFIG: config, SVC_CONTROL_PLANE_CONFIG: '' });
  }
  log(`starting ${topology.replicas.length} control-plane replicas at once`);
  for (const replica of topology.replicas) {
    const config = writeConfig(replica.dir, replicaConfig(topology, options, replica));
    startProcess(replica.name, process.execPath, [join(REPO_ROOT, 'bin', 'start.js')], { SVC_CONFIG: config, SVC_CONTROL_PLANE_CONFIG: '', TEMPORAL_ADDRESS: '' });
  }
  for (const { url, name } of [...topology.gates, ...topology.replicas]) await until(`${name} to answer /healthz`, () => healthy(url), READY_TIMEOUT_MS, noneExited);

  const lines = [
    '',
    'The cluster is up:',
    `  Temporal server v${TEMPORAL_SERVER_VERSION}  ${topology.temporal.address}  namespace ${topology.namespace}, task queue ${topology.taskQueue}, databases ${topology.temporal.databases.main} and ${topology.temporal.databases.visibility}`,
    ...topology.replicas.map((replica) => `  ${replica.name}  ${replica.url}  dashboard ${replica.url}/control/dashboard-v2  database ${topology.controlPlaneDatabase}`),
    ...topology.gates.map((gate) => `  ${gate.name}  ${gate.url}  network namespace ${gate.namespace}  token ${join(tokensDir, `${gate.name}.token`)}`),
    `  control API token  ${join(tokensDir, 'control-api.token')}`,
    `  configs, state and logs under ${options.dir}`,
    '',
    'Ctrl-C stops every process and removes the namespaces.',
  ];
  console.log(lines.join('\n'));
  await new Promise<void>((resolve, reject) => {
    const timer = setInterval(() => {
      try {
        noneExited();
      } catch (error) {
        clearInterval(timer);
        reject(error);
      }
    }, 1_000);
    for (const signal of ['SIGINT', 'SIGTERM'] as const) {
      process.once(signal, () => {
        clearInterval(timer);
        resolve();
      });
    }
  });
}

main()
  .then(async () => {
    log('stopping');
    await stopAll();
    log('stopped; no process or namespace is left');
  })
  .catch(async (error: unknown) => {
    console.error(`[cluster] ERROR: ${(error as Error).message}`);
    await stopAll().catch(() => undefined);
    process.exitCode = 1;
  });
