import { AGENT_DEFAULTS } from '../../capabilities/runs/dispatch-settings.ts';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import type { RunLauncher } from '../../capabilities/runs/run-launcher.ts';
import { testPort } from '../support/ports.ts';
import { workerRoutingFrom } from '../../capabilities/runs/domain/worker-lanes.ts';
import { insertProject } from '../../capabilities/runs/projects.ts';
import { insertQueueItem } from '../../capabilities/runs/queue-items.ts';
import type { Store } from '../../platform/store/store.ts';
import { startTestApp } from '../support/app.ts';
import { CALLBACK_TOKEN, CONTROL_TOKEN, dispatchCount, GATE_TOKEN, gateClient, waitUntil, type GateFixture } from '../support/gate.ts';
import { tableCounts } from '../support/ledgers.ts';
import { isProcessRunning } from '../support/process.ts';
import { gateTarget, ledgerReads, RUN_STACK_START_MS, startRunStack, type ControlApi, type RunStack } from '../support/run-stack.ts';

// expected duration: ~15 s

/**
 * POST /control/dispatch-next and the run commands through real processes (docs/runs.md#runs): one control plane
 * (HTTP + Temporal worker on Postgres) and one worker gate whose dispatch script is the fake agent. Every test seeds
 * its own projects on its own lanes (worker targets that all point at the one gate, plus one with nothing listening),
 * so a run a test leaves in flight never holds another test's lane; queued leftovers are parked after each test.
 */

const ACTIVE = ['dispatching', 'running', 'awaiting_wake', 'wake_received', 'reconciling'];

let stack: RunStack;
let store: Store;
let gateFixture: GateFixture;
let api: ControlApi;
let downUrl: string;
/** Lanes for parallel callers to spread over. */
const SPREAD_LANES = ['spread1', 'spread2', 'spread3', 'spread4', 'spread5', 'spread6'];
const { queueItem, runRow, count } = ledgerReads(() => store);

beforeAll(async () => {
  stack = await startRunStack({
    defaultLane: false,
    controlPlaneOverrides: async (gate) => {
      downUrl = `http://127.0.0.1:${await testPort()}`;
      const onGate = (role: 'gpu_worker' | 'cpu_worker' = 'gpu_worker') => gateTarget(gate, role);
      return {
        worker_targets: {
          dry: onGate(),
          conc: onGate(),
          laneA: onGate(),
          laneB: onGate(),
          laneC: onGate('cpu_worker'),
          order: onGate(),
          fail: onGate(),
          cancel: onGate(),
          question: onGate(),
          trail: onGate(),
          budget: onGate(),
          budgetNone: onGate(),
          keyed: onGate(),
          keyedLater: onGate(),
          ...Object.fromEntries(SPREAD_LANES.map((lane) => [lane, onGate()])),
          down: { wake_gate_url: downUrl, bearer_token: GATE_TOKEN, role: 'cpu_worker' },
        },
      };
    },
  });
  ({ store, gateFixture, api } = stack);
}, RUN_STACK_START_MS);

/** Also kills the agents the gate started that a test did not stop itself. */
afterAll(() => stack?.close());

afterEach(async () => {
  // A test that failed half-way must not leave the queue paused or an eligible item for the next test.
  await api('POST', '/control/resume', { resumed_by: 'dispatch-test' });
  await store.query(`UPDATE queue_items SET status = 'paused' WHERE status = 'queued'`);
});

interface SeedOptions {
  scenario?: string;
  work_sec?: number;
  priority?: number;
  rank?: number;
  flagged?: boolean;
}

/** A project and its queued item on `lane`, with the fake agent's scenario written into its project directory. */
async function seed(projectId: string, lane: string, options: SeedOptions = {}): Promise<void> {
  await stack.seed(projectId, {
    projectName: `Dispatch ${projectId}`,
    lane,
    item: { dispatch_priority: options.priority ?? 50, selection_rank: options.rank ?? 50, manual_review_required: options.flagged ?? false },
    scenario: { scenario: options.scenario ?? 'normal', ...(options.work_sec ? { work_sec: options.work_sec } : {}) },
  });
}

const dispatchNext = (body: Record<string, unknown>) => api('POST', '/control/dispatch-next', { requested_by: 'dispatch-test', ...body });
const dryRun = (extra: Record<string, unknown> = {}) => dispatchNext({ dry_run: true, ...extra });

/** A live dispatch that must be accepted by the worker; remembers the agent's process group for cleanup. */
async function liveDispatch(projectId: string): Promise<string> {
  const live = await dispatchNext({ dry_run: false });
  expect(live.status, JSON.stringify(live.body)).toBe(200);
  expect(live.body).toMatchObject({ ok: true, action: 'live_dispatch', candidate: { project_id: projectId } });
  stack.agents.remember(live.body);
  return live.body.run_id as string;
}

/** Every table a dispatch may write. */
async function allCounts() {
  return {
    ...(await tableCounts(store)),
    runs: await count('SELECT 1 FROM runs'),
    run_transitions: await count('SELECT 1 FROM run_transitions'),
    worker_observations: await count('SELECT 1 FROM worker_observations'),
    worker_callbacks: await count('SELECT 1 FROM worker_callbacks'),
    flags: await count('SELECT 1 FROM flags'),
  };
}

const activeItemCount = () => count('SELECT 1 FROM queue_items WHERE status = ANY($1::text[])', [ACTIVE]);

/** A completion callback as the gate would post it (domain/worker-callback.ts WorkerCallbackSchema). */
function callbackBody(runId: string, projectId: string, eventType: string, key: string): Record<string, unknown> {
  const now = new Date().toISOString();
  return {
    event_type: eventType,
    run_id: runId,
    session_id: 'test-session',
    project_id: projectId,
    gate_state: 'running',
    reason: 'sent by the test',
    idle_seen_at: null,
    seen_at: now,
    delivered_at: now,
    telemetry: { cpu_pct: 1, gpu_pct: null, vram_used_mib: null, vram_baseline_mib: null, memory_available_mib: 64000, gpu_source: 'none', quiet_window: null },
    process_tracking: { root_pid: null, process_group_id: null, tmux_session: null, root_alive: true, alive_pids: [], reaped_pids: [] },
    idempotency_key: key,
  };
}

describe('dispatch-next dry run', () => {
  it('answers the candidate, its route and the active count, writes nothing, and honours pause, maintenance and an empty queue', async () => {
    await seed('dry-one', 'dry');
    const before = await allCounts();

    const dry = await dryRun();
    expect(dry.status).toBe(200);
    expect(dry.body).toMatchObject({
      ok: true,
      action: 'dry_run_dispatch',
      candidate: { project_id: 'dry-one', status: 'queued', machine_target: 'dry', dispatch_priority: 50, selection_rank: 50 },
      dispatch_route: { machine_target: 'dry', wake_gate_url: gateFixture.url, worker_role: 'gpu_worker', token_configured: true },
      active_count: await activeItemCount(),
    });
    expect(typeof dry.body.reason).toBe('string');
    expect(JSON.stringify(dry.body)).not.toContain(GATE_TOKEN);

    // A forced preflight calls the worker but keeps no observation.
    const checked = await dryRun({ force_preflight: true });
    expect(checked.body).toMatchObject({ action: 'dry_run_dispatch', candidate: { project_id: 'dry-one' }, preflight: { ok: true, target: 'dry' } });
    expect(await allCounts()).toEqual(before);

    expect((await api('POST', '/control/pause', { reason: 'dry-run test', paused_by: 'dispatch-test', maintenance_mode: false })).status).toBe(200);
    const paused = await allCounts();
    for (const dryRunFlag of [true, false]) {
      const answer = await dispatchNext({ dry_run: dryRunFlag });
      expect(answer.status).toBe(200);
      expect(answer.body).toMatchObject({ ok: false, action: 'paused', candidate: null });
    }

    expect((await api('POST', '/control/pause', { reason: 'dry-run test', paused_by: 'dispatch-test', maintenance_mode: true })).status).toBe(200);
    const maintenance = await allCounts();
    for (const dryRunFlag of [true, false]) {
      const answer = await dispatchNext({ dry_run: dryRunFlag });
      expect(answer.status).toBe(200);
      expect(answer.body).toMatchObject({ ok: false, action: 'dispatch_blocked', candidate: null });
      expect(answer.body.reason).toMatch(/maintenance/);
    }
    expect(await allCounts()).toEqual(maintenance);
    expect(maintenance.runs).toBe(paused.runs);

    expect((await api('POST', '/control/resume', { resumed_by: 'dispatch-test' })).status).toBe(200);
    expect((await dryRun()).body).toMatchObject({ action: 'dry_run_dispatch', candidate: { project_id: 'dry-one' } });

    const parked = await api('POST', '/control/queue/mark-paused', { project_id: 'dry-one', reason: 'nothing eligible', updated_by: 'dispatch-test' });
    expect(parked.status).toBe(200);
    const empty = await allCounts();
    const noop = await dryRun();
    expect(noop.status).toBe(200);
    expect(noop.body).toMatchObject({ ok: false, action: 'noop', candidate: null, dispatch_route: null });
    const liveNoop = await dispatchNext({ dry_run: false });
    expect(liveNoop.body).toMatchObject({ ok: false, action: 'noop' });
    expect(await allCounts()).toEqual(empty);
  });

  it('refuses an unknown field and a missing requested_by with 422 naming the field', async () => {
    const before = await allCounts();
    const unknown = await api('POST', '/control/dispatch-next', { dry_run: true, requested_by: 'dispatch-test', launch_now: true });
    expect(unknown.status).toBe(422);
    expect(unknown.body.detail).toEqual([expect.objectContaining({ loc: ['body', 'launch_now'] })]);

    const anonymous = await api('POST', '/control/dispatch-next', { dry_run: true });
    expect(anonymous.status).toBe(422);
    expect(anonymous.body.detail).toEqual([expect.objectContaining({ loc: ['body', 'requested_by'] })]);

    const blank = await api('POST', '/control/dispatch-next', { dry_run: false, requested_by: '   ' });
    expect(blank.status).toBe(422);
    expect(blank.body.detail[0].loc).toEqual(['body', 'requested_by']);

    // Agent settings reach the agent's environment: only known efforts, and names of one short word.
    for (const [agent, field] of [
      [{ reasoning_effort: 'extreme' }, 'reasoning_effort'],
      [{ model: 'gpt 5; rm -rf /' }, 'model'],
      [{ sandbox: 'x'.repeat(201) }, 'sandbox'],
      [{ temperature: 1 }, 'temperature'],
    ] as const) {
      const refused = await dispatchNext({ dry_run: true, agent });
      expect(refused.status, field).toBe(422);
      expect(refused.body.detail[0].loc).toEqual(['body', 'agent', field]);
    }
    expect(await allCounts()).toEqual(before);
  });
});

describe('live dispatch switched off', () => {
  it('answers 501 and starts nothing when live_dispatch_enabled is false', async () => {
    const startRun = vi.fn<RunLauncher['startRun']>(async () => ({ started: false, reason: 'must not be called' }));
    const runs: RunLauncher = {
      startRun,
      deliverCallback: vi.fn(async () => 'closed' as const),
      deliverAnswer: vi.fn(async () => 'closed' as const),
      deliverResumeNow: vi.fn(async () => 'closed' as const),
      cancelRun: vi.fn(async () => 'closed' as const),
      workflowUiUrl: () => null,
    };
    const t = await startTestApp({
      runs,
      dispatch: {
        liveDispatchEnabled: false,
        routing: workerRoutingFrom({
          worker_targets: { solo: { wake_gate_url: 'http://127.0.0.1:9', bearer_token: GATE_TOKEN, role: 'gpu_worker' } },
          workload_machine_targets: {},
        }),
        completionCallbackToken: CALLBACK_TOKEN,
        dispatchTimeoutSec: 5,
        maxWaitAfterIdleSec: 600,
        agent: AGENT_DEFAULTS,
      },
    });
    try {
      await t.store.transaction(async (tx) => {
        await insertProject(tx, { project_id: 'off-one', project_name: 'Off', project_dir: 'off-one' });
        await insertQueueItem(tx, { project_id: 'off-one', project_name: 'Off', machine_target: 'solo' });
      });
      const send = async (payload: Record<string, unknown>) => {
        const response = await t.app.inject({ method: 'POST', url: '/control/dispatch-next', headers: t.auth, payload });
        return { status: response.statusCode, body: response.json() as Record<string, any> };
      };
      const live = await send({ dry_run: false, requested_by: 'dispatch-test' });
      expect(live.status).toBe(501);
      expect(live.body.detail).toMatch(/live_dispatch_enabled/);
      expect(startRun).not.toHaveBeenCalled();
      const runsRows = await t.store.query<{ n: number }>('SELECT count(*)::int AS n FROM runs');
      expect(runsRows.rows[0]!.n).toBe(0);
      expect((await t.store.query<{ status: string }>(`SELECT status FROM queue_items WHERE project_id = 'off-one'`)).rows[0]!.status).toBe('queued');

      // A dry run still answers, and says live dispatch is off.
      const dry = await send({ dry_run: true, requested_by: 'dispatch-test' });
      expect(dry.status).toBe(200);
      expect(dry.body).toMatchObject({ action: 'dry_run_dispatch', live_dispatch_enabled: false, candidate: { project_id: 'off-one' } });
      expect(dry.body.reason).toMatch(/disabled/);
    } finally {
      await t.close();
    }
  });
});

describe('live dispatch', () => {
  it('lets exactly one of 20 concurrent calls dispatch the one eligible item', { timeout: 90_000 }, async () => {
    await seed('conc-one', 'conc', { scenario: 'question' });
    const answers = await Promise.all(Array.from({ length: 20 }, () => dispatchNext({ dry_run: false })));
    for (const answer of answers) stack.agents.remember(answer.body);

    expect(answers.filter((answer) => answer.status >= 500)).toEqual([]);
    expect(answers.map((answer) => answer.status)).toEqual(Array(20).fill(200));
    const winners = answers.filter((answer) => answer.body.action === 'live_dispatch');
    expect(winners).toHaveLength(1);
    // The winner leased the item's lane: the others find no idle lane with an item and start no run at all.
    const losers = answers.filter((answer) => answer.body.action !== 'live_dispatch');
    expect(losers.map((answer) => answer.body.action)).toEqual(Array(19).fill('noop'));
    for (const loser of losers) expect(loser.body.reason).toMatch(/^no queued item is eligible on an idle lane: (the queue holds no queued item \(promote a candidate to queue one\)|1 queued item waits for lane conc, which (is busy with a run|another dispatch call holds))$/);

    const runId = winners[0]!.body.run_id as string;
    const runs = await store.query<{ run_id: string }>(`SELECT run_id FROM runs WHERE project_id = 'conc-one'`);
    expect(runs.rows.map((row) => row.run_id)).toEqual([runId]);
    const claims = await count(`SELECT 1 FROM audit_events WHERE event_type = 'run.claimed' AND payload->>'project_id' = 'conc-one'`);
    expect(claims).toBe(1);
    expect(await dispatchCount(gateFixture, runId)).toBe(1);
    const item = await queueItem('conc-one');
    expect(item.current_run_id).toBe(runId);
    expect(['awaiting_wake', 'running', 'needs_review']).toContain(item.status);
  });

  it('spreads parallel calls over the idle lanes: each dispatches a different item and none loses a claim', { timeout: 90_000 }, async () => {
    for (const [index, lane] of SPREAD_LANES.entries()) await seed(`spread-${index + 1}`, lane, { scenario: 'slow', work_sec: 120, priority: 10 + index });
    const answers = await Promise.all(SPREAD_LANES.map(() => dispatchNext({ dry_run: false })));
    for (const answer of answers) stack.agents.remember(answer.body);

    expect(answers.map((answer) => `${answer.status} ${answer.body.action}`)).toEqual(SPREAD_LANES.map(() => '200 live_dispatch'));
    const dispatched = answers.map((answer) => answer.body.candidate.project_id as string).sort();
    expect(dispatched).toEqual(SPREAD_LANES.map((_, index) => `spread-${index + 1}`));
    expect(await count(`SELECT 1 FROM runs WHERE project_id LIKE 'spread-%'`)).toBe(SPREAD_LANES.length);
    expect(await count('SELECT 1 FROM dispatch_lane_leases')).toBe(0);
    for (const answer of answers) {
      await api('POST', `/control/api/runs/${answer.body.run_id as string}/cancel`, { requested_by: 'dispatch-test' });
      await stack.killRunAgent(answer.body.run_id as string);
    }
  });

  it('runs items on two lanes at once and skips an item whose lane is busy', { timeout: 90_000 }, async () => {
    await seed('two-a', 'laneA', { scenario: 'slow', work_sec: 120, priority: 10 });
    await seed('two-b', 'laneB', { scenario: 'slow', work_sec: 120, priority: 20 });

    const runA = await liveDispatch('two-a');
    const runB = await liveDispatch('two-b');
    expect(runA).not.toBe(runB);

    const [a, b] = [await queueItem('two-a'), await queueItem('two-b')];
    expect(ACTIVE).toContain(a.status);
    expect(ACTIVE).toContain(b.status);
    expect([a.lane, b.lane]).toEqual(['laneA', 'laneB']);
    expect((await runRow(runA))!.lane).toBe('laneA');
    expect((await runRow(runB))!.lane).toBe('laneB');

    // laneA is busy: its next item is skipped however high its priority; an item on an idle lane is picked.
    await seed('two-a2', 'laneA', { priority: 1 });
    const dryBusy = await dryRun();
    expect(dryBusy.body).toMatchObject({ action: 'noop' });
    await seed('two-c', 'laneC', { priority: 90 });
    const dryOther = await dryRun();
    expect(dryOther.body).toMatchObject({
      action: 'dry_run_dispatch',
      candidate: { project_id: 'two-c' },
      dispatch_route: { machine_target: 'laneC', worker_role: 'cpu_worker' },
      active_count: await activeItemCount(),
    });
    expect(dryOther.body.active_count).toBeGreaterThanOrEqual(2);

    // Once laneA is free again its item comes first.
    for (const runId of [runA, runB]) {
      const canceled = await api('POST', `/control/api/runs/${runId}/cancel`, { requested_by: 'dispatch-test' });
      expect(canceled.body).toMatchObject({ ok: true, canceled: true });
      await stack.killRunAgent(runId);
    }
    expect((await dryRun()).body).toMatchObject({ action: 'dry_run_dispatch', candidate: { project_id: 'two-a2' }, dispatch_route: { machine_target: 'laneA' } });
  });

  it('picks by dispatch_priority, selection_rank, updated_at, project_id and skips flagged rows', async () => {
    await seed('order-flagged', 'order', { priority: 1, flagged: true });
    await seed('order-tie-b', 'order', { priority: 20, rank: 30 });
    await seed('order-tie-a', 'order', { priority: 20, rank: 30 });
    await seed('order-new', 'order', { priority: 20, rank: 20 });
    await seed('order-old', 'order', { priority: 20, rank: 20 });
    await seed('order-rank', 'order', { priority: 20, rank: 10 });
    await seed('order-prio', 'order', { priority: 10, rank: 90 });
    // updated_at decides before project_id ("order-new" sorts first by name but was touched last); ties fall to the name.
    await store.query(`UPDATE queue_items SET updated_at = '2030-01-01T00:00:00Z' WHERE project_id IN ('order-tie-a', 'order-tie-b')`);
    await store.query(`UPDATE queue_items SET updated_at = '2030-01-01T00:00:02Z' WHERE project_id = 'order-new'`);
    await store.query(`UPDATE queue_items SET updated_at = '2030-01-01T00:00:01Z' WHERE project_id = 'order-old'`);

    const picked: string[] = [];
    for (;;) {
      const dry = await dryRun();
      expect(dry.status).toBe(200);
      if (dry.body.action === 'noop') break;
      expect(dry.body.action).toBe('dry_run_dispatch');
      const projectId = dry.body.candidate.project_id as string;
      picked.push(projectId);
      if (picked.length > 10) break;
      const parked = await api('POST', '/control/queue/mark-paused', { project_id: projectId, reason: 'next', updated_by: 'dispatch-test' });
      expect(parked.status).toBe(200);
    }
    expect(picked).toEqual(['order-prio', 'order-rank', 'order-old', 'order-new', 'order-tie-a', 'order-tie-b']);
    expect((await queueItem('order-flagged')).status).toBe('queued');
  });

  it('blocks on a worker that is down and releases the claim', { timeout: 60_000 }, async () => {
    await seed('down-one', 'down');
    const live = await dispatchNext({ dry_run: false });
    expect(live.status).toBe(200);
    expect(live.body).toMatchObject({
      ok: false,
      action: 'dispatch_blocked',
      candidate: { project_id: 'down-one' },
      dispatch_route: { machine_target: 'down', wake_gate_url: downUrl, worker_role: 'cpu_worker', token_configured: true },
      preflight: { ok: false, target: 'down' },
    });
    expect(live.body.preflight.summary).toMatch(/wake_gate_healthz/);
    expect(live.body.preflight.checks).toContainEqual(expect.objectContaining({ name: 'wake_gate_healthz', ok: false }));

    const item = await queueItem('down-one');
    expect(item).toMatchObject({ status: 'queued', dispatch_failures: 1 });
    expect(item.last_error).toMatch(/preflight failed/);
    expect(await count(`SELECT 1 FROM queue_items WHERE lane = 'down' AND status = ANY($1::text[])`, [ACTIVE])).toBe(0);
    const runId = live.body.run_id as string;
    expect(runId).toMatch(/^down-one-\d{8}T\d{6}Z$/);
    expect((await runRow(runId))!.state).toBe('dispatch_error');
    const observation = await store.query<{ ok: boolean; target: string }>('SELECT ok, target FROM worker_observations WHERE run_id = $1', [runId]);
    expect(observation.rows).toEqual([{ ok: false, target: 'down' }]);
  });

  it('answers 503 naming the step when the ledger refuses a step of the run, the item stays queued, and the same key dispatches afresh once the ledger accepts', { timeout: 60_000 }, async () => {
    await seed('ledger-refused', 'down');
    // The database refuses this project's run row, as a constraint would: the claim can never be recorded.
    await store.query(`CREATE FUNCTION refuse_test_run() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'refused by the test' USING ERRCODE = '23514'; END $$`);
    await store.query(`CREATE TRIGGER refuse_test_run BEFORE INSERT ON runs FOR EACH ROW WHEN (NEW.project_id = 'ledger-refused') EXECUTE FUNCTION refuse_test_run()`);
    const key = `dispatch-test-ledger-${Date.now()}`;
    let refusedRunId: string | undefined;
    try {
      const live = await dispatchNext({ dry_run: false, idempotency_key: key });
      expect(live.status, JSON.stringify(live.body)).toBe(503);
      const runId = live.body.detail.run_id as string;
      expect(runId).toMatch(/^ledger-refused-\d{8}T\d{6}Z$/);
      expect(live.body.detail).toMatchObject({ step: 'claim', workflow_id: `run:${runId}` });
      expect(live.body.detail.message).toMatch(/could not record its claim step of run .*refused by the test/);
      expect(await runRow(runId)).toBeUndefined();
      expect(await queueItem('ledger-refused')).toMatchObject({ status: 'queued' });
      refusedRunId = runId;
    } finally {
      await store.query('DROP TRIGGER refuse_test_run ON runs');
      await store.query('DROP FUNCTION refuse_test_run()');
    }
    // The refused run has closed for good: the key is not held to its 503, and its retry dispatches the item afresh
    // (to a lane whose gate is down, so preflight blocks it).
    const retried = await dispatchNext({ dry_run: false, idempotency_key: key });
    expect(retried.status, JSON.stringify(retried.body)).toBe(200);
    expect(retried.body).toMatchObject({ action: 'dispatch_blocked', candidate: { project_id: 'ledger-refused' } });
    expect(retried.body.run_id).not.toBe(refusedRunId);
  });

  it('answers 502 for a failed dispatch, gives up after the third failure in a row, and requeue starts over', { timeout: 120_000 }, async () => {
    await seed('fail-one', 'fail', { scenario: 'bad-json' });
    const runIds: string[] = [];
    for (const attempt of [1, 2, 3]) {
      const live = await dispatchNext({ dry_run: false });
      expect(live.status, JSON.stringify(live.body)).toBe(502);
      const queueStatus = attempt < 3 ? 'queued' : 'dispatch_error';
      expect(live.body.detail).toMatchObject({ stage: 'dispatch', status: 502, queue_status: queueStatus });
      expect(typeof live.body.detail.message).toBe('string');
      const runId = live.body.detail.run_id as string;
      expect(runId).toMatch(/^fail-one-\d{8}T\d{6}Z$/);
      expect(live.body.detail.workflow_id).toBe(`run:${runId}`);
      runIds.push(runId);
      expect((await runRow(runId))!.state).toBe('dispatch_error');
      expect(await dispatchCount(gateFixture, runId)).toBe(1);
      const item = await queueItem('fail-one');
      expect(item).toMatchObject({ status: queueStatus, dispatch_failures: attempt, current_run_id: runId });
      expect(item.last_error).toMatch(/dispatch failed/);
    }
    expect(new Set(runIds).size).toBe(3);
    expect((await dryRun()).body).toMatchObject({ action: 'noop' });

    const requeued = await api('POST', '/control/queue/requeue', { project_id: 'fail-one', requested_by: 'dispatch-test' });
    expect(requeued.status).toBe(200);
    expect(requeued.body.queue_item).toMatchObject({ status: 'queued', dispatch_failures: 0 });
    expect(await queueItem('fail-one')).toMatchObject({ status: 'queued', dispatch_failures: 0 });
    expect((await dryRun()).body).toMatchObject({ action: 'dry_run_dispatch', candidate: { project_id: 'fail-one' } });
  });

  it('cancels a running run once, answers already_finished after, and ignores later callbacks', { timeout: 90_000 }, async () => {
    await seed('cancel-one', 'cancel', { scenario: 'slow', work_sec: 120 });
    const runId = await liveDispatch('cancel-one');

    const canceled = await api('POST', `/control/api/runs/${runId}/cancel`, { requested_by: 'dispatch-test', reason: 'test cancel' });
    expect(canceled.status).toBe(200);
    expect(canceled.body).toMatchObject({ ok: true, already_finished: false, canceled: true, run_id: runId, workflow_id: `run:${runId}`, state: 'canceled', queue_status: 'canceled' });
    expect((await runRow(runId))!.state).toBe('canceled');
    expect((await queueItem('cancel-one')).status).toBe('canceled');
    const events = await store.query<{ event_type: string; n: number }>(
      `SELECT event_type, count(*)::int AS n FROM audit_events WHERE entity_id = $1 AND event_type IN ('run.cancel_requested', 'run.canceled') GROUP BY event_type ORDER BY event_type`,
      [runId],
    );
    expect(events.rows).toEqual([
      { event_type: 'run.cancel_requested', n: 1 },
      { event_type: 'run.canceled', n: 1 },
    ]);

    // The agent is stopped on the worker too: the gate marks the run cancelled and its processes exit.
    expect(await stack.gateApi.runView(runId)).toMatchObject({ gate_state: 'cancelled', processes_alive: false });
    const rootPid = (await runRow(runId))!.dispatch_result.root_pid as number;
    expect(rootPid).toBeGreaterThan(0);
    await waitUntil('the canceled agent to exit', () => (isProcessRunning(rootPid) ? undefined : true), 10_000);

    const again = await api('POST', `/control/api/runs/${runId}/cancel`, { requested_by: 'dispatch-test' });
    expect(again.status).toBe(200);
    expect(again.body).toMatchObject({ ok: true, already_finished: true, state: 'canceled' });
    expect(await count(`SELECT 1 FROM audit_events WHERE entity_id = $1 AND event_type IN ('run.cancel_requested', 'run.canceled')`, [runId])).toBe(2);

    const unknown = await api('POST', '/control/api/runs/cancel-one-20300101T000000Z/cancel', { requested_by: 'dispatch-test' });
    expect(unknown.status).toBe(404);
    expect(typeof unknown.body.detail).toBe('string');

    const transitions = await count('SELECT 1 FROM run_transitions WHERE run_id = $1', [runId]);
    const late = await api('POST', '/control/api/worker-callback', callbackBody(runId, 'cancel-one', 'wake_ready', `${runId}:wake_ready:late`), CALLBACK_TOKEN);
    expect(late.status).toBe(200);
    expect(late.body).toMatchObject({ ok: true, ignored: true, run_id: runId });
    expect(late.body.ignore_reason).toMatch(/finished/);
    const stored = await store.query('SELECT ignored FROM worker_callbacks WHERE idempotency_key = $1', [`${runId}:wake_ready:late`]);
    expect(stored.rows).toEqual([{ ignored: true }]);
    expect(await count('SELECT 1 FROM run_transitions WHERE run_id = $1', [runId])).toBe(transitions);
    expect((await runRow(runId))!.state).toBe('canceled');
    expect((await queueItem('cancel-one')).status).toBe('canceled');

    // Leave no agent behind, whatever the gate's stop has done by now.
    await stack.killRunAgent(runId);
  });

  it('holds the lane for an agent question, its item flagged, and picks no other item there while the run waits', { timeout: 60_000 }, async () => {
    await seed('question-one', 'question', { scenario: 'question' });
    await seed('question-two', 'question', { scenario: 'normal' });
    const runId = await liveDispatch('question-one');
    await waitUntil('the run to wait on its question', async () => ((await runRow(runId))?.state === 'question_pending' ? true : undefined), 30_000, 300);
    const item = await queueItem('question-one');
    expect(item).toMatchObject({ status: 'running', manual_review_required: true, current_run_id: runId, last_run_state: 'question_pending' });
    const run = (await runRow(runId))!;
    expect(run.question).toBe('Which dataset split should the final evaluation use?');
    // The lane is the asking run's until it is answered, ends or is canceled: the other item of the lane waits.
    expect((await dryRun()).body).toMatchObject({ action: 'noop' });
  });

  it("joins a dispatch request to its run's whole trail: the audit rows the run's workflow writes name the request", { timeout: 60_000 }, async () => {
    await seed('trail-one', 'trail', { scenario: 'question' });
    const requestId = `trail-${Date.now()}`;
    const response = await fetch(`${stack.cpFixture.url}/control/dispatch-next`, {
      method: 'POST',
      headers: { authorization: `Bearer ${CONTROL_TOKEN}`, 'content-type': 'application/json', 'x-request-id': requestId },
      body: JSON.stringify({ dry_run: false, requested_by: 'dispatch-test' }),
    });
    expect(response.headers.get('x-request-id')).toBe(requestId);
    const live = (await response.json()) as Record<string, unknown>;
    expect(live).toMatchObject({ action: 'live_dispatch', candidate: { project_id: 'trail-one' } });
    stack.agents.remember(live);
    const runId = live.run_id as string;
    // The question comes in later, on the gate's own callback request: the workflow's steps after it still name the
    // request that started the run.
    await waitUntil('the run to wait on its question', async () => ((await runRow(runId))?.state === 'question_pending' ? true : undefined), 30_000, 300);
    const rows = await store.query<{ event_type: string; request_id: string | null }>(
      `SELECT event_type, request_id FROM audit_events WHERE entity_id = $1 AND event_type LIKE 'run.%' ORDER BY id`,
      [runId],
    );
    expect(rows.rows.map((row) => row.event_type)).toEqual(expect.arrayContaining(['run.claimed', 'run.question_asked']));
    expect(rows.rows.filter((row) => row.request_id !== requestId)).toEqual([]);
  });

  it("hands the gate the run's token budget: its project's expected_token_budget times agent_token_budget_multiple (2)", { timeout: 60_000 }, async () => {
    await seed('budget-one', 'budget', { scenario: 'question' });
    // Promotion copies the candidate's budget onto its project (test/runs/run-e2e.test.ts promotes one).
    await store.query(`UPDATE projects SET expected_token_budget = 1500 WHERE project_id = 'budget-one'`);
    const runId = await liveDispatch('budget-one');
    expect((await gateClient(gateFixture).runView(runId))?.token_budget).toBe(3000);
  });

  it('hands no token budget for a run without a candidate', { timeout: 60_000 }, async () => {
    await seed('budget-none', 'budgetNone', { scenario: 'question' });
    const runId = await liveDispatch('budget-none');
    expect((await gateClient(gateFixture).runView(runId))?.token_budget).toBeNull();
  });
});

describe('dispatch-next with an idempotency key', () => {
  it('starts one run per key: a retry after a dropped connection attaches to it, a replay answers the same, another body gets 409', { timeout: 90_000 }, async () => {
    await seed('keyed-one', 'keyed', { scenario: 'slow', work_sec: 120 });
    const key = `dispatch-test-dropped-${Date.now()}`;
    const body = { dry_run: false, requested_by: 'dispatch-test', idempotency_key: key };
    // The first call's connection drops while the control plane is still at work on it.
    const dropped = new AbortController();
    const first = fetch(`${stack.cpFixture.url}/control/dispatch-next`, {
      method: 'POST',
      headers: { authorization: `Bearer ${CONTROL_TOKEN}`, 'content-type': 'application/json' },
      body: JSON.stringify(body),
      signal: dropped.signal,
    });
    setTimeout(() => dropped.abort(), 30);
    await expect(first).rejects.toThrow();

    const retried = await dispatchNext(body);
    expect(retried.status, JSON.stringify(retried.body)).toBe(200);
    expect(retried.body).toMatchObject({ action: 'live_dispatch', candidate: { project_id: 'keyed-one' } });
    stack.agents.remember(retried.body);
    const runId = retried.body.run_id as string;

    const replayed = await dispatchNext(body);
    expect(replayed.status).toBe(200);
    expect(replayed.body).toMatchObject({ action: 'live_dispatch', run_id: runId });
    const otherBody = await dispatchNext({ ...body, requested_by: 'someone-else' });
    expect(otherBody.status).toBe(409);
    expect(otherBody.body).toEqual({ detail: `idempotency key '${key}' was reused with different payload` });

    const runs = await store.query<{ run_id: string }>(`SELECT run_id FROM runs WHERE project_id = 'keyed-one'`);
    expect(runs.rows.map((row) => row.run_id)).toEqual([runId]);
    expect(await dispatchCount(gateFixture, runId)).toBe(1);
  });

  it('gives its key back when the call starts no run, so the same call dispatches once there is work', { timeout: 90_000 }, async () => {
    const key = `dispatch-test-later-${Date.now()}`;
    const body = { dry_run: false, requested_by: 'dispatch-test', idempotency_key: key };
    const nothing = await dispatchNext(body);
    expect(nothing.status).toBe(200);
    expect(nothing.body).toMatchObject({ action: 'noop' });

    await seed('keyed-later', 'keyedLater', { scenario: 'slow', work_sec: 120 });
    const live = await dispatchNext(body);
    expect(live.status, JSON.stringify(live.body)).toBe(200);
    expect(live.body).toMatchObject({ action: 'live_dispatch', candidate: { project_id: 'keyed-later' } });
    stack.agents.remember(live.body);
    // A dry run ignores the key.
    const dry = await dryRun({ idempotency_key: key });
    expect(dry.status).toBe(200);
    expect(dry.body.action).not.toBe('live_dispatch');
  });
});
