import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { lanesOf, resolveLane, workerRoutingFrom } from '../../capabilities/runs/domain/worker-lanes.ts';
import type { WorkloadClass } from '../../worker-gate/contract/workload.ts';
import { nextDispatchCandidate } from '../../capabilities/runs/dispatch-candidates.ts';
import { openStore } from '../../platform/store/open-store.ts';
import { insertProject } from '../../capabilities/runs/projects.ts';
import { insertQueueItem, type QueueItemRow } from '../../capabilities/runs/queue-items.ts';
import type { Store } from '../../platform/store/store.ts';
import { createTestDatabase, type TestDatabase } from '../support/database.ts';

const target = (port: number) => ({ wake_gate_url: `http://127.0.0.1:${port}`, bearer_token: 'gate-token-0123456789abcdef', role: 'gpu_worker' as const });
const routing = workerRoutingFrom({
  worker_wake_gate_url: 'http://127.0.0.1:9000',
  worker_wake_gate_bearer_token: 'gate-token-0123456789abcdef',
  worker_targets: { laneA: target(9001), laneB: { ...target(9002), slots: 2 }, laneC: target(9003) },
  workload_machine_targets: { cpu_only: 'laneC', training: 'laneA' },
});
const TARGETS = [null, null, 'laneA', 'laneB', 'laneC', 'default', 'retired-box'] as const;
const CLASSES: WorkloadClass[] = ['unknown', 'cpu_only', 'training', 'inference_eval'];
/** laneB holds two runs at once: its second slot is the lane laneB/2. */
const LANES = ['default', 'laneA', 'laneB', 'laneB/2', 'laneC'];

let database: TestDatabase;
let store: Store;
beforeAll(async () => {
  database = await createTestDatabase();
  store = await openStore({ backend: 'pg', pgDatabaseUrl: database.url });
});
afterAll(async () => {
  await store.close();
  await database.drop();
});

interface Row {
  machine_target: string | null;
  workload_class: WorkloadClass;
  dispatch_priority: number;
  manual_review_required: boolean;
}

async function seed(rows: Row[], busy: string[]): Promise<void> {
  await store.query('DELETE FROM queue_items');
  await store.query('DELETE FROM projects');
  await store.transaction(async (tx) => {
    for (const [index, row] of rows.entries()) {
      const id = `p-${String(index).padStart(4, '0')}`;
      await insertProject(tx, { project_id: id, project_name: id, project_dir: id });
      await insertQueueItem(tx, { project_id: id, project_name: id, ...row });
    }
    for (const lane of busy) {
      const id = `busy-${lane.toLowerCase().replace('/', '-')}`;
      await insertProject(tx, { project_id: id, project_name: id, project_dir: id });
      await insertQueueItem(tx, { project_id: id, project_name: id, status: 'running', lane });
    }
  });
}

/**
 * The dispatch order rule (docs/queue.md#the-queue) read straight: every eligible row, in dispatch order, first whose
 * target has an idle lane, on the first idle lane of it.
 */
async function reference(busy: string[]): Promise<{ project_id: string; lane: string } | null> {
  const rows = await store.query<QueueItemRow>(
    `SELECT project_id, machine_target, workload_class FROM queue_items WHERE status = 'queued' AND NOT manual_review_required
      ORDER BY dispatch_priority, selection_rank, updated_at, project_id`,
  );
  for (const row of rows.rows) {
    const lane = resolveLane(row, routing);
    const idle = lane.ok ? lanesOf(routing, lane.target.name).find((slot) => !busy.includes(slot.lane)) : undefined;
    if (idle) return { project_id: row.project_id, lane: idle.lane };
  }
  return null;
}

const rowArbitrary = fc.record({
  machine_target: fc.constantFrom(...TARGETS),
  workload_class: fc.constantFrom(...CLASSES),
  dispatch_priority: fc.integer({ min: 1, max: 5 }),
  manual_review_required: fc.integer({ min: 0, max: 4 }).map((n) => n === 0),
});

describe('the next dispatch candidate', () => {
  it('is the first eligible row whose lane is idle, on short queues and past a long head of busy-lane rows', async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(rowArbitrary, { minLength: 0, maxLength: 90 }), fc.subarray(LANES), async (rows, busy) => {
        await seed(rows, busy);
        const found = await nextDispatchCandidate(store, routing);
        expect(found && { project_id: found.item.project_id, lane: found.lane }).toEqual(await reference(busy));
      }),
      { numRuns: 40, seed: 20261122 },
    );
  }, 120_000);

  it('reaches an idle lane behind 40 higher-priority rows waiting for a busy one', async () => {
    const waiting = Array.from({ length: 40 }, () => ({ machine_target: 'laneA', workload_class: 'unknown' as const, dispatch_priority: 1, manual_review_required: false }));
    await seed([...waiting, { machine_target: null, workload_class: 'cpu_only', dispatch_priority: 9, manual_review_required: false }], ['laneA']);
    expect(await nextDispatchCandidate(store, routing)).toMatchObject({ item: { project_id: 'p-0040' }, lane: 'laneC' });
    await seed(waiting, ['laneA']);
    expect(await nextDispatchCandidate(store, routing)).toBeNull();
  });

  it('fills every slot of a target before its items wait, the first idle slot first', async () => {
    const rows = Array.from({ length: 3 }, () => ({ machine_target: 'laneB', workload_class: 'unknown' as const, dispatch_priority: 1, manual_review_required: false }));
    await seed(rows, []);
    expect(await nextDispatchCandidate(store, routing)).toMatchObject({ item: { project_id: 'p-0000' }, lane: 'laneB' });
    await seed(rows, ['laneB']);
    expect(await nextDispatchCandidate(store, routing)).toMatchObject({ item: { project_id: 'p-0000' }, lane: 'laneB/2' });
    await seed(rows, ['laneB', 'laneB/2']);
    expect(await nextDispatchCandidate(store, routing)).toBeNull();
  });
});
