import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { planTemporalConnection, TemporalSettingError, type TemporalConnectionFields } from '../../platform/temporal/temporal-connection.ts';
import { LocalCluster } from '../../scripts/cluster/local-cluster.ts';
import { temporalTlsFields, type TemporalTlsFiles } from '../../scripts/cluster/topology.ts';
import { makeCa, makeLeaf, type CertificatePair } from '../support/certificates.ts';
import {
  controlClient,
  failedControlPlaneStart,
  reserveControlPlane,
  startControlPlaneProcess,
  startupFailureLine,
  writeControlPlaneConfig,
  type ControlPlaneFixture,
} from '../support/control-plane.ts';
import { createTestDatabase, TEST_TEMPORAL_SQL_CONNECTIONS, type TestDatabase } from '../support/database.ts';
import { waitUntil } from '../support/gate.ts';
import { clusterTestPorts } from '../support/ports.ts';

// expected duration: ~45 s (the real Temporal server set up on Postgres, five control-plane starts)

/**
 * A secure connection to a remote Temporal (docs/getting-started.md#connecting-to-a-temporal-of-your-own): the real Temporal server (v1.31.0, the fleet's build)
 * serving mTLS with certificates this test makes, and control-plane processes reaching it with the temporal_tls_*
 * fields or the standard TEMPORAL_* environment variables. A wrong or missing certificate fails the start with one
 * line naming the setting.
 */

const REPO_ROOT = fileURLToPath(new URL('../..', import.meta.url));

let dir: string;
let cluster: LocalCluster;
let database: TestDatabase;
let files: TemporalTlsFiles;
let rogueClient: CertificatePair;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'rcp-temporal-tls-'));
  const ca = makeCa(dir, 'ca');
  const server = makeLeaf(dir, 'server', ca, 'server');
  const client = makeLeaf(dir, 'client', ca, 'client');
  // A client certificate the server has never heard of: signed by another CA.
  rogueClient = makeLeaf(dir, 'rogue-client', makeCa(dir, 'rogue-ca'), 'client');
  files = { ca: ca.cert, serverCert: server.cert, serverKey: server.key, clientCert: client.cert, clientKey: client.key };
  cluster = await LocalCluster.startTemporalOnly(
    {
      dir: join(dir, 'cluster'),
      repoRoot: REPO_ROOT,
      gates: 0,
      lanesPerGate: 1,
      postgres: { host: '127.0.0.1', port: 5432, user: 'postgres' },
      naming: { prefix: 'rtls', subnet: '10.235.0', database: `rcp_tls_${process.pid}`, taskQueue: `rcp-tls-${process.pid}` },
      ports: await clusterTestPorts(),
      gate: { dispatchScript: '', env: {}, overrides: {} },
      replicaOverrides: {},
      temporalTls: files,
      temporalSqlConnections: TEST_TEMPORAL_SQL_CONNECTIONS,
    },
    () => undefined,
  );
  database = await createTestDatabase();
}, 240_000);

afterAll(async () => {
  await cluster?.stop();
  await cluster?.dropDatabases().catch(() => undefined);
  await database?.drop();
  if (dir) await rm(dir, { recursive: true, force: true });
}, 120_000);

/** A control plane's config on the test database, reaching the mTLS server with `tls` fields. */
async function controlPlane(tls: Record<string, string>): Promise<ControlPlaneFixture> {
  const reserved = await reserveControlPlane();
  return writeControlPlaneConfig(reserved, {
    databaseUrl: database.url,
    overrides: { temporal_address: cluster.topology.temporal.address, temporal_task_queue: reserved.taskQueue, ...tls },
  });
}


describe('a control plane on a Temporal that requires mTLS', () => {
  it('connects with the temporal_tls_* fields, and one connection serves its client and its worker', { timeout: 90_000 }, async () => {
    const fixture = await controlPlane(temporalTlsFields(files));
    const process = await startControlPlaneProcess(fixture);
    try {
      expect(process.output()).toMatch(/Temporal worker polling task queue .* \(mTLS \(server CA from temporal_tls_server_ca_cert_path\)\)/);
      // A live cycle: the HTTP call starts its workflow through the client, the worker runs it, the call reads its result.
      const api = controlClient(fixture.url);
      const cycle = await api('POST', '/control/api/research/run-cycle', {
        requested_by: 'tls-test',
        dry_run: false,
        enabled: true,
        idempotency_key: 'tls-cycle',
        max_provider_requests_per_run: 0,
        max_promotions_per_run: 0,
      });
      expect(cycle.status, JSON.stringify(cycle.body)).toBe(200);
      const report = await waitUntil('the cycle to finish', async () => {
        const answer = await api('GET', '/control/api/research/cycles/tls-cycle');
        return answer.body.action === 'research_cycle_running' ? undefined : answer.body;
      }, 30_000, 250);
      expect(report).toMatchObject({ ok: true, action: 'research_cycle', workflow_id: 'research-cycle:tls-cycle' });
      expect((await api('GET', '/healthz')).body).toMatchObject({ ok: true });
    } finally {
      await process.kill('SIGTERM');
    }
  });

  it('connects with the standard TEMPORAL_TLS_* environment variables alone', { timeout: 90_000 }, async () => {
    const fixture = await controlPlane({});
    const process = await startControlPlaneProcess(fixture, {
      TEMPORAL_TLS_SERVER_CA_CERT_PATH: files.ca,
      TEMPORAL_TLS_CLIENT_CERT_PATH: files.clientCert,
      TEMPORAL_TLS_CLIENT_KEY_PATH: files.clientKey,
      TEMPORAL_TLS_SERVER_NAME: 'localhost',
    });
    try {
      expect(process.output()).toMatch(/\(mTLS \(server CA from TEMPORAL_TLS_SERVER_CA_CERT_PATH\)\)/);
    } finally {
      await process.kill('SIGTERM');
    }
  });

  it('refuses to start with a client certificate the server does not trust, naming the setting', { timeout: 90_000 }, async () => {
    const fixture = await controlPlane({ ...temporalTlsFields(files), temporal_tls_client_cert_path: rogueClient.cert, temporal_tls_client_key_path: rogueClient.key });
    const { code, stderr } = await failedControlPlaneStart(fixture);
    expect(code).toBe(1);
    expect(startupFailureLine(stderr)).toMatch(/^research-control-plane: start-up failed: temporal_tls_client_cert_path: the server refused this client's certificate/);
  });

  it('names the environment variable when it is the one pointing at the wrong certificate', { timeout: 90_000 }, async () => {
    const fixture = await controlPlane(temporalTlsFields(files));
    const { code, stderr } = await failedControlPlaneStart(fixture, { TEMPORAL_TLS_CLIENT_CERT_PATH: rogueClient.cert, TEMPORAL_TLS_CLIENT_KEY_PATH: rogueClient.key });
    expect(code).toBe(1);
    expect(startupFailureLine(stderr)).toMatch(/start-up failed: TEMPORAL_TLS_CLIENT_CERT_PATH: the server refused this client's certificate/);
  });

  it('refuses to start without the server CA, or with a key file that is not there, naming the setting', { timeout: 90_000 }, async () => {
    const { temporal_tls_server_ca_cert_path: _ca, ...withoutCa } = temporalTlsFields(files);
    const untrusted = await failedControlPlaneStart(await controlPlane(withoutCa));
    expect(untrusted.code).toBe(1);
    expect(startupFailureLine(untrusted.stderr)).toMatch(/start-up failed: temporal_tls_server_ca_cert_path: the server's certificate is not trusted/);

    const missingKey = await failedControlPlaneStart(await controlPlane({ ...temporalTlsFields(files), temporal_tls_client_key_path: join(dir, 'no-such.key') }));
    expect(missingKey.code).toBe(1);
    expect(startupFailureLine(missingKey.stderr)).toBe(`research-control-plane: start-up failed: temporal_tls_client_key_path: cannot read ${join(dir, 'no-such.key')}: ENOENT`);
  });
});

describe('the Temporal connection settings', () => {
  const fields: TemporalConnectionFields = {
    temporal_address: 'temporal.lab:7233',
    temporal_namespace: 'lab',
    temporal_tls: false,
    temporal_tls_server_ca_cert_path: '',
    temporal_tls_client_cert_path: '',
    temporal_tls_client_key_path: '',
    temporal_tls_server_name: '',
    temporal_api_key: '',
  };

  it('is plaintext on the fields alone; TEMPORAL_* variables override them; an API key turns TLS on', () => {
    expect(planTemporalConnection(fields, {})).toMatchObject({ address: 'temporal.lab:7233', namespace: 'lab', options: {}, security: 'plaintext' });
    const fromEnv = planTemporalConnection(fields, { TEMPORAL_ADDRESS: 'other:7233', TEMPORAL_NAMESPACE: 'prod', TEMPORAL_API_KEY: 'key-from-env' });
    expect(fromEnv).toMatchObject({ address: 'other:7233', namespace: 'prod', options: { tls: {}, apiKey: 'key-from-env' }, security: 'TLS, with an API key' });
    expect(planTemporalConnection({ ...fields, temporal_tls: true }, { TEMPORAL_TLS: 'false' }).security).toBe('plaintext');
    // An empty variable is unset.
    expect(planTemporalConnection(fields, { TEMPORAL_ADDRESS: '' }).address).toBe('temporal.lab:7233');
    expect(planTemporalConnection({ ...fields, temporal_address: '' }, {}).security).toBe('embedded dev server');
  });

  it('refuses a client certificate without its key, or a key of another certificate, naming the settings', () => {
    expect(() => planTemporalConnection({ ...fields, temporal_tls_client_cert_path: files.clientCert }, {})).toThrow(
      new TemporalSettingError('temporal_tls_client_key_path: is required with temporal_tls_client_cert_path (a client certificate needs its key)'),
    );
    expect(() => planTemporalConnection({ ...fields, temporal_tls_client_cert_path: files.clientCert, temporal_tls_client_key_path: rogueClient.key }, {})).toThrow(
      'temporal_tls_client_key_path: is not the key of the certificate in temporal_tls_client_cert_path',
    );
    expect(() => planTemporalConnection({ ...fields, temporal_tls_server_ca_cert_path: files.serverKey }, {})).toThrow(/^temporal_tls_server_ca_cert_path: .* is not a PEM certificate/);
  });
});
