import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { readFile, rm } from 'node:fs/promises';
import { homedir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { pinnedAgentBinary } from '../../worker-gate/launchers/installed-agents.ts';
import { agentRecord, dispatchedRun, leaveLingeringProcess, EVIDENCE, preparedRun, sessionRecord, startAgentGate, type AgentGate } from '../support/agent-gates.ts';
import { CallbackReceiver, waitUntil } from '../support/gate.ts';
import { MessagesServer } from '../../scripts/scripted-model-servers.ts';
import { testPort } from '../support/ports.ts';
import { USAGE_LIMIT_RESUME_PROMPT } from '../../worker-gate/contract/usage-limit.ts';

/**
 * Claude Code, the real binary (scripts/ensure-agents.sh), under a real gate process with agent_runtime
 * "claude-code", against a scripted Messages server: the launcher, the hooks given with --settings, the quiet window
 * and the callbacks, end to end. The scenarios run at once, each its own project and conversation.
 */

// expected duration: ~115 s

// The quiet window needs idle_sustain_sec (min 30) of samples after the agent's processes exited.
const WINDOW_MS = 90_000;
const API_KEY = 'sk-ant-scripted-model-key-0123456789';
/** A secret of the gate's environment that agent_credential_env does not name: no agent may see it. */
const UNRELATED_SECRET = 'lab-database-password-0123456789';

let receiver: CallbackReceiver;
let model: MessagesServer;
let gate: AgentGate;
/** A second gate whose model server is down: nothing listens at its base URL. */
let gateWithoutModel: AgentGate;
/** A third that starts its agents in tmux (agent_tmux_enabled). */
let gateInTmux: AgentGate;
/** A fourth that continues a session ending without its evidence once (agent_continue_limit 1). */
let continuingGate: AgentGate;
const userClaudeDirExisted = existsSync(join(homedir(), '.claude'));

const startClaudeGate = (baseUrl: string, overrides: Record<string, unknown> = {}) =>
  startAgentGate(receiver, 'claude-code', { ANTHROPIC_BASE_URL: baseUrl, ANTHROPIC_API_KEY: API_KEY, LAB_DB_PASSWORD: UNRELATED_SECRET }, overrides);

beforeAll(async () => {
  if (!existsSync(pinnedAgentBinary('claude-code'))) {
    throw new Error(`Claude Code is not installed at ${pinnedAgentBinary('claude-code')}: run bash scripts/ensure-agents.sh (npm test's pretest does)`);
  }
  receiver = await CallbackReceiver.start();
  model = await MessagesServer.start(await testPort());
  [gate, gateWithoutModel, gateInTmux, continuingGate] = await Promise.all([
    // Claude Code names no reset with a 429: its run waits usage_limit_backoff_sec.
    startClaudeGate(model.baseUrl, { usage_limit_backoff_sec: 3 }),
    startClaudeGate(`http://127.0.0.1:${await testPort()}`),
    startClaudeGate(model.baseUrl, { agent_tmux_enabled: true }),
    startClaudeGate(model.baseUrl, { agent_continue_limit: 1 }),
  ]);
}, 60_000);

afterAll(async () => {
  await Promise.all([gate, gateWithoutModel, gateInTmux, continuingGate].map((started) => started?.process.kill('SIGTERM')));
  await receiver?.down();
  await model?.down();
  for (const started of [gate, gateWithoutModel, gateInTmux, continuingGate]) if (started) await rm(started.fixture.dir, { recursive: true, force: true });
});

const prepared = (on: AgentGate, key: string, options: { n?: number; prompt?: string; sandbox?: string } = {}) =>
  preparedRun(on, key, { sandbox: 'acceptEdits', ...options });
const callbackTypes = (runId: string) => receiver.deliveredForRun(runId).map((callback) => callback.body.event_type);
/** The command the scripted model's question step asks to run (scripts/scripted-model-servers.ts). */
const ASKED_COMMAND = 'curl -s http://127.0.0.1:9/ # Which dataset should I use?';
/** What the gate's hook answers a permission request the gate took (worker-gate/launchers/gate-event-hook.mjs). */
const REFUSAL = 'The operator has been asked and will answer in your next message.';

describe.concurrent('Claude Code under the gate', () => {
  it('(a) writes its evidence with its own tools and ends: the run completes with its decision, and its session is recorded', { timeout: WINDOW_MS + 30_000 }, async () => {
    model.script('claude-a', [...EVIDENCE.map(({ path, content }) => ({ kind: 'write' as const, path, content })), { kind: 'message', text: 'The experiment is done.' }]);
    const runId = await dispatchedRun(gate, await prepared(gate, 'claude-a'));

    const finished = await receiver.waitFor(runId, 'session_finished_ready', WINDOW_MS);
    expect(finished.body.evidence).toMatchObject({ run_notes: true, decision_file: true, decision: 'finalize_positive', results_json_files: 1, sufficient_for_paper: true });
    expect(callbackTypes(runId)).toEqual(['session_started', 'session_finished_ready']);

    const record = await sessionRecord(gate, 'claude-a');
    // Four model calls of 100 input and 10 output tokens each (the scripted server's count).
    expect(record).toMatchObject({ runtime: 'claude-code', mode: 'exec', exit_code: 0, last_message: 'The experiment is done.', token_usage: { input_tokens: 400, output_tokens: 40, total_tokens: 440 } });
    expect(record.session_id).toMatch(/^[0-9a-f-]{36}$/);
    const events = await agentRecord(gate, 'claude-a', 'events.jsonl');
    expect(events).toContain('"type":"result"');
    expect(model.requestsOf('claude-a')).toHaveLength(4);
    const dashboard = JSON.stringify((await gate.client.dashboard()).body);
    const callbacks = JSON.stringify(receiver.received.map((callback) => callback.body));
    for (const place of [events, JSON.stringify(record), gate.process.output(), dashboard, callbacks]) expect(place).not.toContain(API_KEY);
    expect((await gate.client.runView(runId))?.token_usage).toEqual({ input_tokens: 400, output_tokens: 40, total_tokens: 440 });
    expect(finished.body.token_usage).toEqual({ input_tokens: 400, output_tokens: 40, total_tokens: 440 });
    // The run's transcript, pushed beside the callbacks: each tool call with its result, the answer and the usage.
    const said = receiver.transcriptOf(runId);
    expect(said.map((entry) => entry.seq)).toEqual(said.map((_, index) => index + 1));
    expect(said.filter((entry) => entry.kind === 'tool_call' && entry.text.includes('run_notes.md'))).toHaveLength(1);
    expect(said.filter((entry) => entry.kind === 'tool_output').length).toBeGreaterThanOrEqual(3);
    expect(said).toContainEqual(expect.objectContaining({ kind: 'message', text: 'The experiment is done.' }));
    expect(said.filter((entry) => entry.kind === 'usage').at(-1)?.text).toBe('440 tokens so far (input 400, output 40)');
    expect(JSON.stringify(said)).not.toContain(API_KEY);
  });

  it('(b) a second dispatch in resume mode continues the same session', { timeout: 2 * WINDOW_MS + 30_000 }, async () => {
    model.script('claude-b', [{ kind: 'message', text: 'First part done; the number is 4217.' }, { kind: 'message', text: 'Continued from where I was.' }]);
    const first = await dispatchedRun(gate, await prepared(gate, 'claude-b', { prompt: 'Start the study and remember the number. [claude-b]' }));
    await receiver.waitFor(first, 'session_finished_ready', WINDOW_MS);
    const session = (await sessionRecord(gate, 'claude-b')).session_id;

    const second = await dispatchedRun(gate, { ...(await prepared(gate, 'claude-b', { n: 2, prompt: 'Go on with the study. [claude-b]' })), mode: 'resume' });
    await receiver.waitFor(second, 'session_finished_ready', WINDOW_MS);
    expect(await sessionRecord(gate, 'claude-b')).toMatchObject({ mode: 'resume', session_id: session, exit_code: 0, last_message: 'Continued from where I was.' });
    const resumed = JSON.stringify(model.requestsOf('claude-b').at(-1)?.body.messages);
    expect(resumed).toContain('Start the study and remember the number.');
    expect(resumed).toContain('the number is 4217');
  });

  it('(c) a tool call that needs a permission (-p mode has no question tool): the run goes to question_pending with it; a resume that allows that command runs it', { timeout: 3 * WINDOW_MS }, async () => {
    model.script('claude-c', [
      { kind: 'question', question: 'Which dataset should I use?' },
      { kind: 'message', text: 'Waiting for the operator.' },
      { kind: 'command', cmd: ASKED_COMMAND },
      { kind: 'message', text: 'Fetched nothing: the server is not there.' },
    ]);
    const runId = await dispatchedRun(gate, await prepared(gate, 'claude-c'));
    // Seconds alone; with every scenario of both agent files at once, the agent's start alone has taken 19 s, and a
    // whole CI run has seen this wait pass 60 s.
    const asked = await receiver.waitFor(runId, 'question_pending', 120_000);
    expect(asked.body.question).toMatch(/^permission for Bash: .*Which dataset should I use\?/);
    expect(asked.body.question_detail).toMatchObject({ kind: 'permission', tool_name: 'Bash', tool_input: { command: ASKED_COMMAND } });
    // The hook refused the call: the model was told so and ended its turn. Found by content, not by place: under a
    // loaded CI run Claude Code has sent its first request twice.
    const holds = (text: string) => (request: { body: Record<string, any> }) => JSON.stringify(request.body.messages).includes(text);
    // As long as the question itself may take on a loaded CI pass (a whole pass once saw this wait pass 60 s too).
    const refused = await waitUntil('the refusal to reach the model', () => model.requestsOf('claude-c').find(holds(REFUSAL)), 120_000);
    expect(JSON.stringify(refused.body.messages)).toContain(REFUSAL);

    const answer = 'The operator allowed your command: run it again.';
    const resumedAt = Date.now();
    const resumed = await gate.client.resume(runId, { resume_id: 'claude-c-allow', prompt: answer, allowed_tools: [{ rule: `Bash(${ASKED_COMMAND})`, scope: 'once' }] });
    expect(resumed.status, JSON.stringify(resumed.body)).toBe(200);
    const next = await waitUntil('the resumed session to ask the model', () => model.requestsOf('claude-c').find(holds(answer)), 60_000);
    console.log(`claude-code: ${next.at - resumedAt} ms from the resume call to the model's next request`);
    const resumedConversation = JSON.stringify(next.body.messages);
    expect(resumedConversation).toContain(answer);
    expect(resumedConversation).toContain('Which dataset should I use?');

    const finished = await receiver.waitFor(runId, 'session_finished_ready', WINDOW_MS);
    // The command ran this time, unasked: curl found nothing listening (exit 7), and no second question came.
    const ran = JSON.stringify(model.requestsOf('claude-c')[3]?.body.messages.at(-1));
    expect(ran).toContain('tool_result');
    expect(ran).toContain('Exit code 7');
    expect(ran).not.toContain(REFUSAL);
    expect(callbackTypes(runId)).toEqual(['session_started', 'question_pending', 'session_finished_ready']);
    expect(await sessionRecord(gate, 'claude-c')).toMatchObject({ mode: 'resume', session_id: asked.body.session_id, exit_code: 0, last_message: 'Fetched nothing: the server is not there.' });
    const view = await gate.client.runView(runId);
    expect(view?.resumes?.map((resume: { allowed_tools: string[] }) => resume.allowed_tools)).toEqual([[`Bash(${ASKED_COMMAND})`]]);
    // Allowed for that session alone: the run keeps no rule.
    expect(view?.allowed_tools).toEqual([]);
    // Both sessions' tokens: four model answers of 100 input and 10 output tokens each.
    expect(finished.body.token_usage).toEqual({ input_tokens: 400, output_tokens: 40, total_tokens: 440 });
  });

  it('(i) ends its session without its evidence ("Let me now explore…"): the gate continues the same session once, naming what is missing, and the run finishes with its evidence', { timeout: 2 * WINDOW_MS + 30_000 }, async () => {
    model.script('claude-i', [
      { kind: 'message', text: 'Let me now explore the data.' },
      { kind: 'write', path: 'run_notes.md', content: '# Run notes\nThe loss went down.\n' },
      { kind: 'write', path: '.research/decision.json', content: '{"decision": "finalize_positive", "summary": "it worked"}\n' },
      { kind: 'message', text: 'The study is written up.' },
    ]);
    const runId = await dispatchedRun(continuingGate, await prepared(continuingGate, 'claude-i'));
    const continued = await receiver.waitFor(runId, 'session_continued', WINDOW_MS);
    expect(continued.body.reason).toContain('`run_notes.md` in the project directory');
    const finished = await receiver.waitFor(runId, 'session_finished_ready', WINDOW_MS);
    expect(finished.body.evidence).toMatchObject({ run_notes: true, decision_file: true, decision: 'finalize_positive' });
    expect(callbackTypes(runId)).toEqual(['session_started', 'session_continued', 'session_finished_ready']);
    // The same session went on: the continuation's request carries the first turn, then the prompt naming what is missing.
    const requests = model.requestsOf('claude-i');
    expect(requests).toHaveLength(4);
    const continuation = JSON.stringify(requests[1]!.body.messages);
    expect(continuation).toContain('Let me now explore the data.');
    expect(continuation).toContain('Your session ended, but the run is not finished');
    expect((await continuingGate.client.runView(runId))?.resumes?.map((resume: { resume_id: string }) => resume.resume_id)).toEqual(['continue-1']);
  });

  it('(h) a permission the operator denies: the resumed session gets the answer as its prompt, and the run finishes', { timeout: 2 * WINDOW_MS }, async () => {
    model.script('claude-h', [
      { kind: 'question', question: 'May I fetch the dataset?' },
      { kind: 'message', text: 'Waiting for the operator.' },
      { kind: 'message', text: 'Finished without fetching it.' },
    ]);
    const runId = await dispatchedRun(gate, await prepared(gate, 'claude-h'));
    const asked = await receiver.waitFor(runId, 'question_pending', 60_000);
    expect(asked.body.question_detail).toMatchObject({ kind: 'permission', tool_name: 'Bash' });
    // As when a person answers: the asking session has ended by then.
    const asking = await waitUntil('the asking session to end', async () => {
      const record = await sessionRecord(gate, 'claude-h').catch(() => undefined);
      return record?.run_id === runId ? record : undefined;
    }, 60_000);
    // The denial ended the agent's turn, and Claude Code with it, as a session that went well.
    expect(asking).toMatchObject({ mode: 'exec', exit_code: 0 });

    const answer = 'The operator denied your command: do not fetch the dataset, and finish without it.';
    const resumedAt = Date.now();
    const resumed = await gate.client.resume(runId, { resume_id: 'claude-h-deny', prompt: answer });
    expect(resumed.status, JSON.stringify(resumed.body)).toBe(200);
    const next = await waitUntil('the model to get the answer', () => model.requestsOf('claude-h').find((request) => JSON.stringify(request.body.messages).includes(answer)), 60_000);
    console.log(`claude-code: ${next.at - resumedAt} ms from the resume call to the model's next request (the asking session had ended)`);

    await receiver.waitFor(runId, 'session_finished_ready', WINDOW_MS);
    expect(model.requestsOf('claude-h')).toHaveLength(3);
    expect(await sessionRecord(gate, 'claude-h')).toMatchObject({ mode: 'resume', session_id: asked.body.session_id, exit_code: 0, last_message: 'Finished without fetching it.' });
    expect((await gate.client.runView(runId))?.resumes).toHaveLength(1);
  });

  it('(d) past its token budget the agent is stopped (SIGINT first), and the run ends in gate_error with the budget reason', { timeout: WINDOW_MS }, async () => {
    // The first answer alone spends more than the budget; the later ones are slow, so the stop comes in the middle.
    model.script('claude-d', [
      { kind: 'write', path: 'step-1.txt', content: 'one', usage: 3_000 },
      ...[2, 3, 4, 5].map((n) => ({ kind: 'write' as const, path: `step-${n}.txt`, content: String(n), delayMs: 3_000 })),
      { kind: 'message', text: 'All steps done.' },
    ]);
    const runId = await dispatchedRun(gate, { ...(await prepared(gate, 'claude-d')), token_budget: 2_000 });
    const failed = await receiver.waitFor(runId, 'gate_error', 60_000);
    expect(failed.body.reason).toMatch(/^token budget exceeded: the agent spent \d+ tokens of its budget of 2000, and the gate stopped it$/);
    expect(failed.body.cause).toMatchObject({ kind: 'token_budget' });
    // The SIGINT reached the tool itself in its sandbox, which ended on it (bwrap, signalled, would have died of it).
    expect(await sessionRecord(gate, 'claude-d')).toMatchObject({ token_budget: 2_000, stopped_over_budget: true, signal: null });
    expect(model.requestsOf('claude-d').length).toBeLessThan(6);
  });

  it('(j) the model refuses with a 429 rate limit: the run waits usage_limit_backoff_sec (Claude Code names no reset), and resumed after it the same session finishes', { timeout: 2 * WINDOW_MS }, async () => {
    model.script('claude-j', [
      { kind: 'command', cmd: 'echo first half done' },
      { kind: 'limit', resetSec: 3 },
      ...EVIDENCE.map(({ path, content }) => ({ kind: 'write' as const, path, content })),
      { kind: 'message', text: 'Finished after the limit reset.' },
    ]);
    const runId = await dispatchedRun(gate, await prepared(gate, 'claude-j'));
    const limited = await receiver.waitFor(runId, 'usage_limited', 120_000);
    const cause = limited.body.cause!;
    expect(cause).toMatchObject({ kind: 'usage_limit', exit_code: 1 });
    expect(cause.message).toContain('429');
    expect(cause.resets_at).toBeUndefined();
    const resumesAt = Date.parse(limited.body.resumes_at!);
    expect(resumesAt - Date.parse(limited.body.seen_at)).toBeGreaterThanOrEqual(2_000);
    expect(resumesAt - Date.parse(limited.body.seen_at)).toBeLessThanOrEqual(4_000);

    await new Promise((resolve) => setTimeout(resolve, Math.max(0, resumesAt - Date.now())));
    const resumedAt = Date.now();
    expect((await gate.client.resume(runId, { resume_id: 'limit-1', prompt: USAGE_LIMIT_RESUME_PROMPT })).status).toBe(200);
    const next = await waitUntil('the resumed request', () => model.requestsOf('claude-j').find((request) => JSON.stringify(request.body.messages).includes('usage limit that stopped your session')), 60_000);
    console.log(`claude-code: ${next.at - resumedAt} ms from the resume after a usage limit to the model's next request`);
    expect(JSON.stringify(next.body.messages)).toContain('first half done');
    await receiver.waitFor(runId, 'session_finished_ready', WINDOW_MS);
    expect(callbackTypes(runId)).toEqual(['session_started', 'usage_limited', 'session_finished_ready']);
  });

  it('(e) the model server is down: the agent exits non-zero and the run ends in gate_error within seconds', { timeout: WINDOW_MS }, async () => {
    const started = Date.now();
    const runId = await dispatchedRun(gateWithoutModel, await prepared(gateWithoutModel, 'claude-e'));
    // As with Codex: a few seconds alone, and 35 s once on two loaded cores. A minute still tells the agent's exit apart
    // from its retries (minutes, without CLAUDE_CODE_MAX_RETRIES=0) and from any path by a timeout (2 min and more).
    const failed = await receiver.waitFor(runId, 'gate_error', 60_000);
    expect(Date.now() - started).toBeLessThan(60_000);
    expect(failed.body.reason).toMatch(/the agent exited with status 1/);
    // The model's error, without a status: nothing answered.
    expect(failed.body.cause).toMatchObject({ kind: 'model_error', exit_code: 1, message: expect.any(String) });
    expect(failed.body.cause?.model_status).toBeUndefined();
    expect(await sessionRecord(gateWithoutModel, 'claude-e')).toMatchObject({ exit_code: 1, last_error: expect.stringMatching(/connect|API Error|ECONNREFUSED/i) });
  });

  it('(f) a process the agent leaves running ends with the tool (its sandbox has a pid namespace of its own): nothing is left to reap', { timeout: WINDOW_MS + 30_000 }, async () => {
    model.script('claude-f', [
      ...EVIDENCE.map(({ path, content }) => ({ kind: 'write' as const, path, content })),
      { kind: 'command', cmd: `env > agent-env.txt && ${leaveLingeringProcess('rcp-linger-marker-claude-f')}` },
      { kind: 'message', text: 'Left a helper running.' },
    ]);
    // acceptEdits asks before such commands: bypassPermissions runs them.
    const runId = await dispatchedRun(gate, await prepared(gate, 'claude-f', { sandbox: 'bypassPermissions' }));
    await receiver.waitFor(runId, 'session_finished_ready', WINDOW_MS);
    expect(spawnSync('pgrep', ['-f', 'rcp-linger-marker-claude-f']).status).toBe(1);
    expect((await gate.client.runView(runId))?.reaped ?? []).toEqual([]);

    // The model key reached the agent; the gate's other secrets did not. Its config lives in the tool's own home for
    // the project, shown to it in its sandbox, never in the user's own ~/.claude.
    const agentEnv = await readFile(join(gate.fixture.projectRoot, 'claude-f', 'agent-env.txt'), 'utf8');
    expect(agentEnv).toContain(`ANTHROPIC_API_KEY=${API_KEY}`);
    expect(agentEnv).not.toContain(UNRELATED_SECRET);
    expect(agentEnv).toMatch(/^CLAUDE_CONFIG_DIR=\/run\/rcp-agent\/tool-home$/m);
    expect(existsSync(join(homedir(), '.claude'))).toBe(userClaudeDirExisted);
  });

  it('in tmux mode runs in a session named after the run, which an operator can watch, and which ends with the run', { timeout: WINDOW_MS + 30_000 }, async () => {
    model.script('claude-tmux', [
      { kind: 'write', path: 'run_notes.md', content: '# Run notes\n' },
      { kind: 'message', text: 'Watched in tmux.', delayMs: 5_000 },
    ]);
    const runId = await dispatchedRun(gateInTmux, await prepared(gateInTmux, 'claude-tmux'));
    const session = 'rcp-claude-tmux-1-run';
    expect((await gateInTmux.client.runView(runId))?.tmux_session).toBe(session);
    const pane = await waitUntil('the pane to show the agent', async () => {
      const shown = spawnSync('tmux', ['-L', session, 'capture-pane', '-p', '-t', session], { encoding: 'utf8' }).stdout;
      return shown.includes('starting claude-code') ? shown : undefined;
    }, 10_000);
    expect(pane).toContain('starting claude-code');
    await receiver.waitFor(runId, 'session_finished_ready', WINDOW_MS);
    expect(await sessionRecord(gateInTmux, 'claude-tmux')).toMatchObject({ exit_code: 0, last_message: 'Watched in tmux.' });
    expect(spawnSync('tmux', ['-L', session, 'has-session', '-t', session]).status).not.toBe(0);
  });

  it("refuses a sandbox Claude Code does not have (Codex's) with 422, starting nothing", async () => {
    const body = await prepared(gate, 'claude-bad-sandbox');
    const answer = await gate.client.dispatch({ ...body, sandbox: 'workspace-write' });
    expect(answer.status).toBe(422);
    expect(answer.body.detail).toMatch(/default, acceptEdits, plan, bypassPermissions/);
  });
});
