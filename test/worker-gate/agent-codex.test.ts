import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { readFile, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { pinnedAgentBinary } from '../../worker-gate/launchers/installed-agents.ts';
import { agentRecord, dispatchedRun, leaveLingeringProcess, preparedRun, sessionRecord, startAgentGate, WRITE_EVIDENCE, type AgentGate } from '../support/agent-gates.ts';
import { CallbackReceiver, waitUntil } from '../support/gate.ts';
import { ResponsesServer } from '../../scripts/scripted-model-servers.ts';
import { testPort } from '../support/ports.ts';
import { USAGE_LIMIT_RESUME_PROMPT } from '../../worker-gate/contract/usage-limit.ts';

/**
 * Codex CLI, the real binary (scripts/ensure-agents.sh), under a real gate process with agent_runtime "codex", against
 * a scripted Responses server: the launcher, the lifecycle hooks, the quiet window and the callbacks, end to end. The
 * scenarios run at once, each its own project and conversation (the prompt holds the key the model server scripts).
 */

// expected duration: ~90 s

// The quiet window needs idle_sustain_sec (min 30) of samples after the agent's processes exited.
const WINDOW_MS = 90_000;
const API_KEY = 'sk-scripted-model-key-0123456789';
/** A secret of the gate's environment that agent_credential_env does not name: no agent may see it. */
const UNRELATED_SECRET = 'lab-database-password-0123456789';

let receiver: CallbackReceiver;
let model: ResponsesServer;
let gate: AgentGate;
/** A second gate whose model server is down: nothing listens at its base URL. */
let gateWithoutModel: AgentGate;
/** A gate that continues a session ending without its evidence once (agent_continue_limit 1). */
let continuingGate: AgentGate;

const startCodexGate = (baseUrl: string, overrides: Record<string, unknown> = {}) =>
  startAgentGate(receiver, 'codex', { OPENAI_BASE_URL: baseUrl, OPENAI_API_KEY: API_KEY, LAB_DB_PASSWORD: UNRELATED_SECRET }, overrides);

beforeAll(async () => {
  if (!existsSync(pinnedAgentBinary('codex'))) {
    throw new Error(`Codex CLI is not installed at ${pinnedAgentBinary('codex')}: run bash scripts/ensure-agents.sh (npm test's pretest does)`);
  }
  receiver = await CallbackReceiver.start();
  model = await ResponsesServer.start(await testPort());
  [gate, gateWithoutModel, continuingGate] = await Promise.all([
    startCodexGate(model.baseUrl),
    startCodexGate(`http://127.0.0.1:${await testPort()}/v1`),
    startCodexGate(model.baseUrl, { agent_continue_limit: 1 }),
  ]);
}, 60_000);

afterAll(async () => {
  await Promise.all([gate, gateWithoutModel, continuingGate].map((started) => started?.process.kill('SIGTERM')));
  await receiver?.down();
  await model?.down();
  for (const started of [gate, gateWithoutModel, continuingGate]) if (started) await rm(started.fixture.dir, { recursive: true, force: true });
});

const prepared = (on: AgentGate, key: string, n = 1, prompt?: string) => preparedRun(on, key, { n, sandbox: 'workspace-write', ...(prompt ? { prompt } : {}) });
const dispatched = dispatchedRun;
const callbackTypes = (runId: string) => receiver.deliveredForRun(runId).map((callback) => callback.body.event_type);
/** The project's session record once the run's session of that mode has ended and written it; undefined before. */
const sessionRecordOf = async (key: string, runId: string, mode: 'exec' | 'resume') => {
  const record = await sessionRecord(gate, key).catch(() => undefined);
  return record?.run_id === runId && record.mode === mode ? record : undefined;
};

describe.concurrent('Codex CLI under the gate', () => {
  it('(a) writes its evidence with its own tools and ends: the run completes with its decision, and its session is recorded', { timeout: WINDOW_MS + 30_000 }, async () => {
    model.script('codex-a', [{ kind: 'command', cmd: `${WRITE_EVIDENCE} && env > agent-env.txt` }, { kind: 'message', text: 'The experiment is done.' }]);
    const runId = await dispatched(gate, await prepared(gate, 'codex-a'));

    const finished = await receiver.waitFor(runId, 'session_finished_ready', WINDOW_MS);
    expect(finished.body.evidence).toMatchObject({ run_notes: true, decision_file: true, decision: 'finalize_positive', results_json_files: 1, sufficient_for_paper: true });
    expect(callbackTypes(runId)).toEqual(['session_started', 'session_finished_ready']);

    const record = await sessionRecord(gate, 'codex-a');
    expect(record).toMatchObject({ runtime: 'codex', mode: 'exec', exit_code: 0, last_message: 'The experiment is done.', token_usage: { input_tokens: 200, output_tokens: 20, total_tokens: 220 } });
    expect(record.session_id).toMatch(/^[0-9a-f-]{36}$/);
    const events = await agentRecord(gate, 'codex-a', 'events.jsonl');
    expect(events).toContain('"turn.completed"');
    // The model key reached the model server and the agent, and nothing else: not the agent's records, the gate's log,
    // its dashboard or the callbacks. The gate's other secrets never reached the agent's commands.
    expect(model.requestsOf('codex-a')).toHaveLength(2);
    const dashboard = JSON.stringify((await gate.client.dashboard()).body);
    const callbacks = JSON.stringify(receiver.received.map((callback) => callback.body));
    for (const place of [events, JSON.stringify(record), gate.process.output(), dashboard, callbacks]) expect(place).not.toContain(API_KEY);
    expect(await readFile(join(gate.fixture.projectRoot, 'codex-a', 'agent-env.txt'), 'utf8')).not.toContain(UNRELATED_SECRET);
    expect((await gate.client.runView(runId))?.token_usage).toEqual({ input_tokens: 200, output_tokens: 20, total_tokens: 220 });
    // And it travels with the callback to the control plane's run record.
    expect(finished.body.token_usage).toEqual({ input_tokens: 200, output_tokens: 20, total_tokens: 220 });
    // The run's transcript, pushed beside the callbacks: the command, its output, the answer and the usage, in order.
    const said = receiver.transcriptOf(runId);
    expect(said.map((entry) => entry.seq)).toEqual(said.map((_, index) => index + 1));
    expect(said).toContainEqual(expect.objectContaining({ kind: 'tool_call', tool: 'command_execution', text: expect.stringContaining('mkdir -p results/main .research') }));
    expect(said).toContainEqual(expect.objectContaining({ kind: 'tool_output', tool: 'command_execution', text: expect.stringMatching(/^exit 0\n/) }));
    expect(said).toContainEqual(expect.objectContaining({ kind: 'message', text: 'The experiment is done.' }));
    expect(said).toContainEqual(expect.objectContaining({ kind: 'usage', text: '220 tokens so far (input 200, output 20)' }));
    expect(JSON.stringify(said)).not.toContain(API_KEY);
  });

  it('(b) a second dispatch in resume mode continues the same session', { timeout: 2 * WINDOW_MS + 30_000 }, async () => {
    model.script('codex-b', [{ kind: 'message', text: 'First part done; the number is 4217.' }, { kind: 'message', text: 'Continued from where I was.' }]);
    const first = await dispatched(gate, await prepared(gate, 'codex-b', 1, 'Start the study and remember the number. [codex-b]'));
    await receiver.waitFor(first, 'session_finished_ready', WINDOW_MS);
    const session = (await sessionRecord(gate, 'codex-b')).session_id;

    const second = await dispatched(gate, { ...(await prepared(gate, 'codex-b', 2, 'Go on with the study. [codex-b]')), mode: 'resume' });
    await receiver.waitFor(second, 'session_finished_ready', WINDOW_MS);
    expect(await sessionRecord(gate, 'codex-b')).toMatchObject({ mode: 'resume', session_id: session, exit_code: 0, last_message: 'Continued from where I was.' });
    // The resumed conversation carries the first one: its prompt and the model's answer are in the new request.
    const resumed = JSON.stringify(model.requestsOf('codex-b').at(-1)?.body.input);
    expect(resumed).toContain('Start the study and remember the number.');
    expect(resumed).toContain('the number is 4217');
  });

  it('(c) the model asks the user a question (request_user_input): the run goes to question_pending with it, and a resume answers it in the same session', { timeout: 2 * WINDOW_MS }, async () => {
    model.script('codex-c', [
      { kind: 'question', question: 'Which dataset should I use?' },
      { kind: 'message', text: 'Waiting for the operator.' },
      { kind: 'message', text: 'Used the 2024 split.' },
    ]);
    const runId = await dispatched(gate, await prepared(gate, 'codex-c'));
    // Seconds alone; with every scenario of both agent files at once, the agent's start alone has taken 19 s.
    const asked = await receiver.waitFor(runId, 'question_pending', 60_000);
    expect(asked.body.question).toContain('Which dataset should I use?');
    expect(asked.body.question_detail).toEqual({
      kind: 'question',
      questions: [{ header: 'Question', question: 'Which dataset should I use?', options: [{ label: 'Yes', description: 'go on' }, { label: 'No', description: 'stop' }] }],
    });

    const answer = 'The operator answered your question: use the 2024 split.';
    const resumedAt = Date.now();
    const resumed = await gate.client.resume(runId, { resume_id: 'codex-c-answer-1', prompt: answer });
    expect(resumed.status, JSON.stringify(resumed.body)).toBe(200);
    expect(resumed.body).toMatchObject({ ok: true, run_id: runId, resume_id: 'codex-c-answer-1', already_resumed: false, resumes: 1 });
    // The same resume again answers the first result and starts nothing; the same id with another prompt is refused.
    const again = await gate.client.resume(runId, { resume_id: 'codex-c-answer-1', prompt: answer });
    expect(again.body).toMatchObject({ already_resumed: true, resumes: 1, root_pid: resumed.body.root_pid });
    const otherPrompt = await gate.client.resume(runId, { resume_id: 'codex-c-answer-1', prompt: 'Use the 2023 split.' });
    expect(otherPrompt.status).toBe(409);
    expect(otherPrompt.body.detail).toMatch(/already made with a different prompt/);

    // The asking session refused the question and the agent ended its turn; the resumed one continues that conversation.
    const [, refused] = model.requestsOf('codex-c');
    expect(JSON.stringify(refused?.body.input)).toContain('Tool call blocked by PreToolUse hook');
    const next = await waitUntil('the resumed session to ask the model', () => model.requestsOf('codex-c').find((request) => JSON.stringify(request.body.input).includes(answer)), 60_000);
    console.log(`codex: ${next.at - resumedAt} ms from the resume call to the model's next request`);
    expect(JSON.stringify(next.body.input)).toContain('Which dataset should I use?');

    const finished = await receiver.waitFor(runId, 'session_finished_ready', WINDOW_MS);
    expect(callbackTypes(runId)).toEqual(['session_started', 'question_pending', 'session_finished_ready']);
    // The resumed session's own tokens: one answer (its stream reports the whole thread, the launcher counts its own).
    expect(await sessionRecord(gate, 'codex-c')).toMatchObject({
      mode: 'resume',
      session_id: asked.body.session_id,
      exit_code: 0,
      last_message: 'Used the 2024 split.',
      token_usage: { input_tokens: 100, output_tokens: 10, total_tokens: 110 },
    });
    expect(model.requestsOf('codex-c')).toHaveLength(3);
    const view = await gate.client.runView(runId);
    expect(view?.resumes).toHaveLength(1);
    // Both sessions' tokens: three model answers of 100 input and 10 output tokens each.
    expect(finished.body.token_usage).toEqual({ input_tokens: 300, output_tokens: 30, total_tokens: 330 });

    // A run no longer waiting on an answer is not resumed: the refusal names its state.
    const late = await gate.client.resume(runId, { resume_id: 'codex-c-answer-2', prompt: answer });
    expect(late.status).toBe(409);
    expect(late.body.detail).toMatch(/is finished_ready .*not waiting on an answer/);
  });

  it('(i) ends its session without its evidence ("Let me now explore…"): the gate continues the same session once, naming what is missing, and the run finishes with its evidence', { timeout: 2 * WINDOW_MS + 30_000 }, async () => {
    model.script('codex-i', [
      { kind: 'message', text: 'Let me now explore the data.' },
      { kind: 'command', cmd: WRITE_EVIDENCE },
      { kind: 'message', text: 'The study is written up.' },
    ]);
    const runId = await dispatched(continuingGate, await prepared(continuingGate, 'codex-i'));
    const continued = await receiver.waitFor(runId, 'session_continued', WINDOW_MS);
    expect(continued.body.reason).toContain('`.research/decision.json`');
    const finished = await receiver.waitFor(runId, 'session_finished_ready', WINDOW_MS);
    expect(finished.body.evidence).toMatchObject({ run_notes: true, decision_file: true, decision: 'finalize_positive' });
    expect(callbackTypes(runId)).toEqual(['session_started', 'session_continued', 'session_finished_ready']);
    // The same session went on: the continuation's request carries the first turn, then the prompt naming what is missing.
    const requests = model.requestsOf('codex-i');
    expect(requests).toHaveLength(3);
    const continuation = JSON.stringify(requests[1]!.body.input);
    expect(continuation).toContain('Let me now explore the data.');
    expect(continuation).toContain('Your session ended, but the run is not finished');
    expect(continuation).toContain('`run_notes.md` in the project directory');
    expect((await continuingGate.client.runView(runId))?.resumes?.map((resume: { resume_id: string }) => resume.resume_id)).toEqual(['continue-1']);
  });

  it('(j) the model refuses for a usage limit resetting in a few seconds: the run waits with the reset Codex names, and resumed after it the same session finishes', { timeout: 2 * WINDOW_MS }, async () => {
    model.script('codex-j', [
      { kind: 'command', cmd: 'echo first half done' },
      { kind: 'limit', resetSec: 3 },
      { kind: 'command', cmd: WRITE_EVIDENCE },
      { kind: 'message', text: 'Finished after the limit reset.' },
    ]);
    const runId = await dispatched(gate, await prepared(gate, 'codex-j'));
    const limited = await receiver.waitFor(runId, 'usage_limited', 120_000);
    const cause = limited.body.cause!;
    expect(limited.body.gate_state).toBe('usage_limited');
    expect(cause).toMatchObject({ kind: 'usage_limit', exit_code: 1 });
    expect(cause.message).toMatch(/usage limit/i);
    // Codex names the reset to the minute ("Try again at 4:44 AM"): the gate resumes a few seconds past the time it names.
    const resetsAt = Date.parse(cause.resets_at!);
    const resumesAt = Date.parse(limited.body.resumes_at!);
    expect(Math.abs(resetsAt - Date.now())).toBeLessThan(90_000);
    expect(resumesAt).toBeGreaterThanOrEqual(resetsAt);
    expect((await gate.client.runView(runId))?.usage_limit).toEqual({ resets_at: cause.resets_at, resumes_at: limited.body.resumes_at, holds_slot: true });

    await new Promise((resolve) => setTimeout(resolve, Math.max(0, Math.min(resumesAt, Date.now() + 10_000) - Date.now())));
    const resumedAt = Date.now();
    expect((await gate.client.resume(runId, { resume_id: 'limit-1', prompt: USAGE_LIMIT_RESUME_PROMPT })).status).toBe(200);
    const next = await waitUntil('the resumed request', () => model.requestsOf('codex-j').find((request) => JSON.stringify(request.body.input).includes('usage limit that stopped your session')), 60_000);
    console.log(`codex: ${next.at - resumedAt} ms from the resume after a usage limit to the model's next request`);
    // The same conversation: the first half's command output is in it.
    expect(JSON.stringify(next.body.input)).toContain('first half done');
    await receiver.waitFor(runId, 'session_finished_ready', WINDOW_MS);
    expect(callbackTypes(runId)).toEqual(['session_started', 'usage_limited', 'session_finished_ready']);
  });

  it('(h) a second question after a resume: the run waits on it again, and a second resume answers it', { timeout: 3 * WINDOW_MS }, async () => {
    model.script('codex-h', [
      { kind: 'question', question: 'Which dataset should I use?' },
      { kind: 'message', text: 'Waiting for the operator.' },
      { kind: 'question', question: 'Should the 2023 split be reported too?' },
      { kind: 'message', text: 'Waiting for the operator again.' },
      { kind: 'message', text: 'Reported the 2024 split alone.' },
    ]);
    const runId = await dispatched(gate, await prepared(gate, 'codex-h'));
    const questions = () => receiver.deliveredForRun(runId).filter((callback) => callback.body.event_type === 'question_pending');
    await receiver.waitFor(runId, 'question_pending', 60_000);
    // As when a person answers, the asking session has ended by then: the refused question ended the agent's turn, and
    // Codex with it, as a session that went well.
    expect(await waitUntil('the asking session to end', () => sessionRecordOf('codex-h', runId, 'exec'), 60_000)).toMatchObject({ exit_code: 0 });
    const firstAt = Date.now();
    expect((await gate.client.resume(runId, { resume_id: 'codex-h-1', prompt: 'The operator answered: use the 2024 split.' })).status).toBe(200);

    const second = await waitUntil('the second question', () => questions()[1], 60_000);
    const firstNext = model.requestsOf('codex-h').find((request) => JSON.stringify(request.body.input).includes('use the 2024 split'));
    console.log(`codex: ${firstNext!.at - firstAt} ms from the resume call to the model's next request (the asking session had ended)`);
    expect(second.body.question_detail).toMatchObject({ kind: 'question', questions: [{ question: 'Should the 2023 split be reported too?' }] });
    await waitUntil('the second asking session to end', () => sessionRecordOf('codex-h', runId, 'resume'), 60_000);
    const answer = 'The operator answered your second question: report the 2024 split alone.';
    const secondAt = Date.now();
    const resumed = await gate.client.resume(runId, { resume_id: 'codex-h-2', prompt: answer });
    expect(resumed.body).toMatchObject({ already_resumed: false, resumes: 2 });
    const next = await waitUntil('the model to get the second answer', () => model.requestsOf('codex-h').find((request) => JSON.stringify(request.body.input).includes(answer)), 60_000);
    console.log(`codex: ${next.at - secondAt} ms from the second resume call to the model's next request`);
    // One conversation throughout: the first question and its answer are still in it.
    expect(JSON.stringify(next.body.input)).toContain('use the 2024 split');

    await receiver.waitFor(runId, 'session_finished_ready', WINDOW_MS);
    expect(callbackTypes(runId)).toEqual(['session_started', 'question_pending', 'question_pending', 'session_finished_ready']);
    expect((await gate.client.runView(runId))?.resumes?.map((resume: { resume_id: string }) => resume.resume_id)).toEqual(['codex-h-1', 'codex-h-2']);
    expect(await sessionRecord(gate, 'codex-h')).toMatchObject({ mode: 'resume', exit_code: 0, last_message: 'Reported the 2024 split alone.' });
  });

  it('(d) past its token budget the agent is stopped (SIGINT first), and the run ends in gate_error with the budget reason', { timeout: WINDOW_MS }, async () => {
    // Codex reports usage in its stream only when the turn completes: the launcher reads the session's rollout file,
    // which counts every answer, so the stop comes in the middle of the turn.
    model.script('codex-d', [
      { kind: 'command', cmd: 'echo one', usage: 3_000 },
      ...[2, 3, 4].map((n) => ({ kind: 'command' as const, cmd: `echo ${n}`, delayMs: 3_000 })),
      { kind: 'message', text: 'All steps done.' },
    ]);
    const runId = await dispatched(gate, { ...(await prepared(gate, 'codex-d')), token_budget: 2_000 });
    const failed = await receiver.waitFor(runId, 'gate_error', 60_000);
    expect(failed.body.reason).toMatch(/^token budget exceeded: the agent spent \d+ tokens of its budget of 2000, and the gate stopped it$/);
    expect(failed.body.cause).toMatchObject({ kind: 'token_budget' });
    // The SIGINT reached the tool itself in its sandbox, which ended on it (bwrap, signalled, would have died of it).
    expect(await sessionRecord(gate, 'codex-d')).toMatchObject({ token_budget: 2_000, stopped_over_budget: true, signal: null });
    expect(model.requestsOf('codex-d').length).toBeLessThan(5);
  });

  it('(g) an answer past the budget that asks for a 15 s command: the agent is stopped within 2 s of it, before any further model request', { timeout: WINDOW_MS }, async () => {
    model.script('codex-g', [{ kind: 'command', cmd: 'sleep 15', usage: 50_500 }, { kind: 'message', text: 'Slept.' }]);
    const runId = await dispatched(gate, { ...(await prepared(gate, 'codex-g')), token_budget: 2_000 });
    const failed = await receiver.waitFor(runId, 'gate_error', 60_000);
    expect(failed.body.reason).toBe('token budget exceeded: the agent spent 50510 tokens of its budget of 2000, and the gate stopped it');
    const record = await sessionRecord(gate, 'codex-g');
    expect(record).toMatchObject({ stopped_over_budget: true, signal: null, token_usage: { total_tokens: 50_510 } });
    // The scripted server answers a request at once: the stop is timed from the only request it got. The gate stops
    // the agent within 2 s of it; the agent then ends its session, in far less than the 15 s command would have taken.
    const requests = model.requestsOf('codex-g');
    expect(requests).toHaveLength(1);
    expect(Date.parse(record.budget_stopped_at!) - requests[0]!.at).toBeLessThan(2_000);
    expect(Date.parse(record.ended_at) - requests[0]!.at).toBeLessThan(10_000);
  });

  it('(e) the model server is down: the agent exits non-zero and the run ends in gate_error within seconds', { timeout: WINDOW_MS }, async () => {
    const started = Date.now();
    const runId = await dispatched(gateWithoutModel, await prepared(gateWithoutModel, 'codex-e'));
    // Alone this takes about 4 s; on two cores shared with three other test files it has taken 32 s. A minute still
    // tells the agent's exit apart from any path by a timeout (a quiet window or the wait after idle: 2 min and more),
    // and the reason below names the exit.
    const failed = await receiver.waitFor(runId, 'gate_error', 60_000);
    expect(Date.now() - started).toBeLessThan(60_000);
    expect(failed.body.reason).toMatch(/the agent exited with status 1/);
    // The model's error, without a status: nothing answered.
    expect(failed.body.cause).toMatchObject({ kind: 'model_error', exit_code: 1, message: expect.any(String) });
    expect(failed.body.cause?.model_status).toBeUndefined();
    expect(await sessionRecord(gateWithoutModel, 'codex-e')).toMatchObject({ exit_code: 1, last_error: expect.stringMatching(/connect|error sending request/i) });
  });

  it('(f) a process the agent leaves running ends with the tool (its sandbox has a pid namespace of its own): nothing is left to reap', { timeout: WINDOW_MS + 30_000 }, async () => {
    model.script('codex-f', [
      { kind: 'command', cmd: `${WRITE_EVIDENCE} && ${leaveLingeringProcess('rcp-linger-marker-codex-f')}` },
      { kind: 'message', text: 'Left a helper running.' },
    ]);
    // Codex's workspace-write sandbox ends every process a command leaves behind (measured): danger-full-access does
    // not, so that is the sandbox this scenario runs in; the gate's sandbox ends it with the tool.
    const runId = await dispatched(gate, { ...(await prepared(gate, 'codex-f')), sandbox: 'danger-full-access' });
    await receiver.waitFor(runId, 'session_finished_ready', WINDOW_MS);
    expect(await readFile(join(gate.fixture.projectRoot, 'codex-f', 'run_notes.md'), 'utf8')).toContain('Run notes');
    expect(spawnSync('pgrep', ['-f', 'rcp-linger-marker-codex-f']).status).toBe(1);
    expect((await gate.client.runView(runId))?.reaped ?? []).toEqual([]);
  });

  it('refuses a sandbox Codex does not have with 422, starting nothing', async () => {
    const body = await prepared(gate, 'codex-bad-sandbox');
    const answer = await gate.client.dispatch({ ...body, sandbox: 'acceptEdits' });
    expect(answer.status).toBe(422);
    expect(answer.body.detail).toMatch(/read-only, workspace-write, danger-full-access/);
  });

  it('refuses a resume of a project that has no recorded session with 409', async () => {
    const body = await prepared(gate, 'codex-no-session');
    const answer = await gate.client.dispatch({ ...body, mode: 'resume' });
    expect(answer.status).toBe(409);
    expect(answer.body.detail).toMatch(/no recorded codex session/);
  });
});
