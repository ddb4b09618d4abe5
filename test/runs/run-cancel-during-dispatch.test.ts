import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { workflowIdForRun } from '../../capabilities/runs/domain/run-state.ts';
import { NEWEST_RUN_PATCH, RUN_PATCHES } from '../../workflows/patches.ts';
import { dispatchCount, GATE_TOKEN, waitUntil } from '../support/gate.ts';
import { fetchRunHistory, maybeSaveHistory, patchMarkers } from '../support/histories.ts';
import { ledgerReads, RUN_STACK_START_MS, startRunStack, type RunStack } from '../support/run-stack.ts';
import { SlowGate } from '../support/slow-gate.ts';

// expected duration: ~35 s

/**
 * A cancel while the run's dispatch is still on its way to the worker gate (docs/runs.md#runs): a control plane process
 * (HTTP + Temporal worker) and a real gate behind a real proxy that holds the dispatch until the test lets it through.
 * The cancel must not let the late dispatch start an agent on a lane the ledger shows free: the workflow waits for
 * the dispatch call to end (it aborts on the cancel) before it stops the run on the gate, and the gate, asked to stop a
 * run it has not seen, refuses that run's dispatch when it lands.
 */

let stack: RunStack;
let slowGate: SlowGate;
const { queueItem, runRow } = ledgerReads(() => stack.store);

beforeAll(async () => {
  stack = await startRunStack({
    defaultLane: false,
    controlPlaneOverrides: async (gate) => {
      slowGate = await SlowGate.start(gate.url);
      return { worker_targets: { slow: { wake_gate_url: slowGate.url, bearer_token: GATE_TOKEN, role: 'gpu_worker' } } };
    },
  });
}, RUN_STACK_START_MS);

afterAll(async () => {
  await slowGate?.down();
  await stack?.close();
});

const api = (method: string, path: string, body?: unknown) => stack.api(method, path, body);

async function cancelDuringDispatch(projectId: string): Promise<{ runId: string; held: Awaited<ReturnType<SlowGate['dispatchHeld']>>; dispatchAnswer: Promise<{ status: number; body: any }> }> {
  await stack.seed(projectId, { projectName: `Cancel race ${projectId}`, lane: 'slow', scenario: { scenario: 'slow', work_sec: 60 } });
  const dispatchAnswer = api('POST', '/control/dispatch-next', { requested_by: 'cancel-race-test', dry_run: false });
  const held = await slowGate.dispatchHeld();
  const runId = (await stack.store.query<{ run_id: string }>('SELECT run_id FROM runs WHERE project_id = $1', [projectId])).rows[0]!.run_id;
  const canceled = await api('POST', `/control/api/runs/${runId}/cancel`, { requested_by: 'cancel-race-test', reason: 'canceled while its dispatch was on the way' });
  expect(canceled.status, JSON.stringify(canceled.body)).toBe(200);
  expect(canceled.body).toMatchObject({ ok: true, canceled: true, state: 'canceled', queue_status: 'canceled' });
  return { runId, held, dispatchAnswer };
}

describe('a cancel that overtakes the dispatch', () => {
  it('starts no agent: the dispatch that lands after the cancel is refused with 409, and the gate and the ledger agree the lane is free', { timeout: 90_000 }, async () => {
    const { runId, held, dispatchAnswer } = await cancelDuringDispatch('race-late-dispatch');

    // The workflow ended canceled while the dispatch was still held: the call was aborted, not answered.
    const answer = await dispatchAnswer;
    expect(answer.body.action).not.toBe('live_dispatch');
    expect(JSON.stringify(answer.body)).toContain('the run was canceled before the worker accepted it');

    // The dispatch call had ended (aborted by the cancel) before the workflow asked the gate to stop the run.
    const gaveUpAt = held.callerGaveUpAt();
    expect(gaveUpAt, 'the dispatch call was aborted').not.toBeNull();
    expect(gaveUpAt!).toBeLessThanOrEqual(slowGate.cancelArrivedAt.get(runId)!);

    // Now the dispatch reaches the gate, after the gate was asked to stop the run.
    const delivered = await held.release();
    expect(delivered.status).toBe(409);
    expect(delivered.body.detail).toMatch(new RegExp(`^run '${runId}' was cancelled at .+, before its dispatch reached this gate; it is not started$`));

    // Nothing started, and nothing will: the dispatch script never ran, the gate tracks no run, the ledger has it canceled.
    await new Promise((resolve) => setTimeout(resolve, 2_000));
    expect(await dispatchCount(stack.gateFixture, runId)).toBe(0);
    expect(await stack.gateApi.runView(runId)).toBeUndefined();
    expect((await runRow(runId))!.state).toBe('canceled');
    expect(await queueItem('race-late-dispatch')).toMatchObject({ status: 'canceled', current_run_id: runId });
    const lanes = await api('GET', '/control/api/v1/lanes');
    expect(lanes.body.lanes.find((lane: { lane: string }) => lane.lane === 'slow')).toMatchObject({ idle: true });
    const events = (await stack.gateApi.dashboard()).body.events as { kind: string; run_id: string | null }[];
    expect(events.filter((event) => event.run_id === runId).map((event) => event.kind).reverse()).toEqual(['project_prepared', 'cancelled_before_dispatch', 'dispatch_refused']);

    const history = await fetchRunHistory(workflowIdForRun(runId));
    expect(patchMarkers(history)).toContain(RUN_PATCHES.dispatchAwaitsCancel);
    maybeSaveHistory(`run-canceled-during-dispatch.${NEWEST_RUN_PATCH}`, history);
  });

  it('a gate that cannot prove who it is for a moment (503) is asked again, and the run is dispatched', { timeout: 90_000 }, async () => {
    await stack.seed('identity-503', { projectName: 'Identity 503', lane: 'slow', scenario: { scenario: 'slow', work_sec: 60 } });
    // The preflight's proof passes; the prepare's first one meets a restarting gate, and its retry passes.
    slowGate.answerNextIdentities([null, 503]);
    const dispatchAnswer = api('POST', '/control/dispatch-next', { requested_by: 'identity-test', dry_run: false });
    const held = await slowGate.dispatchHeld();
    expect((await held.release()).status).toBe(200);
    const answer = await dispatchAnswer;
    expect(answer.body.action, JSON.stringify(answer.body)).toBe('live_dispatch');
    expect(slowGate.identityFailed).toBe(1);
    const canceled = await api('POST', `/control/api/runs/${answer.body.run_id}/cancel`, { requested_by: 'identity-test', reason: 'the test is done with it' });
    expect(canceled.status).toBe(200);
  });

  it('keeps refusing that dispatch after the gate restarts', { timeout: 90_000 }, async () => {
    const { runId, held, dispatchAnswer } = await cancelDuringDispatch('race-gate-restart');
    expect(JSON.stringify((await dispatchAnswer).body)).toContain('the run was canceled before the worker accepted it');

    await stack.gate.kill('SIGTERM');
    await stack.restartGate();
    await waitUntil('the restarted gate to answer', async () => ((await fetch(`${stack.gateFixture.url}/healthz`).catch(() => null))?.ok ? true : undefined), 30_000);

    const delivered = await held.release();
    expect(delivered.status).toBe(409);
    expect(delivered.body.detail).toContain('before its dispatch reached this gate');
    expect(await dispatchCount(stack.gateFixture, runId)).toBe(0);
  });
});
