import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import { WORKLOAD_CLASSES } from '../../worker-gate/contract/workload.ts';

/**
 * The shape `npm run cluster` starts on this one machine (docs/operations.md#running-on-several-machines): the Temporal server
 * on the local Postgres, two control-plane replicas, and worker hosts, each a gate in a network namespace of its own.
 * Everything here is plain data: names, addresses, ports and each process's config.
 */

export interface ClusterOptions {
  /** Where the cluster keeps its configs, tokens, logs and state (removed and made afresh at each start). */
  dir: string;
  repoRoot: string;
  gates: number;
  /** Lanes (worker targets) on each gate host: one is `gate-N`, more are `gate-N-1`, `gate-N-2`, … */
  lanesPerGate: number;
  postgres: { host: string; port: number; user: string };
  naming: ClusterNaming;
  ports: ClusterPorts;
  /** The gates' dispatch script, extra environment and config fields (tests: the fake agent, a short quiet window). */
  gate: { dispatchScript: string; env: Record<string, string>; overrides: Record<string, unknown> };
  replicaOverrides: Record<string, unknown>;
  /** Where a gate posts its callbacks, first choice first; by default every replica, starting with the first. */
  callbackUrls?: (gate: GateHost, replicaCallbackUrls: string[]) => string[];
  /** The Temporal frontend serves mTLS with these PEM files; the replicas connect with the client pair. */
  temporalTls?: TemporalTlsFiles;
  /**
   * Most connections each of the Temporal server's four services (frontend, history, matching, worker: one pool each,
   * though they run in one process) opens to its main and its visibility database. By default 20 and 4: up to 96 in
   * all, which a Postgres left at its 100 connections cannot spare beside anything else.
   */
  temporalSqlConnections?: { main: number; visibility: number };
}

export interface TemporalTlsFiles {
  /** The CA that signed the server's certificate and the clients'. */
  ca: string;
  serverCert: string;
  serverKey: string;
  /** Also what the server's own system worker presents to the frontend. */
  clientCert: string;
  clientKey: string;
}

/** What makes one cluster's names and addresses its own, so a test's cluster can run beside `npm run cluster`'s. */
export interface ClusterNaming {
  /** Starts every interface and namespace name; at most 5 characters, since Linux interface names hold 15. */
  prefix: string;
  /** The first three octets of the cluster's /24; this machine holds .1 on the bridge, gate N holds .(10 + N). */
  subnet: string;
  /** Starts the names of the cluster's Postgres databases. */
  database: string;
  taskQueue: string;
}

export interface ClusterPorts {
  temporal: { frontend: number; frontendHttp: number; history: number; matching: number; worker: number; metrics: number };
  membership: { frontend: number; history: number; matching: number; worker: number };
  replicas: [number, number];
}

/** `npm run cluster`'s names, addresses and ports (docs/operations.md#running-on-several-machines). */
export const LOCAL_CLUSTER_NAMING: ClusterNaming = { prefix: 'rcpc', subnet: '10.233.0', database: 'rcp_cluster', taskQueue: 'rcp-cluster' };
export const LOCAL_CLUSTER_PORTS: ClusterPorts = {
  temporal: { frontend: 17233, frontendHttp: 17243, history: 17234, matching: 17235, worker: 17239, metrics: 17290 },
  membership: { frontend: 16933, history: 16934, matching: 16935, worker: 16939 },
  replicas: [18787, 18797],
};
const GATE_PORT = 8788;

export interface ClusterNetwork {
  prefix: string;
  bridge: string;
  /** This machine's address on the bridge, where the replicas listen. */
  hostAddress: string;
  namespacePrefix: string;
}

export function clusterNetwork(naming: ClusterNaming): ClusterNetwork {
  return { prefix: naming.prefix, bridge: `${naming.prefix}-br0`, hostAddress: `${naming.subnet}.1`, namespacePrefix: `${naming.prefix}-gate-` };
}

/** Gate N's veth ends: on this machine (joined to the bridge) and in its namespace. */
export const hostLinkName = (network: ClusterNetwork, n: number) => `${network.prefix}g${n}h`;
const namespaceLinkName = (network: ClusterNetwork, n: number) => `${network.prefix}g${n}n`;

export interface GateHost {
  name: string;
  namespace: string;
  /** veth ends: on the host (joined to the bridge) and in the namespace. */
  hostLink: string;
  nsLink: string;
  address: string;
  url: string;
  token: string;
  /** Its control_api_bearer_token: only agents configured by hand post events with it, so it is the host's own. */
  agentEventToken: string;
  dir: string;
  /** Its lanes: the worker_targets keys that reach it. */
  lanes: string[];
}

export interface Replica {
  name: string;
  port: number;
  url: string;
  callbackUrl: string;
  dir: string;
}

export interface Topology {
  dir: string;
  network: ClusterNetwork;
  temporal: { address: string; configFile: string; databases: { main: string; visibility: string } };
  controlPlaneDatabase: string;
  namespace: string;
  taskQueue: string;
  tokens: { control: string; callback: string };
  replicas: Replica[];
  gates: GateHost[];
}

const token = () => randomBytes(32).toString('hex');

export function planCluster(options: ClusterOptions): Topology {
  const { naming, ports } = options;
  // Temporal stores membership ports in a smallint column: a higher one makes the server exit at start.
  const tooHigh = Object.entries(ports.membership).filter(([, port]) => port > 32_767);
  if (tooHigh.length > 0) throw new Error(`Temporal's membership ports must be at most 32767 (${tooHigh.map(([name, port]) => `${name} ${port}`).join(', ')})`);
  const network = clusterNetwork(naming);
  const gates = Array.from({ length: options.gates }, (_, index): GateHost => {
    const n = index + 1;
    const address = `${naming.subnet}.${10 + n}`;
    const name = `gate-${n}`;
    return {
      name,
      namespace: `${network.namespacePrefix}${n}`,
      hostLink: hostLinkName(network, n),
      nsLink: namespaceLinkName(network, n),
      address,
      url: `http://${address}:${GATE_PORT}`,
      token: token(),
      agentEventToken: token(),
      dir: join(options.dir, name),
      lanes: options.lanesPerGate === 1 ? [name] : Array.from({ length: options.lanesPerGate }, (_, lane) => `${name}-${lane + 1}`),
    };
  });
  const replicas = ports.replicas.map((port, index): Replica => {
    const url = `http://${network.hostAddress}:${port}`;
    return { name: `control-plane-${index + 1}`, port, url, callbackUrl: `${url}/control/api/worker-callback`, dir: join(options.dir, `control-plane-${index + 1}`) };
  });
  return {
    dir: options.dir,
    network,
    temporal: {
      address: `127.0.0.1:${ports.temporal.frontend}`,
      configFile: join(options.dir, 'temporal', 'config.yaml'),
      databases: { main: `${naming.database}_temporal`, visibility: `${naming.database}_temporal_visibility` },
    },
    controlPlaneDatabase: naming.database,
    namespace: 'default',
    taskQueue: naming.taskQueue,
    tokens: { control: token(), callback: token() },
    replicas,
    gates,
  };
}

/** The Temporal server's config: Postgres persistence, every service on loopback, the cluster's own ports. */
export function temporalServerConfig(topology: Topology, options: ClusterOptions): string {
  const { temporal: TEMPORAL_PORTS, membership: MEMBERSHIP_PORTS } = options.ports;
  const sqlConnections = options.temporalSqlConnections ?? { main: 20, visibility: 4 };
  const store = (database: string, maxConns: number) => [
    `      sql:`,
    `        pluginName: "postgres12"`,
    `        databaseName: "${database}"`,
    `        connectAddr: "${options.postgres.host}:${options.postgres.port}"`,
    `        connectProtocol: "tcp"`,
    `        user: "${options.postgres.user}"`,
    `        password: ""`,
    `        maxConns: ${maxConns}`,
    `        maxIdleConns: ${maxConns}`,
    `        maxConnLifetime: "1h"`,
  ];
  const service = (name: keyof ClusterPorts['membership'], grpc: number, extra: string[] = []) => [
    `  ${name}:`,
    `    rpc:`,
    `      grpcPort: ${grpc}`,
    `      membershipPort: ${MEMBERSHIP_PORTS[name]}`,
    `      bindOnLocalHost: true`,
    ...extra,
  ];
  return [
    'log:',
    '  stdout: true',
    '  level: warn',
    'persistence:',
    '  defaultStore: default',
    '  visibilityStore: visibility',
    '  numHistoryShards: 4',
    '  datastores:',
    '    default:',
    ...store(topology.temporal.databases.main, sqlConnections.main),
    '    visibility:',
    ...store(topology.temporal.databases.visibility, sqlConnections.visibility),
    'global:',
    '  membership:',
    '    maxJoinDuration: 30s',
    '    broadcastAddress: "127.0.0.1"',
    '  metrics:',
    '    prometheus:',
    '      framework: "tally"',
    '      timerType: "histogram"',
    `      listenAddress: "127.0.0.1:${TEMPORAL_PORTS.metrics}"`,
    ...(options.temporalTls ? temporalTlsConfig(options.temporalTls) : []),
    'services:',
    ...service('frontend', TEMPORAL_PORTS.frontend, [`      httpPort: ${TEMPORAL_PORTS.frontendHttp}`]),
    ...service('matching', TEMPORAL_PORTS.matching),
    ...service('history', TEMPORAL_PORTS.history),
    ...service('worker', TEMPORAL_PORTS.worker),
    'clusterMetadata:',
    '  enableGlobalNamespace: false',
    '  failoverVersionIncrement: 10',
    '  masterClusterName: "active"',
    '  currentClusterName: "active"',
    '  clusterInformation:',
    '    active:',
    '      enabled: true',
    '      initialFailoverVersion: 1',
    '      rpcName: "frontend"',
    `      rpcAddress: "127.0.0.1:${TEMPORAL_PORTS.frontend}"`,
    'dcRedirectionPolicy:',
    '  policy: "noop"',
    // The compose stack's dynamic config: eager activity execution, as on the embedded dev server.
    'dynamicConfigClient:',
    `  filepath: "${join(options.repoRoot, 'deploy', 'temporal-dynamic-config.yaml')}"`,
    '  pollInterval: "60s"',
    '',
  ].join('\n');
}

/**
 * The frontend's TLS under `global:`: it requires a client certificate signed by the CA. The server's own system
 * worker calls the frontend too, so it presents the client pair.
 */
function temporalTlsConfig(files: TemporalTlsFiles): string[] {
  const client = ['        serverName: "localhost"', `        rootCaFiles: ["${files.ca}"]`];
  return [
    '  tls:',
    '    frontend:',
    '      server:',
    `        certFile: "${files.serverCert}"`,
    `        keyFile: "${files.serverKey}"`,
    '        requireClientAuth: true',
    `        clientCaFiles: ["${files.ca}"]`,
    '      client:',
    ...client,
    '    systemWorker:',
    `      certFile: "${files.clientCert}"`,
    `      keyFile: "${files.clientKey}"`,
    '      client:',
    ...client,
  ];
}

/** The config fields of a control plane that reaches the cluster's Temporal over mTLS. */
export function temporalTlsFields(files: TemporalTlsFiles): Record<string, string> {
  return {
    temporal_tls_server_ca_cert_path: files.ca,
    temporal_tls_client_cert_path: files.clientCert,
    temporal_tls_client_key_path: files.clientKey,
    temporal_tls_server_name: 'localhost',
  };
}

const pgUrl = (options: ClusterOptions, database: string) => `postgres://${options.postgres.user}@${options.postgres.host}:${options.postgres.port}/${database}`;

const workloadClassesTo = (lane: string | undefined): Record<string, string> => (lane ? Object.fromEntries(WORKLOAD_CLASSES.map((workloadClass) => [workloadClass, lane])) : {});

/** One replica's config file: the cluster's shared fields, and its own port and state. */
export function replicaConfig(topology: Topology, options: ClusterOptions, replica: Replica): Record<string, unknown> {
  return {
    roles: ['control_plane'],
    control_api_bearer_token: topology.tokens.control,
    completion_callback_url: replica.callbackUrl,
    completion_callback_token: topology.tokens.callback,
    state_dir: join(replica.dir, 'state'),
    // Shared: a paper's steps may run on either replica.
    project_root: join(topology.dir, 'control-plane-projects'),
    listen_host: topology.network.hostAddress,
    listen_port: replica.port,
    control_plane_store_backend: 'pg',
    pg_database_url: pgUrl(options, topology.controlPlaneDatabase),
    temporal_address: topology.temporal.address,
    temporal_namespace: topology.namespace,
    temporal_task_queue: topology.taskQueue,
    ...(options.temporalTls ? temporalTlsFields(options.temporalTls) : {}),
    live_dispatch_enabled: true,
    worker_targets: Object.fromEntries(topology.gates.flatMap((gate) => gate.lanes.map((lane) => [lane, { wake_gate_url: gate.url, bearer_token: gate.token, role: 'gpu_worker' }]))),
    // Items that name no machine_target take the first worker host's first lane, by their workload class. Not a default
    // lane (worker_wake_gate_url): that would be one more lane on a gate whose own lanes already fill it.
    workload_machine_targets: workloadClassesTo(topology.gates[0]?.lanes[0]),
    ...options.replicaOverrides,
  };
}

/**
 * One gate's config file. By default gate N posts its callbacks first to replica N (round the replicas), so the
 * callbacks spread over them, and to the others when that one does not take them.
 */
export function gateConfig(topology: Topology, options: ClusterOptions, gate: GateHost): Record<string, unknown> {
  const start = topology.gates.indexOf(gate) % topology.replicas.length;
  const rotated = [...topology.replicas.slice(start), ...topology.replicas.slice(0, start)].map((replica) => replica.callbackUrl);
  const [first, ...others] = options.callbackUrls?.(gate, rotated) ?? rotated;
  return {
    roles: ['worker_gate'],
    control_api_bearer_token: gate.agentEventToken,
    worker_wake_gate_bearer_token: gate.token,
    completion_callback_url: first,
    completion_callback_fallback_urls: others,
    completion_callback_token: topology.tokens.callback,
    completion_callback_timeout_sec: 10,
    state_dir: join(gate.dir, 'state'),
    project_root: join(gate.dir, 'projects'),
    dispatch_script_path: options.gate.dispatchScript,
    agent_runtime: 'script',
    listen_host: gate.address,
    listen_port: GATE_PORT,
    // A run at a time per lane that reaches it (one lane: the default, a run at a time).
    ...(gate.lanes.length > 1 ? { run_slots: gate.lanes.length } : {}),
    ...options.gate.overrides,
  };
}
