import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { configFingerprint } from '../../platform/config/fingerprint.ts';
import { openStore } from '../../platform/store/open-store.ts';
import { insertProject } from '../../capabilities/runs/projects.ts';
import { insertQueueItem } from '../../capabilities/runs/queue-items.ts';
import { ConfigFileSchema, type Config } from '../../platform/config/schema.ts';
import { controlClient, reserveControlPlane, startControlPlaneProcess, writeControlPlaneConfig, type ControlPlaneProcess } from '../support/control-plane.ts';
import { createTestDatabase, type TestDatabase } from '../support/database.ts';
import { waitUntil } from '../support/gate.ts';
import { parseExposition } from '../support/prometheus.ts';

// expected duration: ~40 s (six control-plane starts)

/**
 * Control-plane replicas that share a database find each other and compare configs (platform/cluster/replicas.ts): a replica
 * started with a config that differs from the others' is seen on /control/health of every replica, in a warning at its
 * start and in /metrics, while fields each replica sets for its own machine never count as drift. A worker target added
 * one replica at a time is dispatched to only once every live replica has it.
 */

const SECRET = 'a-webhook-secret-that-must-not-leak';

function config(overrides: Record<string, unknown> = {}): Config {
  return ConfigFileSchema.parse({
    roles: ['control_plane'],
    control_api_bearer_token: 'replica-control-token-0123456789',
    completion_callback_url: 'http://127.0.0.1:9/control/api/worker-callback',
    completion_callback_token: 'replica-callback-token-0123456789',
    state_dir: '/srv/rcp/state',
    project_root: '/srv/rcp/projects',
    chat_alert_webhook_secret: SECRET,
    ...overrides,
  }) as Config;
}

describe('the config fingerprint', () => {
  it('is the same for replicas that differ only in per-replica fields, and names the cluster fields that differ', () => {
    const first = configFingerprint(config());
    const ownMachine = configFingerprint(config({ listen_port: 9901, state_dir: '/var/lib/rcp', project_root: '/data/projects', temporal_address: 'temporal.lab:7233' }));
    expect(ownMachine.fingerprint).toBe(first.fingerprint);

    const pumpOn = configFingerprint(config({ queue_pump_enabled: true }));
    expect(pumpOn.fingerprint).not.toBe(first.fingerprint);
    expect(Object.keys(pumpOn.fields).filter((name) => pumpOn.fields[name] !== first.fields[name])).toEqual(['queue_pump_enabled']);
  });

  it('tells secrets apart without carrying them: another token is drift, and no digest is the secret\'s plain hash', async () => {
    const first = configFingerprint(config());
    const otherSecret = configFingerprint(config({ chat_alert_webhook_secret: `${SECRET}-2` }));
    expect(Object.keys(otherSecret.fields).filter((name) => otherSecret.fields[name] !== first.fields[name])).toEqual(['chat_alert_webhook_secret']);
    const { createHash } = await import('node:crypto');
    const plain = createHash('sha256').update(JSON.stringify(SECRET)).digest('hex');
    expect(JSON.stringify(first)).not.toContain(SECRET);
    expect(Object.values(first.fields).some((digest) => plain.startsWith(digest))).toBe(false);
  });
});

describe('two replicas on one database', () => {
  let database: TestDatabase;
  const replicas: ControlPlaneProcess[] = [];
  const taskQueue = `replicas-test-${Date.now()}`;

  beforeAll(async () => {
    database = await createTestDatabase();
  });

  afterAll(async () => {
    for (const replica of replicas) await replica.kill('SIGTERM');
    await database?.drop();
  });

  async function startReplica(overrides: Record<string, unknown>) {
    const reserved = await reserveControlPlane();
    // One cluster: one task queue, one database.
    const fixture = await writeControlPlaneConfig({ ...reserved, taskQueue }, { databaseUrl: database.url, overrides });
    const process = await startControlPlaneProcess(fixture);
    replicas.push(process);
    return { process, api: controlClient(fixture.url), url: fixture.url };
  }

  it('see each other, report a differing config on both, in a warning at start and in /metrics, and forget a replica that stopped', { timeout: 180_000 }, async () => {
    const first = await startReplica({});
    const second = await startReplica({ queue_alert_hang_after_sec: 7200, max_wait_after_idle_sec: 900 });

    expect(second.process.output()).toMatch(/the control-plane replicas' configs differ \(max_wait_after_idle_sec, queue_alert_hang_after_sec\)/);
    for (const replica of [first, second]) {
      const health = await replica.api('GET', '/control/health');
      expect(health.status).toBe(200);
      expect(health.body.config).toMatchObject({ drift: true, differing_fields: ['max_wait_after_idle_sec', 'queue_alert_hang_after_sec'] });
      expect(health.body.config.replicas).toHaveLength(2);
    }
    const scraped = await Promise.all([first, second].map(async (replica) => {
      const response = await fetch(`${replica.url}/metrics`, { headers: { authorization: 'Bearer gate-test-control-token-0123456789' } });
      return parseExposition(await response.text()).filter((sample) => sample.name === 'rcp_config_info').map((sample) => sample.labels.fingerprint);
    }));
    expect(scraped.map((fingerprints) => fingerprints.length)).toEqual([1, 1]);
    expect(scraped[0]![0]).not.toBe(scraped[1]![0]);

    await second.process.kill('SIGTERM');
    await waitUntil('the first replica to see the cluster agree again', async () => {
      const health = await first.api('GET', '/control/health');
      return health.body.config?.drift === false && health.body.config.replicas.length === 1 ? health.body.config : undefined;
    }, 15_000, 250);

    const third = await startReplica({ listen_host: '127.0.0.1' });
    const agreed = await third.api('GET', '/control/health');
    expect(agreed.body.config).toMatchObject({ drift: false, differing_fields: [] });
    expect(agreed.body.config.replicas).toHaveLength(2);
    expect(third.process.output()).not.toMatch(/configs differ/);
  });
  it('dispatch to a worker target only once every live replica has configured it (a rolling change), answering noop meanwhile', { timeout: 180_000 }, async () => {
    for (const replica of replicas.splice(0)) await replica.kill('SIGTERM');
    const store = await openStore({ backend: 'pg', pgDatabaseUrl: database.url });
    try {
      await store.transaction(async (tx) => {
        await insertProject(tx, { project_id: 'rolling-lane', project_name: 'Rolling lane', project_dir: 'rolling-lane', workload_class: 'unknown', machine_target: 'gpu-new' });
        await insertQueueItem(tx, { project_id: 'rolling-lane', project_name: 'Rolling lane', machine_target: 'gpu-new', workload_class: 'unknown' });
      });
    } finally {
      await store.close();
    }
    // No gate listens there: a dry run only names the target.
    const gpuNew = { 'gpu-new': { wake_gate_url: 'http://127.0.0.1:9', bearer_token: 'rolling-gate-token-0123456789', role: 'gpu_worker' } };
    const updated = await startReplica({ worker_targets: gpuNew });
    const notYet = await startReplica({});

    const held = await updated.api('POST', '/control/dispatch-next', { dry_run: true, requested_by: 'replicas-test' });
    expect(held.status).toBe(200);
    expect(held.body).toMatchObject({ action: 'noop', candidate: null });
    expect(held.body.reason).toContain('not every control-plane replica has configured gpu-new yet');
    const live = await updated.api('POST', '/control/dispatch-next', { dry_run: false, requested_by: 'replicas-test' });
    expect(live.status).toBe(200);
    expect(live.body).toMatchObject({ action: 'noop' });

    await notYet.process.kill('SIGTERM');
    await startReplica({ worker_targets: gpuNew });
    // The stopped replica left the cluster as it stopped (one that was killed would count for 30 s more).
    const ready = await waitUntil('the lane to be dispatched to', async () => {
      const answer = await updated.api('POST', '/control/dispatch-next', { dry_run: true, requested_by: 'replicas-test' });
      return answer.body.action === 'noop' ? undefined : answer;
    }, 15_000, 250);
    expect(ready.body).toMatchObject({ action: 'dry_run_dispatch', candidate: { project_id: 'rolling-lane' }, dispatch_route: { machine_target: 'gpu-new' } });
  });
});