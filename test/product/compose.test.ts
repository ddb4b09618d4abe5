import { randomBytes } from 'node:crypto';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { spawn } from 'node:child_process';
import { dirname } from 'node:path';
import { afterAll, describe, expect, inject, it } from 'vitest';
import { parse } from 'yaml';
import { loadConfig } from '../../platform/config/load.ts';
import { ConfigFieldsSchema, ENV_ONLY_FIELDS, ENV_OVERRIDES } from '../../platform/config/schema.ts';
import { resolveLane, workerRoutingFrom } from '../../capabilities/runs/domain/worker-lanes.ts';
import { WORKLOAD_CLASSES } from '../../worker-gate/contract/workload.ts';
import { startTemporalDevServer } from '../../platform/temporal/temporal-dev-server.ts';
import { TEMPORAL_SERVER_VERSION } from '../../platform/temporal/temporal-server.ts';
import { configFingerprint } from '../../platform/config/fingerprint.ts';
import { gateConfig, LOCAL_CLUSTER_NAMING, LOCAL_CLUSTER_PORTS, planCluster, replicaConfig, type ClusterOptions } from '../../scripts/cluster/topology.ts';
import { testPort } from '../support/ports.ts';

/**
 * Docker is not on the machines this suite runs on, so the compose stack (docs/operations.md#the-compose-stack) is checked the
 * way Compose itself would read it: the YAML parsed, variables interpolated from a .env, and each config the stack
 * hands the app loaded by the app's own config loader.
 */

const REPO_ROOT = fileURLToPath(new URL('../..', import.meta.url));
const read = (path: string) => readFileSync(join(REPO_ROOT, path), 'utf8');

interface Service {
  image?: string;
  build?: { context: string; target?: string };
  environment?: Record<string, string>;
  ports?: string[];
  healthcheck?: { test: string[] };
  depends_on?: Record<string, { condition: string }>;
  volumes?: string[];
  configs?: { source: string; target: string; mode?: number }[];
  restart?: string;
  init?: boolean;
}
interface ComposeFile {
  services: Record<string, Service>;
  configs: Record<string, { content: string }>;
}

const composeText = read('docker-compose.yml');
// YAML 1.1, as Compose reads it: `mode: 0400` is octal and `<<` merges.
const compose = parse(composeText, { version: '1.1' }) as ComposeFile;
const services = Object.entries(compose.services);

/** Variables the stack requires (`${NAME:?...}`) and those it defaults (`${NAME:-...}`). */
const requiredVariables = [...new Set([...composeText.matchAll(/\$\{([A-Z0-9_]+):\?/g)].map((m) => m[1]!))];
const defaultedVariables = [...new Set([...composeText.matchAll(/\$\{([A-Z0-9_]+):-/g)].map((m) => m[1]!))];

/** Compose's interpolation of `${NAME}`, `${NAME:?message}` and `${NAME:-default}`; a missing required one throws. */
function interpolate(text: string, env: Record<string, string>): string {
  return text.replace(/\$\{([A-Z0-9_]+)(?::([?-])([^}]*))?\}/g, (_match, name: string, kind: string | undefined, arg: string) => {
    const value = env[name];
    if (value !== undefined && value !== '') return value;
    if (kind === '-') return arg;
    throw new Error(`${name} is required: ${arg}`);
  });
}

/** The services running our image (the control plane and the gate). */
const REPLICAS = ['control-plane-1', 'control-plane-2'];
const appImage = compose.services['control-plane-1']!.image;
const appServices = services.filter(([, service]) => service.build !== undefined || service.image === appImage);
/** One-shot jobs: another service waits for them to complete rather than to be healthy. */
const oneShot = new Set(
  services.flatMap(([, service]) =>
    Object.entries(service.depends_on ?? {})
      .filter(([, dependency]) => dependency.condition === 'service_completed_successfully')
      .map(([name]) => name),
  ),
);

describe('docker-compose.yml', () => {
  it('has the whole multi-machine shape', () => {
    expect(Object.keys(compose.services).sort()).toEqual(
      [...REPLICAS, 'postgres', 'temporal', 'temporal-namespace', 'temporal-schema', 'temporal-ui', 'worker-gate'].sort(),
    );
    expect(appServices.map(([name]) => name).sort()).toEqual([...REPLICAS, 'worker-gate']);
  });

  it('runs our image under an init that reaps orphaned processes (the gate\'s agents detach and outlive their launcher)', () => {
    for (const [name, service] of appServices) expect(service.init, name).toBe(true);
  });

  it('runs the Temporal server version that scripts/install-temporal-server.sh builds', () => {
    const temporalImages = services.map(([, service]) => service.image ?? '').filter((image) => /^temporalio\/(server|admin-tools):/.test(image));
    expect(temporalImages.length).toBeGreaterThanOrEqual(2);
    for (const image of temporalImages) expect(image.split(':')[1]).toBe(TEMPORAL_SERVER_VERSION);
    expect(/^readonly VERSION=(\S+)$/m.exec(read('scripts/install-temporal-server.sh'))?.[1]).toBe(TEMPORAL_SERVER_VERSION);
  });

  it('gives every service a pinned image or our Dockerfile, and every long-running one a health check', () => {
    for (const [name, service] of services) {
      if (service.build) expect(service.build, name).toMatchObject({ context: '.', target: 'runtime' });
      else if (appServices.some(([app]) => app === name)) expect(service.image, name).toBe(appImage);
      else expect(service.image, name).toMatch(/^[a-z0-9./-]+:\d[\w.-]*$/);
      if (oneShot.has(name)) {
        expect(service.restart, name).toBe('no');
        continue;
      }
      expect(service.healthcheck?.test?.[0], name).toMatch(/^CMD(-SHELL)?$/);
      expect(service.restart, name).toBe('unless-stopped');
    }
  });

  it('starts each service once what it needs is healthy or done', () => {
    for (const [name, service] of services) {
      for (const [dependency, { condition }] of Object.entries(service.depends_on ?? {})) {
        expect(compose.services[dependency], `${name} depends on ${dependency}`).toBeDefined();
        expect(condition, `${name} → ${dependency}`).toBe(oneShot.has(dependency) ? 'service_completed_successfully' : 'service_healthy');
      }
    }
    for (const replica of REPLICAS) expect(Object.keys(compose.services[replica]!.depends_on!)).toEqual(expect.arrayContaining(['postgres', 'temporal-namespace']));
  });

  it('publishes ports on loopback only, each host port once', () => {
    const hostPorts = services.flatMap(([, service]) => service.ports ?? []);
    for (const port of hostPorts) expect(port).toMatch(/^127\.0\.0\.1:\d+:\d+$/);
    const published = hostPorts.map((port) => port.split(':')[1]);
    expect(new Set(published).size).toBe(published.length);
    expect(REPLICAS.map((replica) => compose.services[replica]!.ports)).toEqual([['127.0.0.1:8787:8787'], ['127.0.0.1:8797:8797']]);
  });

  it('runs Postgres and a Temporal with its namespace, and nothing of ours, for the command docs/operations.md gives', () => {
    const dependencies = (names: string[]): Set<string> => {
      const all = new Set(names);
      for (const name of all) for (const dependency of Object.keys(compose.services[name]?.depends_on ?? {})) all.add(dependency);
      return all;
    };
    // `docker compose up -d <services>`, as docs/operations.md and the file's own header give it.
    const commands = [read('docs/operations.md'), composeText].flatMap((text) => [...text.matchAll(/`docker compose up -d ([a-z -]+)`/g)].map((m) => m[1]!));
    expect(commands).toHaveLength(2);
    expect(commands[1]).toBe(commands[0]);
    const started = dependencies(commands[0]!.split(' '));
    for (const name of started) expect(compose.services[name], name).toBeDefined();
    expect([...started].sort()).toEqual(['postgres', 'temporal', 'temporal-namespace', 'temporal-schema', 'temporal-ui']);
    const namespaceJob = compose.services['temporal-namespace']! as Service & { entrypoint: string[] };
    expect(namespaceJob.entrypoint).toEqual(['/bin/sh', '/deploy/temporal-namespace.sh', 'default']);
  });

  it('registers the namespace once the Temporal frontend answers, and again without harm', async () => {
    const cli = inject('temporalCliPath');
    const port = await testPort();
    const address = `127.0.0.1:${port}`;
    const namespace = `compose-${randomBytes(4).toString('hex')}`;
    const run = () =>
      new Promise<{ code: number | null; output: string }>((resolve) => {
        const child = spawn('sh', [join(REPO_ROOT, 'deploy/temporal-namespace.sh'), namespace], {
          env: { ...process.env, PATH: `${dirname(cli)}:${process.env.PATH ?? ''}`, TEMPORAL_ADDRESS: address },
        });
        let output = '';
        child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
        child.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()));
        child.on('close', (code) => resolve({ code, output }));
      });
    // Started before the server, as Compose may start it before the frontend serves.
    const first = run();
    await new Promise((resolve) => setTimeout(resolve, 3_000));
    const logDir = mkdtempSync(join(tmpdir(), 'rcp-compose-temporal-'));
    const server = await startTemporalDevServer({ binaryPath: cli, port, headless: true, namespace: 'default', logFile: join(logDir, 'server.log') });
    try {
      const registered = await first;
      expect(registered.output).toContain(`namespace ${namespace} is registered`);
      expect(registered.code).toBe(0);
      const again = await run();
      expect(again).toEqual({ code: 0, output: `namespace ${namespace} is registered\n` });
    } finally {
      await server.stop();
      rmSync(logDir, { recursive: true, force: true });
    }
  }, 90_000);

  it('mounts only files the repository has', () => {
    for (const [name, service] of services) {
      for (const volume of service.volumes ?? []) {
        const source = volume.split(':')[0]!;
        if (source.startsWith('./')) expect(existsSync(join(REPO_ROOT, source)), `${name}: ${source}`).toBe(true);
      }
    }
  });

  it('sets on the app only environment variables the config schema defines', () => {
    const known = new Set(['SVC_CONFIG', 'SVC_CONTROL_PLANE_CONFIG', ...Object.keys(ENV_OVERRIDES), ...Object.keys(ENV_ONLY_FIELDS)]);
    for (const [name, service] of appServices) {
      for (const variable of Object.keys(service.environment ?? {})) expect(known.has(variable), `${name}: ${variable}`).toBe(true);
    }
    for (const replica of REPLICAS) expect(compose.services[replica]!.environment).toMatchObject({ TEMPORAL_ADDRESS: 'temporal:7233' });
  });

  it('names in .env.example every variable the stack needs, and no other', () => {
    const example = read('.env.example')
      .split('\n')
      .filter((line) => /^[A-Z0-9_]+=/.test(line))
      .map((line) => line.split('=')[0]!);
    expect(example.sort()).toEqual([...requiredVariables, ...defaultedVariables].sort());
  });

  describe('the configs it hands the app', () => {
    const dir = mkdtempSync(join(tmpdir(), 'rcp-compose-'));
    afterAll(() => rmSync(dir, { recursive: true, force: true }));
    const env = Object.fromEntries(requiredVariables.map((name) => [name, randomBytes(24).toString('hex')]));

    const load = (service: string) => {
      const mount = compose.services[service]!.configs![0]!;
      expect(mount).toMatchObject({ target: compose.services[service]!.environment!.SVC_CONFIG, uid: '1000', mode: 0o400 });
      const path = join(dir, `${service}.json`);
      writeFileSync(path, interpolate(compose.configs[mount.source]!.content, env), { mode: 0o600 });
      const result = loadConfig({ env: { ...compose.services[service]!.environment, SVC_CONFIG: path }, cwd: dir });
      if (!result.ok) throw new Error(`${service}: ${result.problems.join('; ')}`);
      return result;
    };

    it('validates each replica\'s (every field it sets exists): pg backend on one database, Temporal from TEMPORAL_ADDRESS, the gate as its worker target', () => {
      const [first, second] = REPLICAS.map((replica) => load(replica));
      for (const { config, warnings } of [first!, second!]) {
        expect(config).toMatchObject({
          roles: ['control_plane'],
          control_plane_store_backend: 'pg',
          pg_database_url: `postgres://control_plane:${env.RCP_POSTGRES_PASSWORD}@postgres:5432/control_plane`,
          temporal_address: 'temporal:7233',
          temporal_namespace: 'default',
          temporal_task_queue: 'control-plane',
          worker_targets: { 'gate-1': { wake_gate_url: 'http://worker-gate:8788', bearer_token: env.RCP_GATE_TOKEN, role: 'gpu_worker' } },
          live_dispatch_enabled: false,
        });
        expect(warnings).toEqual([]);
      }
      // One cluster: the replicas differ only in fields each sets for itself.
      expect(configFingerprint(first!.config).fingerprint).toBe(configFingerprint(second!.config).fingerprint);
    });

    it('routes items without machine_target to a lane of the gate, and makes no lane beyond the gates\' own (one more would let a gate run one agent more at once)', () => {
      const clusterOptions: ClusterOptions = {
        dir: '/srv/cluster',
        repoRoot: REPO_ROOT,
        gates: 2,
        lanesPerGate: 2,
        postgres: { host: '127.0.0.1', port: 5432, user: 'postgres' },
        naming: LOCAL_CLUSTER_NAMING,
        ports: LOCAL_CLUSTER_PORTS,
        gate: { dispatchScript: '/app/worker-gate/simulated-agent.sh', env: {}, overrides: {} },
        replicaOverrides: {},
      };
      const topology = planCluster(clusterOptions);
      const clusterReplica = ConfigFieldsSchema.parse(replicaConfig(topology, clusterOptions, topology.replicas[0]!));
      const routings = [
        { routing: workerRoutingFrom(clusterReplica), lanes: topology.gates.flatMap((gate) => gate.lanes), first: topology.gates[0]!.lanes[0]! },
        ...REPLICAS.map((replica) => ({ routing: workerRoutingFrom(load(replica).config), lanes: ['gate-1'], first: 'gate-1' })),
      ];
      for (const { routing, lanes, first } of routings) {
        expect([...routing.targets.keys()].sort()).toEqual([...lanes].sort());
        for (const workloadClass of WORKLOAD_CLASSES) {
          const lane = resolveLane({ machine_target: null, workload_class: workloadClass }, routing);
          expect(lane.ok && lane.target.name, workloadClass).toBe(first);
        }
      }
    });

    it('sets the same config fields as npm run cluster, on the replicas and on the gate', () => {
      const options: ClusterOptions = {
        dir: '/srv/cluster',
        repoRoot: REPO_ROOT,
        gates: 1,
        lanesPerGate: 1,
        postgres: { host: '127.0.0.1', port: 5432, user: 'postgres' },
        naming: LOCAL_CLUSTER_NAMING,
        ports: LOCAL_CLUSTER_PORTS,
        gate: { dispatchScript: '/app/worker-gate/simulated-agent.sh', env: {}, overrides: {} },
        replicaOverrides: {},
      };
      const topology = planCluster(options);
      const fieldsOf = (service: string) => Object.keys(JSON.parse(interpolate(compose.configs[compose.services[service]!.configs![0]!.source]!.content, env)) as object);
      // Compose alone names each container in allowed_hosts (they reach each other by service name) and gives the
      // replicas their Temporal address in TEMPORAL_ADDRESS; dispatch_script_path is a gate's field that the cluster
      // sets and the compose replicas, which serve no gate, leave out.
      const composeOnly = ['allowed_hosts'];
      const fromEnvironment = ['temporal_address'];
      for (const replica of REPLICAS) {
        const cluster = Object.keys(replicaConfig(topology, options, topology.replicas[0]!)).filter((field) => !fromEnvironment.includes(field));
        expect(fieldsOf(replica).filter((field) => !composeOnly.includes(field)).sort(), replica).toEqual(cluster.sort());
      }
      const gate = Object.keys(gateConfig(topology, options, topology.gates[0]!));
      expect(fieldsOf('worker-gate').filter((field) => !composeOnly.includes(field)).sort()).toEqual(gate.sort());
    });

    it('validates the gate\'s, whose callbacks reach both replicas with the same tokens', () => {
      const gate = load('worker-gate').config;
      const controlPlane = load('control-plane-1').config;
      expect(gate.roles).toEqual(['worker_gate']);
      expect([gate.completion_callback_url, ...gate.completion_callback_fallback_urls]).toEqual([
        'http://control-plane-1:8787/control/api/worker-callback',
        'http://control-plane-2:8797/control/api/worker-callback',
      ]);
      expect(gate.completion_callback_token).toBe(controlPlane.completion_callback_token);
      expect(gate.worker_wake_gate_bearer_token).toBe(controlPlane.worker_targets['gate-1']!.bearer_token);
      // The worker host never holds the control plane's token.
      expect(gate.control_api_bearer_token).not.toBe(controlPlane.control_api_bearer_token);
      expect(compose.services['worker-gate']!.ports).toEqual([`127.0.0.1:${gate.listen_port}:${gate.listen_port}`]);
      // The image carries the simulated agent at the path the config names.
      expect(gate.dispatch_script_path).toBe('/app/worker-gate/simulated-agent.sh');
      expect(existsSync(join(REPO_ROOT, 'worker-gate/simulated-agent.sh'))).toBe(true);
    });

    it('refuses to start without the secrets', () => {
      expect(() => interpolate(compose.configs['control-plane-1-config']!.content, {})).toThrow(/RCP_CONTROL_API_TOKEN is required/);
    });
  });
});

describe('Dockerfile', () => {
  const dockerfile = read('Dockerfile');
  const stages = dockerfile.split(/^FROM /m).slice(1);
  const runtime = stages.at(-1)!;

  it('builds on Node 24 slim in every stage', () => {
    expect(dockerfile).toMatch(/^ARG NODE_IMAGE=node:24\.\d+\.\d+-slim$/m);
    for (const stage of stages) expect(stage.split('\n')[0]).toMatch(/^\$\{NODE_IMAGE\} AS [a-z-]+$/);
  });

  it('installs production dependencies only and runs as the unprivileged node user, without tsx', () => {
    expect(dockerfile).toContain('npm ci --omit=dev');
    expect(runtime.split('\n')[0]).toBe('${NODE_IMAGE} AS runtime');
    expect(runtime).toMatch(/^USER node$/m);
    const cmd = /^CMD (.*)$/m.exec(runtime)?.[1];
    expect(JSON.parse(cmd!)).toEqual(['node', '--max-semi-space-size=1', 'bin/start.js']);
    expect(runtime).not.toMatch(/tsx/);
    // So `npm ci --omit=dev` leaves the loader out of the image altogether.
    const packageJson = JSON.parse(read('package.json')) as { dependencies: Record<string, string>; devDependencies: Record<string, string> };
    expect(Object.keys(packageJson.dependencies)).not.toContain('tsx');
    expect(Object.keys(packageJson.devDependencies)).toContain('tsx');
  });

  it('leaves secrets and local state out of the build context', () => {
    const ignored = read('.dockerignore').split('\n');
    for (const entry of ['.env', '.env.*', 'state', 'node_modules', '.git']) expect(ignored).toContain(entry);
  });
});
