import { readFile, writeFile } from 'node:fs/promises';
import { Client, Connection } from '@temporalio/client';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { queueAlertScheduleId, queuePumpScheduleId } from '../../workflows/automation/schedule-messages.ts';
import { waitUntil } from '../support/gate.ts';
import { Receiver } from '../support/receiver.ts';
import { fetchRunHistory, maybeSaveHistory } from '../support/histories.ts';
import { gateTarget, RUN_STACK_START_MS, startRunStack, type RunStack } from '../support/run-stack.ts';
import { seedCompletedRun, SlowWriter } from '../support/slow-writer.ts';
import { parentOf } from '../support/workflow-listing.ts';
import { paperIdFor } from '../../capabilities/papers/domain/paper-status.ts';

// expected duration: ~50 s (two control-plane restarts, one draft against a 12 s writer)

/**
 * The control plane's schedules on real processes: a control plane whose config turns the queue pump and a webhook
 * alert channel on with 1 s intervals, and a worker gate running the fake agent on three lanes. Nothing but the
 * schedules call dispatch-next or the queue check here.
 */

let stack: RunStack;
let connection: Connection;
let webhook: Receiver;
let writer: SlowWriter;

beforeAll(async () => {
  webhook = await Receiver.start();
  writer = await SlowWriter.start();
  stack = await startRunStack({
    defaultLane: false,
    controlPlaneOverrides: (gate) => ({
      queue_pump_enabled: true,
      queue_pump_interval_sec: 1,
      queue_pump_paper_draft_enabled: true,
      project_root: gate.projectRoot,
      ...writer.config(),
      chat_alert_webhook_enabled: true,
      chat_alert_webhook_url: webhook.url,
      queue_alert_check_interval_sec: 1,
      worker_targets: { pumpA: gateTarget(gate), pumpB: gateTarget(gate), pumpC: gateTarget(gate) },
    }),
  });
  connection = await Connection.connect({ address: inject('temporalAddress') });
}, RUN_STACK_START_MS);

afterAll(async () => {
  // The dev server outlives this file: its schedule must not keep starting ticks for a task queue nobody polls.
  for (const id of [queuePumpScheduleId(stack.cpFixture.taskQueue), queueAlertScheduleId(stack.cpFixture.taskQueue)]) {
    await new Client({ connection }).schedule.getHandle(id).delete().catch(() => undefined);
  }
  await connection?.close();
  await stack?.close();
  await webhook?.close();
  await writer?.close();
});

const queueStatus = async (projectId: string) =>
  (await stack.store.query<{ status: string }>('SELECT status FROM queue_items WHERE project_id = $1', [projectId])).rows[0]?.status;

const runOf = (projectId: string) =>
  waitUntil(`a run of ${projectId}`, async () => (await stack.store.query<{ run_id: string; requested_by: string }>('SELECT run_id, requested_by FROM runs WHERE project_id = $1', [projectId])).rows[0], 30_000, 200);

/** Three ticks at the 1 s interval. */
const SEVERAL_TICKS_MS = 3_500;
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe('the queue check schedule', () => {
  it('checks the queue on its own and posts what needs a person to the webhook', { timeout: 60_000 }, async () => {
    await stack.seed('alert-review', { projectName: 'Needs review', lane: 'pumpC', item: { status: 'needs_review' }, scenario: { scenario: 'normal' } });
    const posted = await waitUntil('a queue alert naming alert-review', () => webhook.received.find((request) => request.body.includes('"entity_id":"alert-review"')), 30_000);
    expect(JSON.parse(posted.body)).toMatchObject({ event: 'queue_alert', findings: [expect.objectContaining({ kind: 'needs_review', entity_id: 'alert-review' })] });
    // The check records itself once its sends have answered, a moment after the receiver got the post.
    const checks = await waitUntil('the check in the alerts ledger', async () => {
      const rows = await stack.store.query<{ trigger: string }>(`SELECT DISTINCT trigger FROM alert_checks`);
      return rows.rowCount ? rows.rows : undefined;
    }, 15_000);
    expect(checks).toEqual([{ trigger: 'schedule' }]);
    await stack.store.query(`UPDATE queue_items SET status = 'completed' WHERE project_id = 'alert-review'`);

    const client = new Client({ connection });
    const query = `WorkflowType = 'queueAlertWorkflow' AND TaskQueue = '${stack.cpFixture.taskQueue}' AND ExecutionStatus = 'Completed'`;
    const completed = await waitUntil('a completed scheduled check', async () => {
      for await (const info of client.workflow.list({ query })) return info.workflowId;
      return undefined;
    }, 30_000, 500);
    maybeSaveHistory('alert-check', await fetchRunHistory(completed));
  });
});

describe('the queue pump', () => {
  it('dispatches a queued item with no call, audits it, and does nothing while the queue is paused', { timeout: 90_000 }, async () => {
    await stack.seed('pumped-a', { projectName: 'Pumped A', lane: 'pumpA', scenario: { scenario: 'normal' } });
    const run = await runOf('pumped-a');
    expect(run.requested_by).toBe('queue-pump');
    // The tick audits the dispatch once dispatch-next has answered, a moment after the run row appears.
    const audit = await waitUntil('the audit event of the dispatch', async () => {
      const rows = await stack.store.query<{ actor: string; payload: { action: string; run_id: string }; entity_id: string }>(
        `SELECT actor, payload, entity_id FROM audit_events WHERE event_type = 'queue_pump.dispatch' AND payload->>'run_id' = $1`,
        [run.run_id],
      );
      return rows.rowCount ? rows.rows : undefined;
    }, 30_000);
    expect(audit).toEqual([{ actor: 'queue-pump', payload: expect.objectContaining({ action: 'dispatch_started', run_id: run.run_id }), entity_id: expect.stringMatching(/^queue-pump:/) }]);
    // The tick's workflow ID is the audit event's entity, and the run is its child.
    const tick = new Client({ connection }).workflow.getHandle(audit[0]!.entity_id);
    await tick.result();
    expect(await parentOf(`run:${run.run_id}`)).toBe(audit[0]!.entity_id);
    maybeSaveHistory('pump-dispatched.pump-child-workflows', await fetchRunHistory(audit[0]!.entity_id));

    const paused = await stack.api('POST', '/control/pause', { reason: 'pump test', paused_by: 'pump-test' });
    expect(paused.status).toBe(200);
    await stack.seed('pumped-b', { projectName: 'Pumped B', lane: 'pumpB', scenario: { scenario: 'normal' } });
    await sleep(SEVERAL_TICKS_MS);
    expect(await queueStatus('pumped-b')).toBe('queued');

    await stack.api('POST', '/control/resume', { resumed_by: 'pump-test' });
    expect((await runOf('pumped-b')).requested_by).toBe('queue-pump');
  });

  it('starts one run per tick, each with its audit event, when the control plane is SIGKILLed mid-dispatch with two idle lanes', { timeout: 120_000 }, async () => {
    // Both items wait before any tick sees them, so the tick that dispatches has two idle lanes to choose from.
    await stack.api('POST', '/control/pause', { reason: 'two idle lanes', paused_by: 'pump-test' });
    await stack.seed('pumped-d', { projectName: 'Pumped D', lane: 'pumpA', scenario: { scenario: 'slow', work_sec: 3 } });
    await stack.seed('pumped-e', { projectName: 'Pumped E', lane: 'pumpC', scenario: { scenario: 'slow', work_sec: 3 } });
    await stack.api('POST', '/control/resume', { resumed_by: 'pump-test' });
    const pumped = ['pumped-d', 'pumped-e'];
    const runsOf = async () =>
      (await stack.store.query<{ run_id: string }>(`SELECT run_id FROM runs WHERE project_id = ANY($1) ORDER BY run_id`, [pumped])).rows.map((row) => row.run_id);
    await waitUntil('the first pumped run', async () => ((await runsOf()).length > 0 ? true : undefined), 30_000, 20);
    await stack.cp.kill('SIGKILL');
    await stack.restartControlPlane();

    const runs = await waitUntil('a run of each item', async () => {
      const found = await runsOf();
      return found.length >= 2 ? found : undefined;
    }, 60_000, 200);
    expect(runs).toHaveLength(2);
    const ticks: string[] = [];
    for (const runId of runs) {
      const tick = await parentOf(`run:${runId}`);
      expect(tick).toMatch(/^queue-pump:/);
      ticks.push(tick!);
      const audit = await waitUntil(`the audit event of the tick that started ${runId}`, async () => {
        const rows = await stack.store.query<{ payload: { action: string; run_id: string } }>(
          `SELECT payload FROM audit_events WHERE event_type = 'queue_pump.dispatch' AND entity_id = $1`,
          [tick],
        );
        return rows.rowCount ? rows.rows : undefined;
      }, 30_000);
      expect(audit.map((row) => row.payload)).toEqual([expect.objectContaining({ action: 'dispatch_started', run_id: runId })]);
    }
    expect(new Set(ticks).size).toBe(2);
  });

  it('keeps dispatching to idle lanes while the draft-next it started waits on a slow writer', { timeout: 120_000 }, async () => {
    // Longer than a pump tick's dispatch takes on a loaded machine: a whole CI run once saw it outlast 12 s.
    writer.delayMs = 30_000;
    const { runId } = await seedCompletedRun(stack, 'pump-paper');
    const paperId = paperIdFor('pump-paper', runId);
    await waitUntil('the writer to be asked', () => (writer.writing > 0 ? true : undefined), 30_000, 100);

    await stack.seed('pumped-f', { projectName: 'Pumped F', lane: 'pumpB', scenario: { scenario: 'normal' } });
    expect((await runOf('pumped-f')).requested_by).toBe('queue-pump');
    // Dispatched while the draft was still being written.
    expect(writer.writing).toBe(1);
    const draftNext = await new Client({ connection }).workflow.getHandle(`paper-draft-next:queue-pump:${stack.cpFixture.taskQueue}`).describe();
    expect(draftNext.status.name).toBe('RUNNING');
    expect(draftNext.parentExecution?.workflowId).toMatch(/^queue-pump:/);

    await waitUntil('the paper to be drafted', async () => {
      const rows = await stack.store.query<{ paper_status: string }>('SELECT paper_status FROM papers WHERE paper_id = $1', [paperId]);
      return rows.rows[0]?.paper_status === 'draft_review' ? true : undefined;
      // The writer answers 30 s after it was asked; what follows it (the draft's checks and ledger writes) took more
      // than the rest of a 30 s wait on a loaded CI pass.
    }, 60_000, 200);
    writer.delayMs = 0;
  });

  it('gives back, on a tick, a paper whose draft workflow was terminated mid-write, and drafts it again', { timeout: 120_000 }, async () => {
    writer.delayMs = 30_000;
    const requestsBefore = writer.requests;
    const { runId } = await seedCompletedRun(stack, 'pump-swept');
    const paperId = paperIdFor('pump-swept', runId);
    const paperStatus = async () => (await stack.store.query<{ paper_status: string }>('SELECT paper_status FROM papers WHERE paper_id = $1', [paperId])).rows[0]?.paper_status;
    await waitUntil('the writer to be asked', () => (writer.requests > requestsBefore ? true : undefined), 30_000, 100);
    expect(await paperStatus()).toBe('draft_generating');
    writer.delayMs = 0;
    // Terminated, the workflow runs no more code: only the sweep gives the paper back.
    await new Client({ connection }).workflow.getHandle(`paper:${paperId}`).terminate('the sweep test');

    const swept = await waitUntil('the tick that swept the paper', async () => {
      const rows = await stack.store.query<{ entity_id: string; payload: Record<string, unknown> }>(
        `SELECT entity_id, payload FROM audit_events WHERE event_type = 'queue_pump.paper_sweep' AND payload->'papers' @> $1::jsonb`,
        [JSON.stringify([{ paper_id: paperId }])],
      );
      return rows.rows[0];
    }, 15_000, 100);
    expect(swept.payload).toMatchObject({ action: 'swept', papers: [{ paper_id: paperId, workflow_id: `paper:${paperId}`, workflow_status: 'terminated' }] });
    const failed = await stack.store.query<{ payload: Record<string, unknown> }>(`SELECT payload FROM audit_events WHERE entity_id = $1 AND event_type = 'paper.draft_failed'`, [paperId]);
    expect(failed.rows).toEqual([{ payload: expect.objectContaining({ from: 'draft_generating', to: 'eligible', error: `its workflow paper:${paperId} closed (terminated) without finishing the draft` }) }]);

    await waitUntil('the paper to be drafted again', async () => ((await paperStatus()) === 'draft_review' ? true : undefined), 30_000, 200);

    // The tick that swept also started the draft-next, whose id names the task queue, which a replay renames: the
    // fixture is a later tick that started nothing, and records the same commands for its sweep.
    const client = new Client({ connection });
    const query = `WorkflowType = 'queuePumpWorkflow' AND TaskQueue = '${stack.cpFixture.taskQueue}' AND ExecutionStatus = 'Completed' AND StartTime > '${new Date().toISOString()}'`;
    const idleTick = await waitUntil('a completed tick that started no child', async () => {
      for await (const info of client.workflow.list({ query })) {
        const history = await fetchRunHistory(info.workflowId);
        if (!history.events?.some((event) => event.startChildWorkflowExecutionInitiatedEventAttributes)) return history;
      }
      return undefined;
    }, 30_000, 500);
    maybeSaveHistory('pump-idle.pump-paper-step-sweep', idleTick);
  });

  it('gives back, on a tick, a paper in draft_generating that no step holds, to human review', { timeout: 60_000 }, async () => {
    // A paper put in draft_generating outside a drafting step (no started event): no workflow will ever give it back.
    const runId = 'pump-unheld-20261122T120000Z';
    const paperId = paperIdFor('pump-unheld', runId);
    await stack.store.transaction(async (tx) => {
      await tx.query(`INSERT INTO projects (project_id, project_name, project_dir, workload_class) VALUES ('pump-unheld', 'pump-unheld', 'pump-unheld', 'unknown')`);
      await tx.query(
        `INSERT INTO runs (run_id, project_id, workflow_id, state, lane, wake_gate_url, workload_class, requested_by, finished_at)
         VALUES ($1, 'pump-unheld', $2, 'reconciled', 'default', 'http://127.0.0.1:9', 'unknown', 'test', now())`,
        [runId, `run:${runId}`],
      );
      await tx.query(`INSERT INTO papers (paper_id, project_id, run_id, paper_status) VALUES ($1, 'pump-unheld', $2, 'draft_generating')`, [paperId, runId]);
    });

    const swept = await waitUntil('the tick that swept the paper', async () => {
      const rows = await stack.store.query<{ payload: Record<string, unknown> }>(
        `SELECT payload FROM audit_events WHERE event_type = 'queue_pump.paper_sweep' AND payload->'papers' @> $1::jsonb`,
        [JSON.stringify([{ paper_id: paperId }])],
      );
      return rows.rows[0];
    }, 15_000, 100);
    expect(swept.payload).toMatchObject({ action: 'swept', papers: [{ paper_id: paperId, workflow_id: null, workflow_status: null }] });
    const paper = await stack.store.query<{ paper_status: string }>('SELECT paper_status FROM papers WHERE paper_id = $1', [paperId]);
    expect(paper.rows).toEqual([{ paper_status: 'human_review_required' }]);
    const failed = await stack.store.query<{ payload: Record<string, unknown> }>(`SELECT payload FROM audit_events WHERE entity_id = $1 AND event_type = 'paper.draft_failed'`, [paperId]);
    expect(failed.rows).toEqual([{ payload: { from: 'draft_generating', to: 'human_review_required', error: 'no drafting step holds it (no step recorded starting it), so none will give it back' } }]);
  });

  it('completes a tick whose record step waits longer than the heartbeat timeout on a slow database', { timeout: 120_000 }, async () => {
    // The database takes 25 s to record this project's dispatch step: past the step's heartbeat timeout (10 s) twice.
    await stack.store.query(`CREATE FUNCTION slow_pump_record() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN PERFORM pg_sleep(25); RETURN NEW; END $$`);
    await stack.store.query(
      `CREATE TRIGGER slow_pump_record BEFORE INSERT ON audit_events FOR EACH ROW
       WHEN (NEW.event_type = 'queue_pump.dispatch' AND NEW.payload->>'run_id' LIKE 'pumped-slow-%') EXECUTE FUNCTION slow_pump_record()`,
    );
    try {
      await stack.seed('pumped-slow', { projectName: 'Pumped slow', lane: 'pumpB', scenario: { scenario: 'normal' } });
      const run = await runOf('pumped-slow');
      const tickId = await waitUntil('the recorded dispatch step', async () => {
        const rows = await stack.store.query<{ entity_id: string }>(`SELECT entity_id FROM audit_events WHERE event_type = 'queue_pump.dispatch' AND payload->>'run_id' = $1`, [run.run_id]);
        return rows.rows[0]?.entity_id;
      }, 60_000, 500);
      // The step heartbeats while it waits, so its one attempt stands and the tick completes with it.
      const report = await new Client({ connection }).workflow.getHandle(tickId).result();
      expect(report.steps).toContainEqual(expect.objectContaining({ step: 'dispatch', action: 'dispatch_started', run_id: run.run_id }));
    } finally {
      await stack.store.query('DROP TRIGGER slow_pump_record ON audit_events');
      await stack.store.query('DROP FUNCTION slow_pump_record()');
    }
  });

  it('is paused when a restart finds queue_pump_enabled false, and then dispatches nothing', { timeout: 90_000 }, async () => {
    const config = JSON.parse(await readFile(stack.cpFixture.configPath, 'utf8')) as Record<string, unknown>;
    await writeFile(stack.cpFixture.configPath, JSON.stringify({ ...config, queue_pump_enabled: false }));
    await stack.cp.kill('SIGKILL');
    await stack.restartControlPlane();

    const described = await new Client({ connection }).schedule.getHandle(queuePumpScheduleId(stack.cpFixture.taskQueue)).describe();
    expect(described.state).toMatchObject({ paused: true, note: expect.stringMatching(/queue_pump_enabled is false/) });
    await stack.seed('pumped-c', { projectName: 'Pumped C', lane: 'pumpC', scenario: { scenario: 'normal' } });
    await sleep(SEVERAL_TICKS_MS);
    expect(await queueStatus('pumped-c')).toBe('queued');
  });
});
