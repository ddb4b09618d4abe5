import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { pinnedAgentBinary } from '../../worker-gate/launchers/installed-agents.ts';
import { ResponsesServer } from '../../scripts/scripted-model-servers.ts';
import { AGENT_DISPATCH_TIMEOUT_SEC, WRITE_EVIDENCE } from '../support/agent-gates.ts';
import { CONTROL_TOKEN, waitUntil } from '../support/gate.ts';
import { testPort } from '../support/ports.ts';
import { gateTarget, ledgerReads, RUN_STACK_START_MS, startRunStack, type RunStack } from '../support/run-stack.ts';

/**
 * The operator answers the agent (docs/runs.md#answering-the-agent), through the whole product: a control plane, its
 * Temporal worker and a worker gate. The fake agent asks, is answered through the API (twice, a second question in
 * the same run) and through `rcp`, and finishes; then a real Codex asks the scripted model's question, and the answer
 * reaches the model in the resumed session's next request. A session that ends without its evidence is continued once,
 * and the run records it. Runs whose model refused for a usage limit wait it out: one resumes by itself at its time,
 * keeping its lane; others, whose long waits let their lanes go, are resumed early through the API and `rcp` (taking
 * their lanes back), or canceled while they wait; and a real Codex's usage limit is waited out at the time it names.
 */

// expected duration: ~220 s

const WAIT_MS = 120_000;
/** One lane per usage-limit run, so that they wait side by side. */
const LIMIT_LANES = ['limit-self', 'limit-api', 'limit-rcp', 'limit-cancel'];
const RCP = fileURLToPath(new URL('../../bin/rcp.js', import.meta.url));

let stack: RunStack;
let responses: ResponsesServer;
const { queueItem, count } = ledgerReads(() => stack.store);

beforeAll(async () => {
  if (!existsSync(pinnedAgentBinary('codex'))) throw new Error(`codex is not installed at ${pinnedAgentBinary('codex')}: run bash scripts/ensure-agents.sh (npm test's pretest does)`);
  responses = await ResponsesServer.start(await testPort());
  stack = await startRunStack({
    defaultLane: false,
    gateOverrides: {
      // The fake agent serves every class but training, which a real Codex serves.
      agent_runtime_by_workload_class: { training: 'codex' },
      workload_profiles: { training: { idle_sustain_sec: 30, cpu_idle_threshold_pct: 100, gpu_idle_avg_threshold_pct: 100, gpu_idle_peak_threshold_pct: 100, vram_delta_threshold_mib: 1_000_000 } },
      dispatch_timeout_sec: AGENT_DISPATCH_TIMEOUT_SEC,
      agent_continue_limit: 1,
      // A usage-limit wait over a minute lets its lane go.
      usage_limit_hold_sec: 60,
    },
    gateEnv: { OPENAI_BASE_URL: responses.baseUrl, OPENAI_API_KEY: 'sk-scripted-0123456789' },
    controlPlaneOverrides: (gate) => ({ dispatch_timeout_sec: AGENT_DISPATCH_TIMEOUT_SEC,
      worker_targets: Object.fromEntries(['answers-fake', 'answers-codex', 'answers-premature', ...LIMIT_LANES].map((lane) => [lane, gateTarget(gate)])),
    }),
  });
}, RUN_STACK_START_MS);

afterAll(async () => {
  await stack?.close();
  await responses?.down();
});

const runDetail = async (runId: string) => (await stack.api('GET', `/control/api/v1/runs/${runId}`)).body;
const answer = (runId: string, body: Record<string, unknown>) => stack.api('POST', `/control/api/v1/runs/${runId}/answer`, { requested_by: 'answers-test', ...body });

async function dispatchLive(projectId: string): Promise<string> {
  const live = await stack.api('POST', '/control/dispatch-next', { dry_run: false, requested_by: 'answers-test', idempotency_key: `dispatch-${projectId}` });
  expect(live.body, JSON.stringify(live.body)).toMatchObject({ action: 'live_dispatch', candidate: { project_id: projectId } });
  return live.body.run_id as string;
}

/** Waits for the run's agent to ask its n-th question, and answers the run's detail then. */
async function nthQuestion(runId: string, n: number) {
  return waitUntil(
    `question ${n} of ${runId}`,
    async () => {
      const detail = await runDetail(runId);
      const asked = detail.run.transitions.filter((row: { transition: string }) => row.transition === 'question_asked').length;
      return detail.run.state === 'question_pending' && asked === n ? detail : undefined;
    },
    WAIT_MS,
    250,
  );
}

async function rcp(...args: string[]): Promise<string> {
  const { stdout } = await promisify(execFile)(process.execPath, [RCP, ...args], { env: { ...process.env, RCP_URL: stack.cpFixture.url, RCP_TOKEN: CONTROL_TOKEN } });
  return stdout;
}

describe('the operator answers the agent', () => {
  it('answers two questions of one run, through the API and rcp: the same session resumes each time, on its lane, and the run completes', { timeout: 3 * WAIT_MS }, async () => {
    await stack.seed('ask-fake', { projectName: 'Answers [ask-fake]', lane: 'answers-fake', scenario: { scenario: 'question', decision: 'finalize_positive' } });
    const runId = await dispatchLive('ask-fake');

    const asked = await nthQuestion(runId, 1);
    expect(asked.run.question).toBe('Which dataset split should the final evaluation use?');
    expect(asked.run.question_detail).toEqual({
      kind: 'question',
      questions: [{ header: 'Question', question: 'Which dataset split should the final evaluation use?', options: [{ label: 'Yes', description: null }, { label: 'No', description: null }] }],
    });
    expect(asked.finished).toBe(false);
    // The run keeps its lane while it waits: the item stays in flight, flagged for a person.
    expect(await queueItem('ask-fake')).toMatchObject({ status: 'running', manual_review_required: true, current_run_id: runId });
    const lane = (await stack.api('GET', '/control/api/v1/lanes')).body.lanes.find((entry: { lane: string }) => entry.lane === 'answers-fake');
    expect(lane).toMatchObject({ idle: false, active: { run: { run_id: runId, state: 'question_pending' } } });
    expect(await rcp('runs', 'question', runId)).toContain('Which dataset split should the final evaluation use?\n    - Yes\n    - No');
    const overview = (await stack.api('GET', '/control/api/v1/overview')).body;
    expect(overview.actionable_items).toContainEqual(expect.objectContaining({ project_id: 'ask-fake', reason: 'agent_question', question: 'Which dataset split should the final evaluation use?' }));

    // Answers that do not fit the question are refused, and change nothing.
    const unknownChoice = await answer(runId, { idempotency_key: 'k-bad-choice', choice: 'Maybe' });
    expect(unknownChoice.status).toBe(422);
    expect(JSON.stringify(unknownChoice.body)).toContain('choice must be one of the question\'s options: \\"Yes\\", \\"No\\"');
    expect((await answer(runId, { idempotency_key: 'k-permission', permission: 'allow_once' })).status).toBe(422);
    expect((await answer(runId, { idempotency_key: 'k-two-kinds', answer: 'the 2024 split', choice: 'Yes' })).status).toBe(422);
    expect((await answer(runId, { answer: 'no key' })).status).toBe(422);

    const first = await answer(runId, { idempotency_key: 'k-first', answer: 'Use the 2024 split, and ask again if unsure.' });
    expect(first.status, JSON.stringify(first.body)).toBe(200);
    expect(first.body).toMatchObject({ ok: true, run_id: runId, answer_number: 1, replayed: false, allowed_tools: [] });
    expect(first.body.prompt).toContain('Answer: Use the 2024 split, and ask again if unsure.');
    // The same key and answer again: the first result; the same key with another answer: 409.
    expect((await answer(runId, { idempotency_key: 'k-first', answer: 'Use the 2024 split, and ask again if unsure.' })).body).toMatchObject({ answer_number: 1, replayed: true });
    expect((await answer(runId, { idempotency_key: 'k-first', answer: 'Use the 2023 split.' })).status).toBe(409);

    // The resumed session asks again: a second question in the same run.
    const second = await nthQuestion(runId, 2);
    expect(second.run.question).toBe('Should the 2023 split be reported as well?');
    expect(second.answers).toHaveLength(1);
    expect(await rcp('runs', 'answer', runId, '--choice', 'Yes')).toContain(`${runId}: answer 2 sent`);

    await waitUntil('the run to complete', async () => ((await queueItem('ask-fake')).status === 'completed' ? true : undefined), WAIT_MS, 500);
    const done = await runDetail(runId);
    expect(done.run).toMatchObject({ state: 'reconciled', decision: 'finalize_positive', question: null, question_detail: null });
    expect(done.answers.map((given: { answer_number: number; answer: unknown }) => [given.answer_number, given.answer])).toEqual([
      [1, { kind: 'text', text: 'Use the 2024 split, and ask again if unsure.' }],
      [2, { kind: 'choice', choice: 'Yes' }],
    ]);
    const transitions = done.run.transitions.map((row: { transition: string }) => row.transition);
    expect(transitions).toEqual(['claimed', 'prepared', 'worker_accepted', 'session_started', 'question_asked', 'answered', 'question_asked', 'answered', 'wake_received', 'reconciling', 'completed']);
    expect(await count("SELECT 1 FROM audit_events WHERE entity_id = $1 AND event_type = 'run.answer_given'", [runId])).toBe(2);
    // One run on the gate, resumed twice with the answers.
    const onGate = await stack.gateApi.runView(runId);
    expect(onGate?.resumes?.map((resume: { resume_id: string }) => resume.resume_id)).toEqual(['answer-1', 'answer-2']);

    // An answer to a finished run: 409 naming its state.
    const late = await answer(runId, { idempotency_key: 'k-late', answer: 'too late' });
    expect(late.status).toBe(409);
    expect(JSON.stringify(late.body)).toContain(`run '${runId}' is reconciled: its agent waits on no question`);
  });

  it("answers a real Codex's question: the model sees the answer in the resumed session's next request, and the run completes", { timeout: 2 * WAIT_MS }, async () => {
    const key = 'ask-codex';
    responses.script(key, [
      { kind: 'question', question: 'Which dataset should I use?' },
      { kind: 'message', text: 'I will wait for the answer.' },
      { kind: 'command', cmd: WRITE_EVIDENCE },
      { kind: 'message', text: 'Done with the dataset I was given.' },
    ]);
    await stack.seed(key, { projectName: `Answers [${key}]`, lane: 'answers-codex', scenario: {}, item: { workload_class: 'training' } });
    const runId = await dispatchLive(key);
    const asked = await nthQuestion(runId, 1);
    expect(asked.run.question_detail).toMatchObject({ kind: 'question', questions: [{ question: 'Which dataset should I use?', options: [{ label: 'Yes' }, { label: 'No' }] }] });
    // The refused call ends the agent's turn: one more request, whose answer is its last message.
    await waitUntil('the refused turn to end', () => responses.requestsOf(key)[1], WAIT_MS, 50);
    expect(JSON.stringify(responses.requestsOf(key)[1]!.body.input)).toContain('Tool call blocked by PreToolUse hook: The operator has been asked and will answer in your next message.');
    const before = responses.requestsOf(key).length;

    const sentAt = Date.now();
    const given = await answer(runId, { idempotency_key: 'k-codex', answer: 'Use the CIFAR-10 test split.' });
    expect(given.status, JSON.stringify(given.body)).toBe(200);
    const next = await waitUntil('the resumed session to ask the model', () => responses.requestsOf(key)[before], WAIT_MS, 50);
    console.log(`codex: ${next.at - sentAt} ms from the answer to the resumed session's next model request`);
    const conversation = JSON.stringify(next.body.input);
    expect(conversation).toContain('Use the CIFAR-10 test split.');
    // The same session: the question the model asked before is in the conversation.
    expect(conversation).toContain('Which dataset should I use?');

    await waitUntil('the Codex run to complete', async () => ((await queueItem(key)).status === 'completed' ? true : undefined), WAIT_MS, 500);
    expect((await runDetail(runId)).run).toMatchObject({ state: 'reconciled', decision: 'finalize_positive' });
  });

  it("waits out a real Codex's usage limit: the run resumes by itself at the time Codex names, in the same conversation, and completes", { timeout: 2 * WAIT_MS }, async () => {
    const key = 'limit-codex';
    responses.script(key, [
      { kind: 'command', cmd: 'echo first half done' },
      { kind: 'limit', resetSec: 3 },
      { kind: 'command', cmd: WRITE_EVIDENCE },
      { kind: 'message', text: 'Finished after the limit reset.' },
    ]);
    await stack.seed(key, { projectName: `Answers [${key}]`, lane: 'answers-codex', scenario: {}, item: { workload_class: 'training' } });
    const runId = await dispatchLive(key);
    const limited = await waitUntil('the run to wait out the usage limit', async () => {
      const detail = await runDetail(runId);
      return detail.run.state === 'usage_limited' ? detail : undefined;
    }, WAIT_MS, 250);
    // Codex names the reset to the minute; the run resumes a few seconds past it, within about a minute.
    expect(limited.run.usage_limit.resets_at).not.toBeNull();
    const resumesAt = Date.parse(limited.run.usage_limit.resumes_at);
    expect(resumesAt - Date.now()).toBeLessThan(70_000);
    const next = await waitUntil('the resumed session to ask the model', () => responses.requestsOf(key).find((request) => JSON.stringify(request.body.input).includes('usage limit that stopped your session')), WAIT_MS, 50);
    expect(next.at).toBeGreaterThanOrEqual(resumesAt - 1_000);
    console.log(`codex: the resumed session's first model request came ${next.at - resumesAt} ms after the run's resume time`);
    expect(JSON.stringify(next.body.input)).toContain('first half done');
    await waitUntil('the Codex run to complete', async () => ((await queueItem(key)).status === 'completed' ? true : undefined), WAIT_MS, 500);
    expect((await runDetail(runId)).run).toMatchObject({ state: 'reconciled', decision: 'finalize_positive', usage_limit: null });
  });

  it('records the continuation of a session that ended without its evidence, and completes on the continued session', { timeout: 2 * WAIT_MS }, async () => {
    await stack.seed('stop-early', { projectName: 'Answers [stop-early]', lane: 'answers-premature', scenario: { scenario: 'premature', decision: 'finalize_positive' } });
    const runId = await dispatchLive('stop-early');
    await waitUntil('the run to complete', async () => ((await queueItem('stop-early')).status === 'completed' ? true : undefined), 2 * WAIT_MS - 10_000, 500);
    const detail = await runDetail(runId);
    expect(detail.run).toMatchObject({ state: 'reconciled', decision: 'finalize_positive' });
    expect(detail.run.transitions.map((row: { transition: string }) => row.transition)).toContain('continued');
    const continued = detail.events.find((event: { event_type: string }) => event.event_type === 'run.continued');
    expect(continued?.payload.reason).toContain('`.research/decision.json`');
  });

  it('waits out usage limits: a short wait keeps its lane and resumes by itself at its time; long ones let it go, and are resumed early through the API and rcp or canceled', { timeout: 3 * WAIT_MS }, async () => {
    const runs: Record<string, string> = {};
    for (const lane of LIMIT_LANES) {
      const scenario = lane === 'limit-self' ? 'usage-limit' : 'usage-limit-long';
      await stack.seed(lane, { projectName: `Usage limit [${lane}]`, lane, scenario: { scenario, decision: 'finalize_positive' } });
      runs[lane] = await dispatchLive(lane);
    }
    const limited = async (lane: string) =>
      waitUntil(`${lane} to wait out its usage limit`, async () => {
        const detail = await runDetail(runs[lane]!);
        return detail.run.state === 'usage_limited' ? detail : undefined;
      }, WAIT_MS, 250);

    // Waiting, the run says when it resumes, keeps its lane, and its queue item says why it waits.
    const self = await limited('limit-self');
    const resumesAt = Date.parse(self.run.usage_limit.resumes_at);
    expect(resumesAt - Date.now()).toBeLessThan(15_000);
    expect(self.finished).toBe(false);
    expect(await queueItem('limit-self')).toMatchObject({ status: 'running', manual_review_required: false, last_run_state: 'usage_limited' });
    expect((await queueItem('limit-self')).next_action_hint).toContain(`resumes by itself at ${self.run.usage_limit.resumes_at}`);
    const lane = (await stack.api('GET', '/control/api/v1/lanes')).body.lanes.find((entry: { lane: string }) => entry.lane === 'limit-self');
    expect(lane).toMatchObject({ idle: false, active: { run: { run_id: runs['limit-self'], state: 'usage_limited' } } });

    // Resumed early through the API: the same key again gets the first result; with another payload, 409.
    const apiRun = runs['limit-api']!;
    const long = await limited('limit-api');
    expect(Date.parse(long.run.usage_limit.resumes_at) - Date.now()).toBeGreaterThan(3_000_000);
    // An hour's wait lets the lane go: the item is usage_limited, and the lane idle for other items.
    expect(long.run.usage_limit.holds_slot).toBe(false);
    expect(await queueItem('limit-api')).toMatchObject({ status: 'usage_limited', current_run_id: apiRun });
    const freed = (await stack.api('GET', '/control/api/v1/lanes')).body.lanes.find((entry: { lane: string }) => entry.lane === 'limit-api');
    expect(freed).toMatchObject({ idle: true });
    const resume = (body: Record<string, unknown>) => stack.api('POST', `/control/api/v1/runs/${apiRun}/resume`, { requested_by: 'limits-test', ...body });
    expect((await resume({})).status).toBe(422);
    const first = await resume({ idempotency_key: 'k-resume', note: 'the plan was upgraded' });
    expect(first.status, JSON.stringify(first.body)).toBe(200);
    expect(first.body).toMatchObject({ ok: true, run_id: apiRun, limit_number: 1, resumes_at: long.run.usage_limit.resumes_at, replayed: false });
    expect((await resume({ idempotency_key: 'k-resume', note: 'the plan was upgraded' })).body).toMatchObject({ limit_number: 1, replayed: true });
    expect((await resume({ idempotency_key: 'k-resume', note: 'another reason' })).status).toBe(409);

    const rcpRun = runs['limit-rcp']!;
    await limited('limit-rcp');
    expect(await rcp('runs', 'resume', rcpRun)).toContain(`${rcpRun}: resuming now (usage limit 1;`);

    // Canceled while it waits: the run ends, its lane is free, and its agent's session never resumes.
    const cancelRun = runs['limit-cancel']!;
    await limited('limit-cancel');
    const canceled = await stack.api('POST', `/control/api/runs/${cancelRun}/cancel`, { requested_by: 'limits-test' });
    expect(canceled.status, JSON.stringify(canceled.body)).toBe(200);
    expect(canceled.body).toMatchObject({ state: 'canceled', queue_status: 'canceled' });
    expect((await stack.gateApi.runView(cancelRun))?.gate_state).toBe('cancelled');

    for (const project of ['limit-self', 'limit-api', 'limit-rcp']) {
      await waitUntil(`${project} to complete`, async () => ((await queueItem(project)).status === 'completed' ? true : undefined), WAIT_MS, 500);
      const done = await runDetail(runs[project]!);
      expect(done.run).toMatchObject({ state: 'reconciled', decision: 'finalize_positive', usage_limit: null });
      expect(done.run.transitions.map((row: { transition: string }) => row.transition)).toEqual(['claimed', 'prepared', 'worker_accepted', 'session_started', 'usage_limited', 'limit_resumed', 'wake_received', 'reconciling', 'completed']);
      expect((await stack.gateApi.runView(runs[project]!))?.resumes?.map((resume: { resume_id: string }) => resume.resume_id)).toEqual(['limit-1']);
    }
    // The runs that let their lane go took it back before they resumed.
    expect(await count("SELECT 1 FROM audit_events WHERE event_type = 'run.lane_retaken' AND entity_id = ANY ($1::text[])", [[apiRun, rcpRun]])).toBe(2);
    // The self-resumed run waited for its time; the others did not.
    const resumedAt = (detail: Record<string, any>) => Date.parse(detail.run.transitions.find((row: { transition: string }) => row.transition === 'limit_resumed').created_at);
    expect(resumedAt(await runDetail(runs['limit-self']!))).toBeGreaterThanOrEqual(resumesAt - 1_000);
    const early = await runDetail(apiRun);
    expect(early.events.find((event: { event_type: string }) => event.event_type === 'run.resume_requested')?.payload).toMatchObject({ limit_number: 1, note: 'the plan was upgraded' });
    expect(early.events.find((event: { event_type: string }) => event.event_type === 'run.limit_resumed')?.payload).toMatchObject({ resumed_early_by: 'limits-test' });

    // Nothing to resume on a finished run: 409 naming its state.
    const late = await stack.api('POST', `/control/api/v1/runs/${apiRun}/resume`, { requested_by: 'limits-test', idempotency_key: 'k-late' });
    expect(late.status).toBe(409);
    expect(JSON.stringify(late.body)).toContain(`run '${apiRun}' is reconciled: it waits out no usage limit`);
    expect(await count("SELECT 1 FROM audit_events WHERE entity_id = $1 AND event_type = 'run.resume_requested'", [rcpRun])).toBe(1);
  });
});
