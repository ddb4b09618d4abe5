import { spawn, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { Client, Connection } from '@temporalio/client';
import { NativeConnection, Worker } from '@temporalio/worker';
import { paperActivityQueue } from '../../workflows/papers/paper-messages.ts';
import type { activityByName } from '../fixtures/workflows/activity-by-name.ts';
import { CYCLE_POLICY_DEFAULTS } from '../../capabilities/automation/domain/cycle-policy.ts';
import { RESEARCH_CYCLE_WORKFLOW_TYPE, type CycleReport } from '../../workflows/automation/cycle-messages.ts';
import { cycleStartOptions } from '../../workflows/start-options.ts';
import { reserveControlPlane, writeControlPlaneConfig, type ControlPlaneFixture } from '../support/control-plane.ts';
import { createTestDatabase, type TestDatabase } from '../support/database.ts';
import { waitUntil } from '../support/gate.ts';
import { START_COMMAND_ARGS } from '../support/process.ts';

// expected duration: ~15 s (one worker-only process, one cycle)

/**
 * The `temporal_worker` role (docs/operations.md#running-on-several-machines): a process with the Temporal workers and no HTTP
 * server, on the control planes' Postgres and Temporal. Nothing else polls this test's task queue, so the cycle it
 * completes was run by that process alone.
 */

let database: TestDatabase;
let fixture: ControlPlaneFixture;
let worker: ChildProcess;
let output = '';

beforeAll(async () => {
  database = await createTestDatabase();
  fixture = await writeControlPlaneConfig(await reserveControlPlane(), { databaseUrl: database.url, overrides: { roles: ['temporal_worker'] } });
  worker = spawn(process.execPath, [...START_COMMAND_ARGS], {
    env: { ...process.env, SVC_CONFIG: fixture.configPath, SVC_CONTROL_PLANE_CONFIG: '', TEMPORAL_ADDRESS: '', LOG_LEVEL: 'warn' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  worker.stdout!.on('data', (chunk: Buffer) => (output += chunk.toString()));
  worker.stderr!.on('data', (chunk: Buffer) => (output += chunk.toString()));
  await waitUntil('the worker-only process to be ready', () => {
    if (worker.exitCode !== null) throw new Error(`it exited:\n${output}`);
    return output.includes('Temporal worker is running') ? true : undefined;
  }, 90_000);
}, 120_000);

afterAll(async () => {
  if (worker && worker.exitCode === null) {
    const exited = new Promise((resolve) => worker.once('exit', resolve));
    worker.kill('SIGTERM');
    await exited;
  }
  await database?.drop();
});

describe('a temporal_worker process', () => {
  it("registers each task queue's activities on that queue's worker alone", { timeout: 60_000 }, async () => {
    // A workflow of this test's, on a queue of its own, schedules activities by name on the process's two queues.
    const address = inject('temporalAddress');
    const workerConnection = await NativeConnection.connect({ address });
    const connection = await Connection.connect({ address });
    const probeQueue = `${fixture.taskQueue}-probe`;
    try {
      const probe = await Worker.create({ connection: workerConnection, taskQueue: probeQueue, workflowsPath: fileURLToPath(new URL('../fixtures/workflows/activity-by-name.ts', import.meta.url)) });
      const client = new Client({ connection });
      const paper = { paper_id: 'no-such-paper', project_id: 'no-such-project', run_id: 'no-such-run' };
      const outcome = (taskQueue: string, name: string, args: unknown[]) =>
        client.workflow.execute<typeof activityByName>('activityByName', { taskQueue: probeQueue, workflowId: `activity-by-name:${taskQueue}:${name}:${process.pid}`, args: [taskQueue, name, args] });
      const outcomes = await probe.runUntil(
        Promise.all([
          outcome(fixture.taskQueue, 'gatherPaperEvidence', [paper]),
          outcome(paperActivityQueue(fixture.taskQueue), 'gatherPaperEvidence', [paper]),
          outcome(paperActivityQueue(fixture.taskQueue), 'selectDraftCandidates', [{ force: false, up_to: 1, exclude: [] }]),
          outcome(fixture.taskQueue, 'selectDraftCandidates', [{ force: false, up_to: 1, exclude: [] }]),
        ]),
      );
      expect(outcomes[0]).toMatch(/^NotFoundError: .*gatherPaperEvidence.* not registered/);
      // The paper queue's worker runs it (and refuses the paper it does not know).
      expect(outcomes[1]).not.toMatch(/NotFoundError/);
      expect(outcomes[2]).toMatch(/^NotFoundError: .*selectDraftCandidates.* not registered/);
      expect(outcomes[3]).toBe('completed');
    } finally {
      await connection.close();
      await workerConnection.close();
    }
  });

  it('runs workflows and their activities with no HTTP server, and exits cleanly on SIGTERM', { timeout: 60_000 }, async () => {
    expect(output).toContain('(no HTTP server)');
    expect(await fetch(fixture.url).catch(() => 'refused')).toBe('refused');
    const connection = await Connection.connect({ address: inject('temporalAddress') });
    try {
      const client = new Client({ connection });
      const policy = { ...CYCLE_POLICY_DEFAULTS, enabled: true, max_provider_requests_per_run: 0, max_promotions_per_run: 0 };
      const report = (await client.workflow.execute(RESEARCH_CYCLE_WORKFLOW_TYPE, {
        ...cycleStartOptions({ cycle_id: `worker-role-${process.pid}`, requested_by: 'worker-role-test', policy }),
        taskQueue: fixture.taskQueue,
      })) as CycleReport;
      expect(report).toMatchObject({ ok: true, action: 'research_cycle', stages: [expect.objectContaining({ name: 'stop_conditions', action: 'passed' }), ...Array(5).fill(expect.anything())] });
    } finally {
      await connection.close();
    }
    const exited = new Promise<number | null>((resolve) => worker.once('exit', (code) => resolve(code)));
    worker.kill('SIGTERM');
    expect(await exited).toBe(0);
  });
});
