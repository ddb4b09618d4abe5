import { mkdir, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { Client, Connection } from '@temporalio/client';
import { ApplicationFailure } from '@temporalio/common';
import { NativeConnection, Worker } from '@temporalio/worker';
import { afterAll, beforeAll, describe, expect, it, inject } from 'vitest';
import { createActivities } from '../../activities/index.ts';
import { deterministicPaperSettings } from '../support/paper-settings.ts';
import { testPort } from '../support/ports.ts';
import { ensureSearchAttributes } from '../../bin/search-attributes.ts';
import { loadWorkflowBundle } from '../../platform/temporal/workflow-bundle.ts';
import { WORKFLOWS_ON_MAIN_THREAD } from '../../bin/temporal-runtime.ts';
import { temporalRunLauncher } from '../../capabilities/runs/run-workflows.ts';
import { RunLedgerFailedError } from '../../capabilities/runs/run-launcher.ts';
import type { CallbackEventType } from '../../worker-gate/contract/gate-names.ts';
import { workerRoutingFrom } from '../../capabilities/runs/domain/worker-lanes.ts';
import { RUN_LEDGER_FAILED } from '../../capabilities/runs/domain/run-failures.ts';
import { runIdFor, workflowIdForRun } from '../../capabilities/runs/domain/run-state.ts';
import type { DispatchSettings } from '../../capabilities/runs/dispatch-settings.ts';
import { AGENT_DEFAULTS } from '../../capabilities/runs/dispatch-settings.ts';
import { openStore } from '../../platform/store/open-store.ts';
import { insertProject } from '../../capabilities/runs/projects.ts';
import { insertQueueItem } from '../../capabilities/runs/queue-items.ts';
import { setFlag } from '../../capabilities/runs/queue-flags.ts';
import type { Store } from '../../platform/store/store.ts';
import { workerCallbackSignal, type RunCallback, type RunTimings, type RunWorkflowInput } from '../../workflows/runs/run-messages.ts';
import { USAGE_LIMIT_RESUME_PROMPT } from '../../worker-gate/contract/usage-limit.ts';
import { NEWEST_RUN_PATCH } from '../../workflows/patches.ts';
import type { runWorkflow } from '../../workflows/runs/run-workflow.ts';
import { createTestDatabase, type TestDatabase } from '../support/database.ts';
import { CALLBACK_TOKEN, CallbackReceiver, GATE_TOKEN, gateClient, startGateProcess, writeGateConfig, type GateFixture, type GateProcess } from '../support/gate.ts';
import { fetchRunHistory, maybeSaveHistory } from '../support/histories.ts';
import { AgentGroups, ledgerReads } from '../support/run-stack.ts';
import { quietTemporalLogs } from '../support/temporal.ts';
import { workflowListing } from '../support/workflow-listing.ts';

// expected duration: ~18 s

/**
 * Every path of the run workflow, in seconds: the workflow runs on a worker inside this process, on the shared dev
 * server of the test run, with the real activities on a test database and a real worker gate whose dispatch script is
 * the fake agent. The test plays the control plane's callback receiver: it signals the callbacks itself.
 *
 * The timer branches (completion timeout) run on real time with short waits, since every duration is a workflow input.
 * `@temporalio/testing` does not help here: its time-skipping environment needs the Java test server, which the SDK
 * would download (no downloads here; the installed Temporal CLI is not that server), and `createLocal` with the
 * installed CLI starts a second dev server that does not skip time either.
 *
 * With RCP_CAPTURE_HISTORIES=1, each path's history is kept as a replay fixture named after the newest patch, once
 * (docs/architecture.md#changing-a-workflow).
 */

const TASK_QUEUE = `run-paths-${process.pid}`;
const LANES = ['completed', 'finished', 'burst', 'timeout', 'gate-timeout', 'question', 'limited', 'failed', 'canceled', 'race', 'lost', 'readonly', 'paused'] as const;
/** A lane whose gate address has nothing listening. */
const DOWN_LANE = 'down';

let database: TestDatabase;
let store: Store;
let receiver: CallbackReceiver;
let gateFixture: GateFixture;
let gate: GateProcess;
let workerConnection: NativeConnection;
let clientConnection: Connection;
let worker: Worker;
let running: Promise<void>;
let client: Client;
let settings: DispatchSettings;
let activities: ReturnType<typeof createActivities>;
const agents = new AgentGroups();
const { queueItem, runRow } = ledgerReads(() => store);

beforeAll(async () => {
  quietTemporalLogs();
  database = await createTestDatabase();
  store = await openStore({ backend: 'pg', pgDatabaseUrl: database.url });
  receiver = await CallbackReceiver.start();
  // One gate stands in for the worker of every lane here: more slots than the runs this file starts, some of which
  // the gate still holds (a slow agent, an unanswered question) after the control plane has moved on.
  gateFixture = await writeGateConfig({ callbackUrl: receiver.url, overrides: { run_slots: 64 } });
  gate = await startGateProcess(gateFixture);
  settings = {
    liveDispatchEnabled: true,
    routing: workerRoutingFrom({
      worker_targets: {
        ...Object.fromEntries(LANES.map((lane) => [lane, { wake_gate_url: gateFixture.url, bearer_token: GATE_TOKEN, role: 'gpu_worker' }])),
        [DOWN_LANE]: { wake_gate_url: `http://127.0.0.1:${await testPort()}`, bearer_token: GATE_TOKEN, role: 'cpu_worker' },
      },
      workload_machine_targets: {},
    }),
    completionCallbackToken: CALLBACK_TOKEN,
    dispatchTimeoutSec: 20,
    maxWaitAfterIdleSec: 60,
    agent: AGENT_DEFAULTS,
  };
  const address = inject('temporalAddress');
  workerConnection = await NativeConnection.connect({ address });
  clientConnection = await Connection.connect({ address });
  await ensureSearchAttributes(clientConnection, 'default');
  activities = createActivities({ store, settings, papers: deterministicPaperSettings() });
  worker = await Worker.create({
    connection: workerConnection,
    taskQueue: TASK_QUEUE,
    workflowBundle: await loadWorkflowBundle(),
    activities,
    ...WORKFLOWS_ON_MAIN_THREAD,
  });
  running = worker.run();
  client = new Client({ connection: clientConnection });
}, 120_000);

afterAll(async () => {
  agents.killAll();
  if (worker?.getState() === 'RUNNING') worker.shutdown();
  await running?.catch(() => undefined);
  await clientConnection?.close();
  await workerConnection?.close();
  await gate?.kill('SIGTERM');
  await receiver?.down();
  await store?.close();
  await database?.drop();
}, 60_000);

const launcher = () => temporalRunLauncher(client, { taskQueue: TASK_QUEUE, namespace: 'default' });
const handleOf = (runId: string) => client.workflow.getHandle<typeof runWorkflow>(workflowIdForRun(runId));

/** A project and its queued item on `lane` (project id = lane, or `<lane>-<n>`), with the fake agent's scenario in its directory. */
async function seed(lane: (typeof LANES)[number] | typeof DOWN_LANE, scenario: Record<string, unknown>, n?: number): Promise<RunWorkflowInput> {
  const projectId = n === undefined ? `paths-${lane}` : `paths-${lane}-${n}`;
  await store.transaction(async (tx) => {
    await insertProject(tx, { project_id: projectId, project_name: `Paths ${lane}`, project_dir: projectId, workload_class: 'unknown', machine_target: lane });
    await insertQueueItem(tx, { project_id: projectId, project_name: `Paths ${lane}`, machine_target: lane, workload_class: 'unknown' });
  });
  await mkdir(join(gateFixture.projectRoot, projectId), { recursive: true });
  await writeFile(join(gateFixture.projectRoot, projectId, 'scenario.json'), JSON.stringify(scenario));
  return runInput(projectId, lane);
}

function runInput(projectId: string, lane: string, timings: Partial<RunTimings> = {}): RunWorkflowInput {
  return {
    run_id: runIdFor(projectId, new Date()),
    project_id: projectId,
    lane,
    requested_by: 'run-paths-test',
    agent: { mode: 'exec', model: '', reasoning_effort: 'medium', sandbox: '' },
    timings: { completion_wait_sec: 600, gate_call_timeout_sec: 30, gate_call_attempts: 2, gate_retry_initial_sec: 1, ...timings },
  };
}

/** Starts the run and expects the worker to accept it. */
async function dispatched(input: RunWorkflowInput): Promise<void> {
  const started = await launcher().startRun(input, 60_000);
  expect(started).toMatchObject({ started: true, workflow_id: workflowIdForRun(input.run_id), outcome: { action: 'live_dispatch', run_id: input.run_id } });
  if (started.started && started.outcome?.action === 'live_dispatch') agents.remember({ dispatch: started.outcome.dispatch });
}

function callback(runId: string, eventType: CallbackEventType, extra: Partial<RunCallback> = {}): RunCallback {
  return {
    idempotency_key: `${runId}:${eventType}:test`,
    event_type: eventType,
    session_id: 'test-session',
    gate_state: 'running',
    reason: `${eventType} sent by the test`,
    seen_at: new Date().toISOString(),
    question: null,
    evidence: null,
    ...extra,
  };
}

const transitionsOf = async (runId: string) =>
  (await store.query<{ transition: string }>('SELECT transition FROM run_transitions WHERE run_id = $1 ORDER BY created_at', [runId])).rows.map((row) => row.transition);

/** Keeps the run's history as the fixture of `path` for the current code (only when capturing, and only once). */
async function keepHistory(path: string, runId: string): Promise<void> {
  maybeSaveHistory(`${path}.${NEWEST_RUN_PATCH}`, await fetchRunHistory(workflowIdForRun(runId)));
}

describe('the run workflow on each of its paths', () => {
  it('completes on a finishing callback', { timeout: 90_000 }, async () => {
    const input = await seed('completed', { scenario: 'slow', work_sec: 120 });
    await dispatched(input);
    await handleOf(input.run_id).signal(workerCallbackSignal, callback(input.run_id, 'session_started'));
    await handleOf(input.run_id).signal(workerCallbackSignal, callback(input.run_id, 'session_finished_ready', { gate_state: 'finished_ready' }));
    expect(await handleOf(input.run_id).result()).toMatchObject({ run_state: 'reconciled', queue_status: 'completed' });
    expect(await transitionsOf(input.run_id)).toEqual(['claimed', 'prepared', 'worker_accepted', 'session_started', 'wake_received', 'reconciling', 'completed']);
    expect(await workflowListing(workflowIdForRun(input.run_id))).toEqual({ summary: 'run of paths-completed on completed, dispatched by run-paths-test', project_id: 'paths-completed', paper_id: undefined, cycle_id: undefined, task_timeout_sec: 4 });
    await keepHistory('run-completed', input.run_id);
  });

  it('closes on a finishing callback whose transitions an earlier attempt of the task already recorded', { timeout: 90_000 }, async () => {
    const input = await seed('finished', { scenario: 'slow', work_sec: 120 });
    await dispatched(input);
    await handleOf(input.run_id).signal(workerCallbackSignal, callback(input.run_id, 'session_started'));
    await expect.poll(async () => (await runRow(input.run_id))?.state, { timeout: 20_000 }).toBe('running');
    // What a workflow task that failed after its local activities ran (two replicas signalling at once) leaves behind.
    await activities.transitionRun({ run_id: input.run_id, transition: 'wake_received', detail: { run_state: 'session_finished_ready', session_id: 'test-session' } });
    await activities.transitionRun({ run_id: input.run_id, transition: 'reconciling', detail: { decision: null, decision_summary: null, evidence: null } });
    await activities.transitionRun({ run_id: input.run_id, transition: 'completed' });
    await handleOf(input.run_id).signal(workerCallbackSignal, callback(input.run_id, 'session_finished_ready', { gate_state: 'finished_ready' }));
    expect(await handleOf(input.run_id).result()).toMatchObject({ run_state: 'reconciled', queue_status: 'completed' });
    expect(await transitionsOf(input.run_id)).toEqual(['claimed', 'prepared', 'worker_accepted', 'session_started', 'wake_received', 'reconciling', 'completed']);
    await keepHistory('run-finished-before-callback', input.run_id);
  });

  it('closes every run whose finishing callback arrives many times at once (two replicas signalling it), each transition once', { timeout: 120_000 }, async () => {
    // Without the finished-run-ends-wait patch about one burst in ten left its workflow waiting; twelve bursts catch it
    // most of the time.
    for (let n = 0; n < 12; n++) {
      const input = await seed('burst', { scenario: 'slow', work_sec: 120 }, n);
      await dispatched(input);
      await handleOf(input.run_id).signal(workerCallbackSignal, callback(input.run_id, 'session_started'));
      const finishing = Array.from({ length: 5 }, (_, copy) =>
        callback(input.run_id, 'session_finished_ready', { gate_state: 'finished_ready', idempotency_key: `${input.run_id}:session_finished_ready:copy-${copy}` }),
      );
      const started = Date.now();
      await Promise.all(finishing.map((copy) => handleOf(input.run_id).signal(workerCallbackSignal, copy)));
      expect(await handleOf(input.run_id).result()).toMatchObject({ run_state: 'reconciled', queue_status: 'completed' });
      expect(Date.now() - started).toBeLessThan(10_000);
      expect(await transitionsOf(input.run_id)).toEqual(['claimed', 'prepared', 'worker_accepted', 'session_started', 'wake_received', 'reconciling', 'completed']);
    }
  });

  it('gives up after the completion wait without a callback: the run ends gate_timeout and its item blocked', { timeout: 90_000 }, async () => {
    const input = { ...(await seed('timeout', { scenario: 'slow', work_sec: 120 })), timings: runInput('', '', { completion_wait_sec: 3 }).timings };
    await dispatched(input);
    const result = await handleOf(input.run_id).result();
    expect(result).toMatchObject({ run_id: input.run_id, dispatch: { action: 'live_dispatch' }, run_state: 'gate_timeout', queue_status: 'blocked' });
    expect(await runRow(input.run_id)).toMatchObject({ state: 'gate_timeout', last_error: 'no finishing callback within 3 s' });
    expect(await queueItem(input.project_id)).toMatchObject({ status: 'blocked', current_run_id: input.run_id });
    expect(await transitionsOf(input.run_id)).toEqual(['claimed', 'prepared', 'worker_accepted', 'completion_timeout']);
    await keepHistory('run-completion-timeout', input.run_id);
  });

  it('blocks the item on a gate_timeout callback', { timeout: 90_000 }, async () => {
    const input = await seed('gate-timeout', { scenario: 'slow', work_sec: 120 });
    await dispatched(input);
    await handleOf(input.run_id).signal(workerCallbackSignal, callback(input.run_id, 'gate_timeout', { gate_state: 'error' }));
    const result = await handleOf(input.run_id).result();
    expect(result).toMatchObject({ run_state: 'gate_timeout', queue_status: 'blocked' });
    expect((await runRow(input.run_id))!.last_error).toBe('gate_timeout: gate_timeout sent by the test');
    expect(await queueItem(input.project_id)).toMatchObject({ status: 'blocked' });
    await keepHistory('run-gate-timeout', input.run_id);
  });

  it('waits on an agent question keeping its lane, and moves the item to needs_review when no answer comes', { timeout: 90_000 }, async () => {
    const seeded = await seed('question', { scenario: 'slow', work_sec: 120 });
    const input = { ...seeded, timings: { ...seeded.timings, question_wait_sec: 4 } };
    await dispatched(input);
    const question = 'Which split?';
    const detail = { kind: 'question' as const, questions: [{ header: 'Split', question, options: [{ label: 'train', description: null }, { label: 'test', description: 'held out' }] }] };
    await handleOf(input.run_id).signal(workerCallbackSignal, callback(input.run_id, 'question_pending', { gate_state: 'question_pending', question, question_detail: detail }));
    // While it waits, the run keeps its lane: the item stays in flight, flagged for the operator.
    await expect.poll(async () => (await runRow(input.run_id))?.state, { timeout: 20_000 }).toBe('question_pending');
    expect(await runRow(input.run_id)).toMatchObject({ question, question_detail: detail });
    expect(await queueItem(input.project_id)).toMatchObject({ status: 'running', manual_review_required: true });
    const result = await handleOf(input.run_id).result();
    expect(result).toMatchObject({ run_state: 'gate_timeout', queue_status: 'needs_review' });
    expect(await transitionsOf(input.run_id)).toEqual(['claimed', 'prepared', 'worker_accepted', 'question_asked', 'question_unanswered']);
    expect((await runRow(input.run_id))!.last_error).toBe("the agent's question was not answered within 4 s");
    await keepHistory('run-question-unanswered', input.run_id);
  });

  it('ends the run blocked when the gate cannot resume the session with the answer', { timeout: 90_000 }, async () => {
    const input = await seed('question', { scenario: 'slow', work_sec: 120 }, 2);
    await dispatched(input);
    await handleOf(input.run_id).signal(workerCallbackSignal, callback(input.run_id, 'question_pending', { gate_state: 'question_pending', question: 'Which split?' }));
    await expect.poll(async () => (await runRow(input.run_id))?.state, { timeout: 20_000 }).toBe('question_pending');
    // The gate's own record of the run is still running (its fake agent asked nothing there): it refuses the resume.
    expect(await launcher().deliverAnswer(input.run_id, { answer_number: 1, prompt: 'Use the test split.', allowed_tools: [] })).toBe('delivered');
    expect(await handleOf(input.run_id).result()).toMatchObject({ run_state: 'gate_error', queue_status: 'blocked' });
    expect((await runRow(input.run_id))!.last_error).toMatch(/^the answer could not resume the agent's session: .*409.*not waiting on an answer/);
    expect(await transitionsOf(input.run_id)).toEqual(['claimed', 'prepared', 'worker_accepted', 'question_asked', 'resume_failed']);
    await keepHistory('run-resume-failed', input.run_id);
  });

  /** Dispatches a fake agent that hits the model's usage limit, and signals the run the gate's usage_limited callback. */
  async function limitedRun(scenario: 'usage-limit' | 'usage-limit-long', n: number, holdsSlot = true) {
    const input = await seed('limited', { scenario }, n);
    await dispatched(input);
    const limited = await receiver.waitFor(input.run_id, 'usage_limited', 30_000);
    const usageLimit = { resets_at: limited.body.cause!.resets_at!, resumes_at: limited.body.resumes_at!, holds_slot: holdsSlot };
    await handleOf(input.run_id).signal(workerCallbackSignal, callback(input.run_id, 'usage_limited', { gate_state: 'usage_limited', usage_limit: usageLimit }));
    return { input, usageLimit };
  }

  it('waits out a usage limit keeping its lane, then the gate resumes the same session by itself', { timeout: 90_000 }, async () => {
    const { input, usageLimit } = await limitedRun('usage-limit', 1);
    await expect.poll(async () => (await runRow(input.run_id))?.state, { timeout: 20_000 }).toBe('usage_limited');
    expect((await runRow(input.run_id))!.usage_limit).toEqual(usageLimit);
    const item = await queueItem(input.project_id);
    expect(item).toMatchObject({ status: 'running', manual_review_required: false, last_run_state: 'usage_limited' });
    expect(item!.next_action_hint).toContain(`resumes by itself at ${usageLimit.resumes_at}`);
    // The resume comes at the gate's time, not before.
    await expect.poll(async () => (await runRow(input.run_id))?.state, { timeout: 30_000, interval: 250 }).toBe('running');
    expect(Date.now()).toBeGreaterThanOrEqual(Date.parse(usageLimit.resumes_at) - 1_000);
    expect((await runRow(input.run_id))!.usage_limit).toBeNull();
    const onGate = await gateClient(gateFixture).runView(input.run_id);
    expect(onGate?.resumes?.map((resume: { resume_id: string }) => resume.resume_id)).toEqual(['limit-1']);
    // The resumed session was told why: the fake agent notes the prompt it resumed with.
    const notes = join(gateFixture.projectRoot, input.project_id, 'run_notes.md');
    await expect.poll(() => readFile(notes, 'utf8').catch(() => ''), { timeout: 30_000, interval: 250 }).toContain(USAGE_LIMIT_RESUME_PROMPT);
    await handleOf(input.run_id).signal(workerCallbackSignal, callback(input.run_id, 'session_finished_ready', { gate_state: 'finished_ready' }));
    expect(await handleOf(input.run_id).result()).toMatchObject({ run_state: 'reconciled', queue_status: 'completed' });
    expect(await transitionsOf(input.run_id)).toEqual(['claimed', 'prepared', 'worker_accepted', 'usage_limited', 'limit_resumed', 'wake_received', 'reconciling', 'completed']);
    await keepHistory('run-usage-limit', input.run_id);
  });

  it('resumes a run waiting out a usage limit when an operator asks, long before its reset', { timeout: 90_000 }, async () => {
    const { input, usageLimit } = await limitedRun('usage-limit-long', 2);
    expect(Date.parse(usageLimit.resumes_at) - Date.now()).toBeGreaterThan(3_000_000);
    await expect.poll(async () => (await runRow(input.run_id))?.state, { timeout: 20_000 }).toBe('usage_limited');
    expect(await launcher().deliverResumeNow(input.run_id, { limit_number: 1, requested_by: 'run-paths-test' })).toBe('delivered');
    await expect.poll(async () => (await runRow(input.run_id))?.state, { timeout: 30_000, interval: 250 }).toBe('running');
    const resumed = (await store.query<{ payload: Record<string, unknown> }>("SELECT payload FROM audit_events WHERE entity_id = $1 AND event_type = 'run.limit_resumed'", [input.run_id])).rows[0];
    expect(resumed?.payload).toMatchObject({ limit_number: 1, resumed_early_by: 'run-paths-test' });
    const onGate = await gateClient(gateFixture).runView(input.run_id);
    expect(onGate?.resumes?.map((resume: { resume_id: string }) => resume.resume_id)).toEqual(['limit-1']);
    // Resumed: the gate watches the session again (which may already have gone idle).
    expect(onGate?.gate_state).not.toBe('usage_limited');
    await handleOf(input.run_id).signal(workerCallbackSignal, callback(input.run_id, 'session_finished_ready', { gate_state: 'finished_ready' }));
    expect(await handleOf(input.run_id).result()).toMatchObject({ run_state: 'reconciled', queue_status: 'completed' });
    await keepHistory('run-usage-limit-resumed-early', input.run_id);
  });

  it('lets its lane go for a long usage-limit wait, and takes it back to resume once the item running there has left it', { timeout: 120_000 }, async () => {
    const { input, usageLimit } = await limitedRun('usage-limit', 3, false);
    await expect.poll(async () => (await queueItem(input.project_id))?.status, { timeout: 20_000 }).toBe('usage_limited');
    expect((await queueItem(input.project_id))!.next_action_hint).toContain('its lane is free meanwhile');
    // Another item takes the lane meanwhile.
    const other = await seed('limited', { scenario: 'slow', work_sec: 120 }, 4);
    await dispatched(other);
    // Its wait over, the run finds the lane held: it waits, and tries again.
    await expect.poll(async () => (await runRow(input.run_id))?.state, { timeout: 30_000, interval: 500 }).toBe('usage_limited');
    await new Promise((resolve) => setTimeout(resolve, Math.max(0, Date.parse(usageLimit.resumes_at) + 2_000 - Date.now())));
    expect((await runRow(input.run_id))!.state).toBe('usage_limited');
    expect(await queueItem(input.project_id)).toMatchObject({ status: 'usage_limited' });
    expect(await launcher().cancelRun(other.run_id, 30_000)).toBe('canceled');
    // The lane free, the next try takes it back and the session resumes.
    await expect.poll(async () => (await runRow(input.run_id))?.state, { timeout: 40_000, interval: 500 }).toBe('running');
    expect(await queueItem(input.project_id)).toMatchObject({ status: 'running', lane: 'limited' });
    expect((await store.query("SELECT 1 FROM audit_events WHERE entity_id = $1 AND event_type = 'run.lane_retaken'", [input.run_id])).rows).toHaveLength(1);
    await handleOf(input.run_id).signal(workerCallbackSignal, callback(input.run_id, 'session_finished_ready', { gate_state: 'finished_ready' }));
    expect(await handleOf(input.run_id).result()).toMatchObject({ run_state: 'reconciled', queue_status: 'completed' });
    await keepHistory('run-usage-limit-lane-released', input.run_id);
  });

  it('answers a failed dispatch with the gate\'s status and releases the claim', { timeout: 90_000 }, async () => {
    const input = await seed('failed', { scenario: 'bad-json' });
    const started = await launcher().startRun(input, 60_000);
    expect(started).toMatchObject({ started: true, outcome: { action: 'dispatch_failed', stage: 'dispatch', status: 502, queue_status: 'queued' } });
    expect(await handleOf(input.run_id).result()).toMatchObject({ run_state: 'dispatch_error', queue_status: 'queued' });
    expect(await queueItem(input.project_id)).toMatchObject({ status: 'queued', dispatch_failures: 1 });
    await keepHistory('run-dispatch-failed', input.run_id);
  });

  it('cancels a dispatched run and stops its agent on the worker', { timeout: 90_000 }, async () => {
    const input = await seed('canceled', { scenario: 'slow', work_sec: 120 });
    await dispatched(input);
    expect(await launcher().cancelRun(input.run_id, 30_000)).toBe('canceled');
    expect((await runRow(input.run_id))!.state).toBe('canceled');
    expect(await queueItem(input.project_id)).toMatchObject({ status: 'canceled' });
    expect(await gateClient(gateFixture).runView(input.run_id)).toMatchObject({ gate_state: 'cancelled' });
    await keepHistory('run-canceled', input.run_id);
  });

  it('blocks on a preflight that fails and releases the claim', { timeout: 90_000 }, async () => {
    const input = await seed(DOWN_LANE, { scenario: 'normal' });
    const started = await launcher().startRun(input, 60_000);
    expect(started).toMatchObject({ started: true, outcome: { action: 'dispatch_blocked', preflight: { ok: false, target: DOWN_LANE } } });
    expect(await queueItem(input.project_id)).toMatchObject({ status: 'queued', dispatch_failures: 1 });
    expect((await runRow(input.run_id))!.state).toBe('dispatch_error');
    await keepHistory('run-preflight-failed', input.run_id);
  });
});

describe('the worker the service runs', () => {
  it('runs workflows on its own thread and keeps the 5 s deadlock limit', () => {
    expect(worker.options.debugMode).toBe(true);
    expect(worker.options.isolateExecutionTimeoutMs).toBe(5_000);
  });
});

describe('the run launcher', () => {
  it('starts a run id once: a racing second start is refused', { timeout: 90_000 }, async () => {
    const input = await seed('race', { scenario: 'slow', work_sec: 120 });
    const answers = await Promise.all([launcher().startRun(input, 60_000), launcher().startRun(input, 60_000)]);
    const refused = answers.filter((answer) => !answer.started);
    expect(refused).toEqual([{ started: false, reason: `run ${input.run_id} was already started by another dispatch` }]);
    expect(answers.find((answer) => answer.started)).toMatchObject({ outcome: { action: 'live_dispatch', run_id: input.run_id } });
    expect(await launcher().cancelRun(input.run_id, 30_000)).toBe('canceled');
  });

  it('answers the outcome of a run whose claim was lost', { timeout: 90_000 }, async () => {
    const first = await seed('lost', { scenario: 'slow', work_sec: 120 });
    await dispatched(first);
    const second = { ...first, run_id: runIdFor(first.project_id, new Date(Date.now() + 60_000)) };
    const lost = await launcher().startRun(second, 60_000);
    expect(lost).toMatchObject({ started: true, outcome: { action: 'dispatch_blocked' } });
    expect(lost.started && lost.outcome?.action === 'dispatch_blocked' && lost.outcome.reason).toMatch(/^claim lost: /);
    await keepHistory('run-claim-lost', second.run_id);
    expect(await launcher().cancelRun(first.run_id, 30_000)).toBe('canceled');
  });

  it('loses the claim of a run started after the queue was paused, and leaves the item queued', { timeout: 60_000 }, async () => {
    const input = await seed('paused', { scenario: 'normal' });
    await setFlag(store, 'queue_paused', true, 'paths-test');
    try {
      const blocked = await launcher().startRun(input, 30_000);
      expect(blocked).toMatchObject({ started: true, outcome: { action: 'dispatch_blocked', reason: 'claim lost: the queue is paused' } });
      const item = await store.query<{ status: string }>(`SELECT status FROM queue_items WHERE project_id = 'paths-paused'`);
      expect(item.rows).toEqual([{ status: 'queued' }]);
      expect((await store.query(`SELECT 1 FROM runs WHERE project_id = 'paths-paused'`)).rowCount).toBe(0);
    } finally {
      await setFlag(store, 'queue_paused', false, 'paths-test');
    }
  });

  it('answers no outcome when none comes within the wait, and the run goes on', { timeout: 30_000 }, async () => {
    const input = runInput('paths-unpolled', 'race');
    const unpolled = temporalRunLauncher(client, { taskQueue: `${TASK_QUEUE}-unpolled`, namespace: 'default' });
    expect(await unpolled.startRun(input, 2_000)).toEqual({ started: true, workflow_id: workflowIdForRun(input.run_id), outcome: null });
    const handle = handleOf(input.run_id);
    expect((await handle.describe()).status.name).toBe('RUNNING');
    await handle.terminate('the test is over');
  });
});

describe('a ledger that refuses every write', () => {
  it('fails the run workflow at once, naming the run and the step, and writes nothing', { timeout: 60_000 }, async () => {
    const input = await seed('readonly', { scenario: 'normal' });
    const readOnlyStore = await openStore({ backend: 'pg_readonly', pgDatabaseUrl: database.url });
    const taskQueue = `${TASK_QUEUE}-readonly`;
    try {
      const readOnlyWorker = await Worker.create({
        connection: workerConnection,
        taskQueue,
        workflowBundle: await loadWorkflowBundle(),
        activities: createActivities({ store: readOnlyStore, settings, papers: deterministicPaperSettings() }),
      });
      const started = readOnlyWorker.runUntil(temporalRunLauncher(client, { taskQueue, namespace: 'default' }).startRun(input, 30_000));
      // The caller waiting for the outcome hears which step the ledger could not record, and why.
      const failure = await started.then(() => undefined, (error: unknown) => error);
      expect(failure).toBeInstanceOf(RunLedgerFailedError);
      expect(failure).toMatchObject({ status: 503, detail: { step: 'claim', run_id: input.run_id, workflow_id: workflowIdForRun(input.run_id) } });
      expect((failure as RunLedgerFailedError).detail).toMatchObject({ message: expect.stringContaining('claim step of run') });
      expect((failure as RunLedgerFailedError).detail).toMatchObject({ message: expect.stringContaining('the store is read-only (control_plane_store_backend is pg_readonly)') });
      const closed = await client.workflow.getHandle(workflowIdForRun(input.run_id)).result().then(() => undefined, (error: unknown) => error as { cause?: unknown });
      expect(closed?.cause).toBeInstanceOf(ApplicationFailure);
      expect(closed?.cause).toMatchObject({ type: RUN_LEDGER_FAILED, message: `run ${input.run_id}: claim could not be recorded: the store is read-only (control_plane_store_backend is pg_readonly)` });
      expect(await runRow(input.run_id)).toBeUndefined();
      expect(await queueItem(input.project_id)).toMatchObject({ status: 'queued' });
    } finally {
      await readOnlyStore.close();
    }
  });
});
