import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { closeSync, existsSync, mkdirSync, openSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { Connection } from '@temporalio/client';
import { msToTs } from '@temporalio/common/lib/time.js';
import pg from 'pg';
import { TEMPORAL_SERVER_VERSION } from '../../platform/temporal/temporal-server.ts';
import { cacheRoot } from '../../platform/temporal/temporal-cli.ts';
import { clusterNamespaces, makeNetwork, namespacePids, removeNetwork, setGateLink } from './network.ts';
import { gateConfig, planCluster, replicaConfig, temporalServerConfig, type ClusterOptions, type GateHost, type Replica, type Topology } from './topology.ts';

/**
 * The processes of a local cluster (docs/operations.md#running-on-several-machines): `npm run cluster` starts one and keeps it
 * until Ctrl-C; the fleet test (test/product/fleet.test.ts) starts one and breaks it — a replica or the Temporal server killed
 * and started again, a worker host's link taken down. Each process runs in a process group of its own, its output
 * appended to `<dir>/logs/<name>.log`, and `<dir>/processes.json` names them all, so a start after a crash first stops
 * what the crashed one left (each only if it still is one of this cluster's processes).
 */

const READY_TIMEOUT_MS = 180_000;
const STOP_GRACE_MS = 15_000;
const LOG_LINES_QUOTED = 20;
const LOG_LINE_CHARS_QUOTED = 400;

interface Started {
  name: string;
  child: ChildProcess;
  logFile: string;
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

function killGroup(pid: number, signal: NodeJS.Signals): void {
  try {
    process.kill(-pid, signal);
  } catch {
    // Gone already.
  }
}

const running = ({ child }: Started) => child.exitCode === null && child.signalCode === null;

export class LocalCluster {
  readonly topology: Topology;
  private readonly started: Started[] = [];
  private readonly record: string;
  private readonly serverDir = join(cacheRoot(), `temporal-server-${TEMPORAL_SERVER_VERSION}`);

  private readonly options: ClusterOptions;
  private readonly log: (message: string) => void;

  private constructor(options: ClusterOptions, log: (message: string) => void) {
    this.options = options;
    this.log = log;
    this.topology = planCluster(options);
    this.record = join(options.dir, 'processes.json');
  }

  /**
   * Starts the whole cluster: what an earlier start left is removed first, then Temporal's databases are made afresh
   * and set up by temporal-sql-tool, and the server, the gates and both replicas (at once) are started. Needs root
   * (network namespaces), the local Postgres and `scripts/install-temporal-server.sh`'s build.
   */
  static async start(options: ClusterOptions, log: (message: string) => void): Promise<LocalCluster> {
    // No gates: the replicas' worker targets are elsewhere (bench/fleet.ts gives them a gate of its own).
    if (!Number.isInteger(options.gates) || options.gates < 0 || options.gates > 20) throw new Error('the number of gates must be a whole number from 0 to 20');
    if (process.getuid?.() !== 0) throw new Error('a local cluster makes network namespaces, which needs root');
    const cluster = new LocalCluster(options, log);
    try {
      await cluster.bringUp();
    } catch (error) {
      await cluster.stop().catch(() => undefined);
      throw error;
    }
    return cluster;
  }

  /**
   * Only the Temporal server, on fresh databases (the mTLS test's: it starts control planes of its own against it).
   * No network namespaces, so no root needed.
   */
  static async startTemporalOnly(options: ClusterOptions, log: (message: string) => void): Promise<LocalCluster> {
    const cluster = new LocalCluster({ ...options, gates: 0 }, log);
    try {
      await cluster.bringUpTemporal();
    } catch (error) {
      await cluster.stop().catch(() => undefined);
      throw error;
    }
    return cluster;
  }

  private async bringUpTemporal(): Promise<void> {
    const { topology, options } = this;
    await this.removeLeftovers();
    rmSync(options.dir, { recursive: true, force: true });
    mkdirSync(options.dir, { recursive: true, mode: 0o700 });
    for (const binary of ['temporal-server', 'temporal-sql-tool']) {
      if (!existsSync(join(this.serverDir, binary))) throw new Error(`${join(this.serverDir, binary)} is missing: run bash scripts/install-temporal-server.sh`);
    }

    this.log(`setting up Temporal's databases (${topology.temporal.databases.main}, ${topology.temporal.databases.visibility}) with temporal-sql-tool`);
    await this.setUpTemporalSchemas();
    await this.freshDatabase(topology.controlPlaneDatabase);
    this.log(`starting the Temporal server v${TEMPORAL_SERVER_VERSION} at ${topology.temporal.address}${options.temporalTls ? ' (mTLS)' : ''}`);
    mkdirSync(join(options.dir, 'temporal'), { recursive: true });
    writeFileSync(topology.temporal.configFile, temporalServerConfig(topology, options));
    await this.startTemporal();
  }

  private async bringUp(): Promise<void> {
    const { topology, options } = this;
    await this.bringUpTemporal();

    this.log(`making ${topology.gates.length} worker hosts (network namespaces on the bridge ${topology.network.bridge})`);
    await makeNetwork(topology.network, topology.gates);
    const tokensDir = this.tokensDir;
    mkdirSync(tokensDir, { recursive: true, mode: 0o700 });
    writeFileSync(join(tokensDir, 'control-api.token'), `${topology.tokens.control}\n`, { mode: 0o600 });
    for (const gate of topology.gates) {
      writeFileSync(join(tokensDir, `${gate.name}.token`), `${gate.token}\n`, { mode: 0o600 });
      this.writeConfig(gate.dir, gateConfig(topology, options, gate));
      this.startGate(gate);
    }
    this.log(`starting ${topology.replicas.length} control-plane replicas at once`);
    for (const replica of topology.replicas) this.writeConfig(replica.dir, replicaConfig(topology, options, replica));
    await Promise.all([...topology.replicas.map((replica) => this.startReplica(replica)), ...topology.gates.map((gate) => this.healthy(gate.name, gate.url))]);
  }

  get tokensDir(): string {
    return join(this.options.dir, 'tokens');
  }

  logFile(name: string): string {
    return join(this.options.dir, 'logs', `${name}.log`);
  }

  /** Starts the Temporal server on its config (the databases already set up) and waits until the namespace answers. */
  async startTemporal(): Promise<void> {
    const { topology } = this;
    this.spawn('temporal', join(this.serverDir, 'temporal-server'), ['--config-file', topology.temporal.configFile, '--allow-no-auth', 'start']);
    await this.until('the Temporal server to answer', async () => {
      const connection = await Connection.connect({ address: topology.temporal.address, connectTimeout: 2_000, ...this.temporalTls() });
      try {
        await connection.workflowService.registerNamespace({ namespace: topology.namespace, workflowExecutionRetentionPeriod: msToTs('3 days') }).catch((error: { code?: number }) => {
          // ALREADY_EXISTS: registered by an earlier attempt or start.
          if (error.code !== 6) throw error;
        });
        await connection.workflowService.describeNamespace({ namespace: topology.namespace });
        return true;
      } finally {
        await connection.close();
      }
    });
  }

  /** The client side of the server's mTLS, when it serves one. */
  private temporalTls() {
    const files = this.options.temporalTls;
    if (!files) return {};
    return { tls: { serverNameOverride: 'localhost', serverRootCACertificate: readFileSync(files.ca), clientCertPair: { crt: readFileSync(files.clientCert), key: readFileSync(files.clientKey) } } };
  }

  /** Starts a replica on its config (written at the cluster's start) and waits for its /healthz. */
  async startReplica(replica: Replica): Promise<void> {
    this.spawn(replica.name, process.execPath, [join(this.options.repoRoot, 'bin', 'start.js')], { SVC_CONFIG: join(replica.dir, 'config.json'), SVC_CONTROL_PLANE_CONFIG: '', TEMPORAL_ADDRESS: '' });
    await this.healthy(replica.name, replica.url);
  }

  private startGate(gate: GateHost): void {
    this.spawn(gate.name, 'ip', ['netns', 'exec', gate.namespace, process.execPath, join(this.options.repoRoot, 'bin', 'start.js')], {
      SVC_CONFIG: join(gate.dir, 'config.json'),
      SVC_CONTROL_PLANE_CONFIG: '',
      ...this.options.gate.env,
    });
  }

  /** SIGKILLs a process of the cluster (`temporal`, a replica's or a gate's name) with its whole process group. */
  async kill(name: string): Promise<void> {
    const entry = this.started.find((candidate) => candidate.name === name && running(candidate));
    if (!entry?.child.pid) throw new Error(`${name} is not running`);
    killGroup(entry.child.pid, 'SIGKILL');
    await new Promise((resolve) => (running(entry) ? entry.child.once('exit', resolve) : resolve(undefined)));
    this.started.splice(this.started.indexOf(entry), 1);
    this.writeRecord();
  }

  /** The pid of a running process of the cluster (`temporal`, a replica's or a gate's name). */
  pidOf(name: string): number | undefined {
    return this.started.find((entry) => entry.name === name && running(entry))?.child.pid;
  }

  /** Takes a worker host's link down (`ip link set … down`) or up again. */
  setLink(gate: GateHost, up: boolean): Promise<void> {
    return setGateLink(gate, up);
  }

  /** Every process stopped (replicas first, then the gates and what they started, then Temporal) and the network removed. */
  async stop(): Promise<void> {
    const groups = [
      this.started.filter((s) => s.name.startsWith('control-plane')),
      this.started.filter((s) => s.name.startsWith('gate')),
      this.started.filter((s) => s.name === 'temporal'),
    ];
    for (const group of groups) {
      for (const { child } of group) if (child.pid) killGroup(child.pid, 'SIGTERM');
      const deadline = Date.now() + STOP_GRACE_MS;
      while (group.some(running) && Date.now() < deadline) await sleep(200);
      for (const { child } of group) if (child.pid) killGroup(child.pid, 'SIGKILL');
    }
    await this.killNamespaceProcesses();
    await removeNetwork(this.topology.network);
    rmSync(this.record, { force: true });
  }

  /** Fails when a started process has exited on its own, naming its log. */
  checkNoneExited(): void {
    const gone = this.started.find((entry) => !running(entry));
    if (!gone) return;
    const tail = readFileSync(gone.logFile, 'utf8')
      .trimEnd()
      .split('\n')
      .slice(-LOG_LINES_QUOTED)
      .map((line) => (line.length > LOG_LINE_CHARS_QUOTED ? `${line.slice(0, LOG_LINE_CHARS_QUOTED)}…` : line))
      .join('\n');
    throw new Error(`${gone.name} exited (${gone.child.exitCode ?? gone.child.signalCode}); the end of ${gone.logFile}:\n${tail}`);
  }

  private spawn(name: string, command: string, args: string[], env: Record<string, string> = {}): void {
    mkdirSync(join(this.options.dir, 'logs'), { recursive: true });
    const logFile = this.logFile(name);
    const out = openSync(logFile, 'a');
    const child = spawn(command, args, { cwd: this.options.repoRoot, env: { ...process.env, ...env }, stdio: ['ignore', out, out], detached: true });
    closeSync(out);
    const index = this.started.findIndex((entry) => entry.name === name);
    if (index >= 0) this.started.splice(index, 1);
    this.started.push({ name, child, logFile });
    this.writeRecord();
  }

  private writeRecord(): void {
    writeFileSync(this.record, JSON.stringify(this.started.map((entry) => ({ name: entry.name, pid: entry.child.pid }))));
  }

  private async healthy(name: string, url: string): Promise<void> {
    await this.until(`${name} to answer /healthz`, async () => {
      const response = await fetch(`${url}/healthz`, { signal: AbortSignal.timeout(2_000) });
      return response.ok ? true : undefined;
    });
  }

  private async until<T>(what: string, probe: () => Promise<T | undefined>): Promise<T> {
    const deadline = Date.now() + READY_TIMEOUT_MS;
    for (;;) {
      this.checkNoneExited();
      const value = await probe().catch(() => undefined);
      if (value !== undefined) return value;
      if (Date.now() > deadline) throw new Error(`${what} did not happen within ${READY_TIMEOUT_MS / 1000} s`);
      await sleep(250);
    }
  }

  private writeConfig(dir: string, config: Record<string, unknown>): void {
    mkdirSync(dir, { recursive: true });
    writeFileSync(join(dir, 'config.json'), `${JSON.stringify(config, null, 2)}\n`, { mode: 0o600 });
  }

  /** Whether a process is one of this cluster's: its command line or its environment names the cluster's folder. */
  private belongsToCluster(pid: number): boolean {
    for (const file of ['cmdline', 'environ']) {
      try {
        if (readFileSync(`/proc/${pid}/${file}`, 'utf8').includes(this.options.dir)) return true;
      } catch {
        // Gone, or not ours to read.
      }
    }
    return false;
  }

  /** What a crashed start left: its processes (by the record), its namespaces' processes and its network. */
  private async removeLeftovers(): Promise<void> {
    if (existsSync(this.record)) {
      const previous = JSON.parse(readFileSync(this.record, 'utf8')) as { name: string; pid: number }[];
      for (const { name, pid } of previous) {
        if (!this.belongsToCluster(pid)) continue;
        this.log(`stopping ${name} (pid ${pid}), left by an earlier start`);
        killGroup(pid, 'SIGKILL');
      }
    }
    await this.killNamespaceProcesses();
    await removeNetwork(this.topology.network);
  }

  /** Every process left in the cluster's namespaces (agents the gates started, in groups of their own). */
  private async killNamespaceProcesses(): Promise<void> {
    for (const namespace of await clusterNamespaces(this.topology.network)) {
      for (const pid of await namespacePids(namespace)) {
        try {
          process.kill(pid, 'SIGKILL');
        } catch {
          // Gone already.
        }
      }
    }
  }

  private async adminQuery(sql: string): Promise<void> {
    const { postgres } = this.options;
    const client = new pg.Client({ host: postgres.host, port: postgres.port, user: postgres.user, database: 'postgres' });
    await client.connect();
    try {
      await client.query(sql);
    } finally {
      await client.end();
    }
  }

  private async freshDatabase(name: string): Promise<void> {
    await this.adminQuery(`DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`);
    await this.adminQuery(`CREATE DATABASE "${name}"`);
  }

  /** Drops the cluster's databases (the fleet test's clean-up; `npm run cluster` keeps them until its next start). */
  async dropDatabases(): Promise<void> {
    const { databases } = this.topology.temporal;
    for (const name of [databases.main, databases.visibility, this.topology.controlPlaneDatabase]) await this.adminQuery(`DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`);
  }

  /** Temporal's two databases, their schemas set up and brought up to date by its own SQL tool. */
  private async setUpTemporalSchemas(): Promise<void> {
    const { postgres } = this.options;
    const tool = join(this.serverDir, 'temporal-sql-tool');
    const { main, visibility } = this.topology.temporal.databases;
    for (const [database, schema] of [[main, 'temporal'], [visibility, 'visibility']] as const) {
      await this.freshDatabase(database);
      const base = ['--plugin', 'postgres12', '--ep', postgres.host, '-p', String(postgres.port), '-u', postgres.user, '--db', database];
      for (const args of [['setup-schema', '-v', '0.0'], ['update-schema', '-d', join(this.serverDir, 'schema', 'postgresql', 'v12', schema, 'versioned')]]) {
        const result = spawnSync(tool, [...base, ...args], { encoding: 'utf8' });
        if (result.status !== 0) throw new Error(`temporal-sql-tool ${args[0]} on ${database} failed:\n${result.stdout}${result.stderr}`);
      }
    }
  }
}
