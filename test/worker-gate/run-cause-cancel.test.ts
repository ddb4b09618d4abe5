import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { insertProject } from '../../capabilities/runs/projects.ts';
import { applyRunTransition } from '../../capabilities/runs/run-ledger.ts';
import { CONTROL_TOKEN, waitUntil } from '../support/gate.ts';
import { isProcessRunning } from '../support/process.ts';
import { RUN_STACK_START_MS, startRunStack, type ControlApi, type RunStack } from '../support/run-stack.ts';

// expected duration: ~40 s

/**
 * Causes and late cancels through real processes: a control plane (HTTP + Temporal worker) and a worker gate running
 * the fake agent. Why a run ended travels with the gate's finishing callback to the run detail, the run list and the
 * audit event of the run's end; a cancel of a run that has finished here still reaches the gate, which stops what it
 * still tracks of the run.
 */

const STALL_SEC = 4;
const RUN_MS = 60_000;

const RCP = fileURLToPath(new URL('../../bin/rcp.js', import.meta.url));
/** `rcp args` as an operator runs it against the stack's control plane; answers its output. */
const rcp = async (args: string[]) =>
  (await promisify(execFile)(process.execPath, [RCP, ...args], { env: { ...process.env, RCP_URL: stack.cpFixture.url, RCP_TOKEN: CONTROL_TOKEN }, timeout: 60_000 })).stdout;

let stack: RunStack;
let api: ControlApi;

beforeAll(async () => {
  stack = await startRunStack({ gateOverrides: { workload_profiles: { unknown: { stall_after_sec: STALL_SEC } } } });
  ({ api } = stack);
}, RUN_STACK_START_MS);

afterAll(() => stack?.close());

/** Seeds the project on the default lane and dispatches it live; answers the run id. */
async function dispatched(projectId: string, scenario: string): Promise<string> {
  await stack.seed(projectId, { projectName: `Cause ${projectId}`, scenario: { scenario } });
  const live = await api('POST', '/control/dispatch-next', { dry_run: false, requested_by: 'cause-test' });
  expect(live.status, JSON.stringify(live.body)).toBe(200);
  expect(live.body).toMatchObject({ action: 'live_dispatch', candidate: { project_id: projectId } });
  stack.agents.remember(live.body);
  return live.body.run_id as string;
}

const detailOf = async (runId: string) => (await api('GET', `/control/api/v1/runs/${runId}`)).body;
const ended = (runId: string, state: string) =>
  waitUntil(`run ${runId} in ${state}`, async () => {
    const detail = await detailOf(runId);
    return detail.run.state === state ? detail : undefined;
  }, RUN_MS, 300);


describe('why a run ended, and a cancel after its end', () => {
  it('a stalled agent: the run ends in gate_error and the cause (stall) shows in the run detail, the run list and the audit event', { timeout: RUN_MS + 30_000 }, async () => {
    const runId = await dispatched('cause-stall', 'hold');
    const detail = await ended(runId, 'gate_error');
    expect(detail.run.last_error).toMatch(new RegExp(`stalled: no model answer, tool event or usage change for ${STALL_SEC} s`));
    expect(detail.run.cause).toMatchObject({ kind: 'stall', message: expect.stringMatching(/^stalled: /) });

    const list = await api('GET', '/control/api/v1/runs?project=cause-stall');
    expect(list.body.items[0]).toMatchObject({ run_id: runId, cause: { kind: 'stall' } });

    const events = await api('GET', `/control/api/v1/events?entity_id=${runId}&page_size=50`);
    const end = (events.body.items as { event_type: string; payload: Record<string, any> }[]).find((event) => event.event_type === 'run.gate_error');
    expect(end?.payload.cause).toMatchObject({ kind: 'stall' });

    const [header, row] = (await rcp(['runs', '--project', 'cause-stall'])).trim().split('\n');
    expect(header).toMatch(/ CAUSE /);
    expect(row).toMatch(new RegExp(`^${runId} .* stall `));
  });

  it('a run the control plane gave up on while its agent still runs: cancel answers already finished, and the gate stops the agent', { timeout: RUN_MS + 30_000 }, async () => {
    const runId = await dispatched('cause-late', 'hold');
    await waitUntil('the agent to start', async () => ((await detailOf(runId)).callbacks.length > 0 ? true : undefined), RUN_MS, 300);
    const agentPid = (await stack.gateApi.runView(runId))?.root_pid as number;
    expect(isProcessRunning(agentPid)).toBe(true);
    // What the run workflow records when no finishing callback came within max_wait_after_idle_sec plus its margin
    // (hours in production), applied here at once: the run is over here, its agent is not, on the worker.
    await stack.store.transaction((tx) => applyRunTransition(tx, { run_id: runId, transition: 'completion_timeout', detail: { last_error: 'no finishing callback (test)' } }));
    expect((await detailOf(runId)).finished).toBe(true);

    // An operator cancels it with rcp: the control plane asks the gate, which stops the agent.
    expect(await rcp(['cancel', runId])).toMatch(new RegExp(`^${runId}: already finished \\(gate_timeout\\); its worker gate stopped \\d+ process(es)? still running\n$`));
    expect(isProcessRunning(agentPid)).toBe(false);
    const events = await api('GET', `/control/api/v1/events?entity_id=${runId}&page_size=50`);
    const stopped = (events.body.items as { event_type: string; payload: Record<string, any> }[]).find((event) => event.event_type === 'run.worker_processes_stopped');
    expect(stopped?.payload.stopped).toEqual(expect.arrayContaining([{ pid: agentPid, outcome: 'killed' }]));

    // Asked again, the gate still tracks the run and has nothing left to stop.
    const again = await api('POST', `/control/api/runs/${runId}/cancel`, { requested_by: 'cause-test' });
    expect(again.status, JSON.stringify(again.body)).toBe(200);
    expect(again.body).toMatchObject({ already_finished: true, state: 'gate_timeout', gate: { tracked: true, stopped: [] } });
  });

  it('a finished run the worker gate never saw: the gate answers 404, and cancel still answers already finished', { timeout: 30_000 }, async () => {
    const runId = 'cause-unseen-20260101T000000Z';
    await stack.store.transaction((tx) => insertProject(tx, { project_id: 'cause-unseen', project_name: 'Cause unseen', project_dir: 'cause-unseen', workload_class: 'unknown', machine_target: null }));
    await stack.store.query(
      `INSERT INTO runs (run_id, project_id, workflow_id, state, lane, wake_gate_url, workload_class, requested_by)
       VALUES ($1, 'cause-unseen', $2, 'gate_timeout', 'default', $3, 'unknown', 'cause-test')`,
      [runId, `run:${runId}`, stack.gateFixture.url],
    );
    const cancel = await api('POST', `/control/api/runs/${runId}/cancel`, { requested_by: 'cause-test' });
    expect(cancel.status, JSON.stringify(cancel.body)).toBe(200);
    expect(cancel.body).toMatchObject({ already_finished: true, gate: { tracked: false, stopped: [] } });
    expect(cancel.body.gate.problem).toBeUndefined();
  });

  it('an agent that exits non-zero: the cause says crash with its exit status', { timeout: RUN_MS + 30_000 }, async () => {
    const runId = await dispatched('cause-crash', 'agent-fails');
    const detail = await ended(runId, 'gate_error');
    expect(detail.run.cause).toEqual({ kind: 'crash', exit_code: 3 });
  });
});
