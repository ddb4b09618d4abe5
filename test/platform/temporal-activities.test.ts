import { AGENT_DEFAULTS } from '../../capabilities/runs/dispatch-settings.ts';
import { fileURLToPath } from 'node:url';
import { Client, Connection } from '@temporalio/client';
import { NativeConnection, Worker } from '@temporalio/worker';
import { afterAll, beforeAll, describe, expect, it, inject } from 'vitest';
import { createActivities } from '../../activities/index.ts';
import { deterministicPaperSettings } from '../support/paper-settings.ts';
import { workerRoutingFrom } from '../../capabilities/runs/domain/worker-lanes.ts';
import { listAuditEventsPage } from '../../platform/store/audit-events.ts';
import { openStore } from '../../platform/store/open-store.ts';
import type { Store } from '../../platform/store/store.ts';
import { createTestDatabase, type TestDatabase } from '../support/database.ts';
import { quietTemporalLogs } from '../support/temporal.ts';
import type { recordTwice } from '../fixtures/workflows/record-audit.ts';

const WORKFLOWS = fileURLToPath(new URL('../fixtures/workflows/record-audit.ts', import.meta.url));

let database: TestDatabase;
let store: Store;

beforeAll(async () => {
  quietTemporalLogs();
  database = await createTestDatabase();
  store = await openStore({ backend: 'pg', pgDatabaseUrl: database.url });
});
afterAll(async () => {
  await store.close();
  await database.drop();
});

describe('audit activities on the real Temporal dev server', () => {
  it('record an event once per business key, however often the activity runs', async () => {
    const address = inject('temporalAddress');
    const taskQueue = `audit-activities-${process.pid}`;
    const workerConnection = await NativeConnection.connect({ address });
    const clientConnection = await Connection.connect({ address });
    try {
      const worker = await Worker.create({
        connection: workerConnection,
        taskQueue,
        workflowsPath: WORKFLOWS,
        activities: createActivities({
          store,
          settings: {
            liveDispatchEnabled: false,
            routing: workerRoutingFrom({ worker_targets: {}, workload_machine_targets: {} }),
            completionCallbackToken: 'unused-callback-token-0123456789',
            dispatchTimeoutSec: 30,
            maxWaitAfterIdleSec: 60,
            agent: AGENT_DEFAULTS,
          },
          papers: deterministicPaperSettings(),
        }),
      });
      const client = new Client({ connection: clientConnection });
      const ids = await worker.runUntil(
        client.workflow.execute<typeof recordTwice>('recordTwice', {
          taskQueue,
          workflowId: `audit-test:${database.name}`,
          args: ['run-via-temporal'],
        }),
      );
      expect(ids[0]).toBe(ids[1]);
      const page = await listAuditEventsPage(store, { entity_id: 'run-via-temporal' }, { offset: 0, limit: 10 });
      expect(page.total).toBe(1);
      expect(page.items[0]).toMatchObject({ event_type: 'run.created', payload: { via: 'temporal' } });
    } finally {
      await clientConnection.close();
      await workerConnection.close();
    }
  }, 60_000);
});
