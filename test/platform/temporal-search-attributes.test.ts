// expected duration: ~20 s (two control-plane starts that stop at Temporal)
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { status } from '@grpc/grpc-js';
import { Connection } from '@temporalio/client';
import { msToTs } from '@temporalio/common/lib/time.js';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { SEARCH_ATTRIBUTES } from '../../workflows/runs/run-messages.ts';
import { failedControlPlaneStart, reserveControlPlane, startupFailureLine, writeControlPlaneConfig, type ControlPlaneFixture } from '../support/control-plane.ts';
import { createTestDatabase, type TestDatabase } from '../support/database.ts';
import { waitUntil } from '../support/gate.ts';
import { startRefusingProxy, type RefusingProxy } from '../support/grpc-refusing-proxy.ts';
import { START_COMMAND_ARGS } from '../support/process.ts';

/**
 * A Temporal that will not let the control plane register its search attributes
 * (docs/getting-started.md#connecting-to-a-temporal-of-your-own), as Temporal Cloud's operator API answers: the real dev server, behind a gRPC peer that refuses
 * AddSearchAttributes with PERMISSION_DENIED, on a namespace of this test that has none of them yet. The start fails
 * with one line naming the missing attributes and the commands that add them, not "could not connect".
 */

const ADD_SEARCH_ATTRIBUTES = '/temporal.api.operatorservice.v1.OperatorService/AddSearchAttributes';
const LIST_SEARCH_ATTRIBUTES = '/temporal.api.operatorservice.v1.OperatorService/ListSearchAttributes';
const NAMESPACE = `sa-refused-${randomBytes(4).toString('hex')}`;

let proxy: RefusingProxy;
/** Refuses even to list the attributes. */
let silentProxy: RefusingProxy;
let database: TestDatabase;

beforeAll(async () => {
  const connection = await Connection.connect({ address: inject('temporalAddress') });
  try {
    await connection.workflowService.registerNamespace({ namespace: NAMESPACE, workflowExecutionRetentionPeriod: msToTs('1 day') });
    await waitUntil('the new namespace to be served', () => connection.operatorService.listSearchAttributes({ namespace: NAMESPACE }).then(() => true, () => undefined), 30_000, 500);
  } finally {
    await connection.close();
  }
  proxy = await startRefusingProxy(inject('temporalAddress'), [{ path: ADD_SEARCH_ATTRIBUTES, code: status.PERMISSION_DENIED, message: 'Request unauthorized.' }]);
  silentProxy = await startRefusingProxy(inject('temporalAddress'), [{ path: LIST_SEARCH_ATTRIBUTES, code: status.PERMISSION_DENIED, message: 'Request unauthorized.' }]);
  database = await createTestDatabase();
}, 60_000);

afterAll(async () => {
  await proxy?.close();
  await silentProxy?.close();
  await database?.drop();
});

async function controlPlane(namespace: string, through: RefusingProxy = proxy): Promise<ControlPlaneFixture> {
  return writeControlPlaneConfig(await reserveControlPlane(), { databaseUrl: database.url, overrides: { temporal_address: through.address, temporal_namespace: namespace } });
}

/** Starts a control plane and answers the log line that matches `wanted` once it is written; then stops the process. */
async function logLineOfStart(fixture: ControlPlaneFixture, wanted: RegExp): Promise<string> {
  const child = spawn(process.execPath, [...START_COMMAND_ARGS], {
    env: { ...process.env, SVC_CONFIG: fixture.configPath, SVC_CONTROL_PLANE_CONFIG: '', TEMPORAL_ADDRESS: '', TEMPORAL_NAMESPACE: '', LOG_FORMAT: 'json' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  try {
    return await new Promise<string>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`no log line matching ${wanted} within 60 s:\n${output}`)), 60_000);
      const read = (chunk: Buffer) => {
        output += chunk.toString();
        const line = output.split('\n').find((each) => wanted.test(each));
        if (line) {
          clearTimeout(timer);
          resolve(line);
        }
      };
      child.stdout!.on('data', read);
      child.stderr!.on('data', read);
      child.once('exit', (code) => {
        clearTimeout(timer);
        reject(new Error(`the start ended (${code}) with no log line matching ${wanted}:\n${output}`));
      });
    });
  } finally {
    const exited = new Promise((resolve) => child.once('exit', resolve));
    if (child.exitCode === null) child.kill('SIGKILL');
    await exited;
  }
}

describe('a Temporal that refuses to register search attributes', () => {
  it('fails the start naming the missing attributes and how to add them, on Temporal Cloud and elsewhere', { timeout: 90_000 }, async () => {
    const { code, stderr } = await failedControlPlaneStart(await controlPlane(NAMESPACE));
    const line = startupFailureLine(stderr);
    expect(code).toBe(1);
    expect(proxy.refused).toEqual([ADD_SEARCH_ATTRIBUTES]);
    const names = SEARCH_ATTRIBUTES.map((attribute) => attribute.name);
    expect(line).toContain(`the Temporal namespace "${NAMESPACE}" lacks the search attributes ${names.join(', ')} (Keyword), and the server refused to add them (PERMISSION_DENIED: Request unauthorized.)`);
    expect(line).toContain(`tcld namespace search-attributes add --namespace ${NAMESPACE} ${names.map((name) => `--search-attribute ${name}=Keyword`).join(' ')}`);
    expect(line).toContain(`temporal operator search-attribute create --namespace ${NAMESPACE} ${names.map((name) => `--name ${name} --type Keyword`).join(' ')}`);
    expect(line).not.toMatch(/could not connect/);
  });

  it('warns, naming the attributes and how to add them, when the server will not even list them', { timeout: 90_000 }, async () => {
    const line = await logLineOfStart(await controlPlane(NAMESPACE, silentProxy), /would not list/);
    const names = SEARCH_ATTRIBUTES.map((attribute) => attribute.name);
    const entry = JSON.parse(line) as { level: number; msg: string };
    expect(entry.level).toBe(40);
    expect(entry.msg).toContain(`workflows need ${names.join(', ')} (Keyword)`);
    expect(entry.msg).toContain(`tcld namespace search-attributes add --namespace ${NAMESPACE}`);
    expect(silentProxy.refused).toContain(LIST_SEARCH_ATTRIBUTES);
  });
});
