import { randomBytes } from 'node:crypto';
import { join } from 'node:path';

/**
 * The shape `npm run cluster` starts on this one machine (README "Running on several machines"): the Temporal server
 * on the local Postgres, two control-plane replicas, and worker hosts, each a gate in a network namespace of its own.
 * Everything here is plain data: names, addresses, ports and each process's config.
 */

export interface ClusterOptions {
  /** Where the cluster keeps its configs, tokens, logs and state (removed and made afresh at each start). */
  dir: string;
  repoRoot: string;
  gates: number;
  postgres: { host: string; port: number; user: string };
}

/** The bridge every namespace joins, and its /24; the host side holds .1. */
export const BRIDGE = 'rcpc-br0';
const SUBNET = '10.233.0';
export const HOST_ADDRESS = `${SUBNET}.1`;
export const NAMESPACE_PREFIX = 'rcpc-gate-';

const TEMPORAL_PORTS = { frontend: 17233, frontendHttp: 17243, history: 17234, matching: 17235, worker: 17239, metrics: 17290 } as const;
const MEMBERSHIP_PORTS = { frontend: 16933, history: 16934, matching: 16935, worker: 16939 } as const;
const REPLICA_PORTS = [18787, 18797] as const;
const GATE_PORT = 8788;

export interface GateHost {
  name: string;
  namespace: string;
  /** veth ends: on the host (joined to the bridge) and in the namespace. */
  hostLink: string;
  nsLink: string;
  address: string;
  url: string;
  token: string;
  dir: string;
}

export interface Replica {
  name: string;
  port: number;
  url: string;
  dir: string;
}

export interface Topology {
  dir: string;
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
  const gates = Array.from({ length: options.gates }, (_, index): GateHost => {
    const n = index + 1;
    const address = `${SUBNET}.${10 + n}`;
    return {
      name: `gate-${n}`,
      namespace: `${NAMESPACE_PREFIX}${n}`,
      hostLink: `rcpc-g${n}h`,
      nsLink: `rcpc-g${n}n`,
      address,
      url: `http://${address}:${GATE_PORT}`,
      token: token(),
      dir: join(options.dir, `gate-${n}`),
    };
  });
  const replicas = REPLICA_PORTS.map((port, index): Replica => ({
    name: `control-plane-${index + 1}`,
    port,
    url: `http://${HOST_ADDRESS}:${port}`,
    dir: join(options.dir, `control-plane-${index + 1}`),
  }));
  return {
    dir: options.dir,
    temporal: {
      address: `127.0.0.1:${TEMPORAL_PORTS.frontend}`,
      configFile: join(options.dir, 'temporal', 'config.yaml'),
      databases: { main: 'rcp_cluster_temporal', visibility: 'rcp_cluster_temporal_visibility' },
    },
    controlPlaneDatabase: 'rcp_cluster',
    namespace: 'default',
    taskQueue: 'rcp-cluster',
    tokens: { control: token(), callback: token() },
    replicas,
    gates,
  };
}

/** The Temporal server's config: Postgres persistence, every service on loopback, the cluster's own ports. */
export function temporalServerConfig(topology: Topology, options: ClusterOptions): string {
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
  const service = (name: keyof typeof MEMBERSHIP_PORTS, grpc: number, extra: string[] = []) => [
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
    ...store(topology.temporal.databases.main, 20),
    '    visibility:',
    ...store(topology.temporal.databases.visibility, 4),
    'global:',
    '  membership:',
    '    maxJoinDuration: 30s',
    '    broadcastAddress: "127.0.0.1"',
    '  metrics:',
    '    prometheus:',
    '      framework: "tally"',
    '      timerType: "histogram"',
    `      listenAddress: "127.0.0.1:${TEMPORAL_PORTS.metrics}"`,
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
    '',
  ].join('\n');
}

const pgUrl = (options: ClusterOptions, database: string) => `postgres://${options.postgres.user}@${options.postgres.host}:${options.postgres.port}/${database}`;

/** One replica's config file: the cluster's shared fields, and its own port and state. */
export function replicaConfig(topology: Topology, options: ClusterOptions, replica: Replica): Record<string, unknown> {
  return {
    roles: ['control_plane'],
    control_api_bearer_token: topology.tokens.control,
    completion_callback_url: `${replica.url}/control/api/worker-callback`,
    completion_callback_token: topology.tokens.callback,
    state_dir: join(replica.dir, 'state'),
    // Shared: a paper's steps may run on either replica.
    project_root: join(topology.dir, 'control-plane-projects'),
    listen_host: HOST_ADDRESS,
    listen_port: replica.port,
    control_plane_store_backend: 'pg',
    pg_database_url: pgUrl(options, topology.controlPlaneDatabase),
    temporal_address: topology.temporal.address,
    temporal_namespace: topology.namespace,
    temporal_task_queue: topology.taskQueue,
    live_dispatch_enabled: true,
    worker_targets: Object.fromEntries(topology.gates.map((gate) => [gate.name, { wake_gate_url: gate.url, bearer_token: gate.token, role: 'gpu_worker' }])),
  };
}

/** One gate's config file: it posts its callbacks to the first replica, and to the other when that one does not take them. */
export function gateConfig(topology: Topology, options: ClusterOptions, gate: GateHost): Record<string, unknown> {
  const [first, ...others] = topology.replicas.map((replica) => `${replica.url}/control/api/worker-callback`);
  return {
    roles: ['worker_gate'],
    control_api_bearer_token: topology.tokens.control,
    worker_wake_gate_bearer_token: gate.token,
    completion_callback_url: first,
    completion_callback_fallback_urls: others,
    completion_callback_token: topology.tokens.callback,
    completion_callback_timeout_sec: 10,
    state_dir: join(gate.dir, 'state'),
    project_root: join(gate.dir, 'projects'),
    dispatch_script_path: join(options.repoRoot, 'worker-gate', 'simulated-agent.sh'),
    agent_runtime: 'script',
    listen_host: gate.address,
    listen_port: GATE_PORT,
  };
}
