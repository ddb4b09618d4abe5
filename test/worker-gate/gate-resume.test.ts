import { createHash } from 'node:crypto';
import { readFile, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CallbackReceiver, CONTROL_TOKEN, gateClient, startGateProcess, waitUntil, writeGateConfig, type GateFixture, type GateProcess } from '../support/gate.ts';

/**
 * `POST /runs/:run_id/resume` on a real gate process with the fake agent (test/fixtures/agents/fake-agent.ts, scenario
 * 'question'): a run whose agent asked a question starts again in resume mode with the answer as its prompt
 * (docs/worker-gate.md#resuming-a-run). The real tools are resumed in agent-codex.test.ts and agent-claude-code.test.ts.
 */

// expected duration: ~45 s

// The quiet window needs idle_sustain_sec (min 30) of samples after the agent's processes exited.
const WINDOW_MS = 75_000;

let receiver: CallbackReceiver;
let fixture: GateFixture;
let gate: GateProcess;
let client: ReturnType<typeof gateClient>;

beforeAll(async () => {
  receiver = await CallbackReceiver.start();
  fixture = await writeGateConfig({ callbackUrl: receiver.url, overrides: { run_slots: 8 } });
  gate = await startGateProcess(fixture);
  client = gateClient(fixture);
});

afterAll(async () => {
  await gate?.kill('SIGTERM');
  await receiver?.down();
  if (fixture) await rm(fixture.dir, { recursive: true, force: true });
});

async function launchedRun(runId: string, scenario: string, extra: Record<string, unknown> = {}) {
  const answer = await client.launch(runId, scenario, extra);
  expect(answer.status, JSON.stringify(answer.body)).toBe(200);
}

/** The modes the fake agent's launcher was started in for the run, in order (one counter line per start). */
async function startModes(runId: string): Promise<string[]> {
  const text = await readFile(fixture.counterFile, 'utf8').catch(() => '');
  return text
    .split('\n')
    .filter((line) => line.includes(`"${runId}"`))
    .map((line) => (JSON.parse(line) as { mode: string }).mode);
}

const runNotes = (runId: string) => readFile(join(fixture.projectRoot, runId.replace(/-run$/, ''), 'run_notes.md'), 'utf8');
const questionsOf = (runId: string) => receiver.deliveredForRun(runId).filter((callback) => callback.body.event_type === 'question_pending');
/** What the run's agent spent so far, as its runner reports it. */
const reportSpent = (runId: string, total: number) =>
  client.call('POST', '/legacy-agent/event', { event: 'progress', run_id: runId, token_usage: { input_tokens: total - 100, output_tokens: 100, total_tokens: total } }, CONTROL_TOKEN);

describe.concurrent('resuming a run whose agent asked a question', () => {
  it('starts the agent again in resume mode with the answer as its prompt and the rest of its budget; the run then finishes', { timeout: WINDOW_MS + 30_000 }, async () => {
    const runId = 'answered-run';
    await launchedRun(runId, 'question', { token_budget: 1_000 });
    const asked = await receiver.waitFor(runId, 'question_pending', 20_000);
    expect(asked.body.question_detail).toEqual({
      kind: 'question',
      questions: [{ header: 'Question', question: 'Which dataset split should the final evaluation use?', options: [{ label: 'Yes', description: null }, { label: 'No', description: null }] }],
    });
    expect((await reportSpent(runId, 400)).status).toBe(200);

    const prompt = 'The operator answered your question: use the 2024 split.';
    const resumed = await client.resume(runId, { resume_id: 'answer-1', prompt, allowed_tools: [{ rule: 'Bash(npm test)', scope: 'once' }] });
    expect(resumed.status, JSON.stringify(resumed.body)).toBe(200);
    expect(resumed.body).toMatchObject({ ok: true, run_id: runId, resume_id: 'answer-1', gate_state: 'running', already_resumed: false, resumes: 1 });
    expect(resumed.body.root_pid).toBeGreaterThan(0);
    // Once per resume_id: the same again answers the first result and starts nothing; another prompt is refused.
    expect((await client.resume(runId, { resume_id: 'answer-1', prompt })).body).toMatchObject({ already_resumed: true, resumes: 1, root_pid: resumed.body.root_pid });
    const otherPrompt = await client.resume(runId, { resume_id: 'answer-1', prompt: 'Use the 2023 split.' });
    expect(otherPrompt.status).toBe(409);
    expect(otherPrompt.body.detail).toMatch(/already made with a different prompt/);

    const finished = await receiver.waitFor(runId, 'session_finished_ready', WINDOW_MS);
    expect(finished.body).toMatchObject({ gate_state: 'finished_ready', question: null, evidence: { run_notes: true, decision_file: true } });
    const notes = await runNotes(runId);
    expect(notes).toContain('mode resume');
    expect(notes).toContain(`Answer: ${prompt}`);
    // The budget left after the 400 tokens of the asking session, and the tool the answer allowed for this session.
    expect(notes).toContain('Token budget: 600');
    expect(notes).toContain('Allowed tools: ["Bash(npm test)"]');
    expect(await startModes(runId)).toEqual(['exec', 'resume']);
    const view = await client.runView(runId);
    expect(view).toMatchObject({ question: null, question_detail: null, allowed_tools: [] });
    expect(view?.resumes).toEqual([
      { resume_id: 'answer-1', at: expect.any(String), prompt_sha256: createHash('sha256').update(prompt).digest('hex'), allowed_tools: ['Bash(npm test)'] },
    ]);

    const late = await client.resume(runId, { resume_id: 'answer-2', prompt });
    expect(late.status).toBe(409);
    expect(late.body.detail).toMatch(/is finished_ready .*not waiting on an answer/);
    expect(await startModes(runId)).toEqual(['exec', 'resume']);
  });

  it('a second question in the same run waits again, and a second resume answers it; a tool allowed for the run stays allowed', { timeout: WINDOW_MS + 30_000 }, async () => {
    const runId = 'twice-run';
    await launchedRun(runId, 'question');
    await receiver.waitFor(runId, 'question_pending', 20_000);
    const first = await client.resume(runId, {
      resume_id: 'twice-1',
      prompt: 'Use the 2024 split, and ask again before you report it.',
      allowed_tools: [{ rule: 'Bash(npm test)', scope: 'run' }, { rule: 'WebFetch', scope: 'once' }],
    });
    expect(first.status, JSON.stringify(first.body)).toBe(200);

    const second = await waitUntil('the second question', () => questionsOf(runId)[1], 20_000);
    expect(second.body.question).toBe('Should the 2023 split be reported as well?');
    expect(second.body.question_detail).toMatchObject({ kind: 'question', questions: [{ question: 'Should the 2023 split be reported as well?' }] });
    const prompt = 'The operator answered your second question: report the 2024 split alone.';
    const resumed = await client.resume(runId, { resume_id: 'twice-2', prompt });
    expect(resumed.body).toMatchObject({ already_resumed: false, resumes: 2 });

    await receiver.waitFor(runId, 'session_finished_ready', WINDOW_MS);
    expect(await runNotes(runId)).toContain(`Answer: ${prompt}\nToken budget: none\nAllowed tools: ["Bash(npm test)"]`);
    expect(await startModes(runId)).toEqual(['exec', 'resume', 'resume']);
    const view = await client.runView(runId);
    expect(view?.allowed_tools).toEqual(['Bash(npm test)']);
    expect(view?.resumes?.map((resume: { resume_id: string; allowed_tools: string[] }) => [resume.resume_id, resume.allowed_tools])).toEqual([
      ['twice-1', ['Bash(npm test)', 'WebFetch']],
      ['twice-2', ['Bash(npm test)']],
    ]);
    // Each session of the fake agent has an id of its own, so each reports its start.
    expect(receiver.deliveredForRun(runId).map((callback) => callback.body.event_type)).toEqual([
      'session_started',
      'question_pending',
      'session_started',
      'question_pending',
      'session_started',
      'session_finished_ready',
    ]);
  });

  it('two answers at once: one resumes the session, the other is refused with 409, and the agent starts once', { timeout: 60_000 }, async () => {
    const runId = 'raced-run';
    await launchedRun(runId, 'question');
    await receiver.waitFor(runId, 'question_pending', 20_000);
    const answers = await Promise.all(['raced-1', 'raced-2', 'raced-3'].map((resumeId) => client.resume(runId, { resume_id: resumeId, prompt: `Answer ${resumeId}.` })));
    expect(answers.map((answer) => answer.status).sort()).toEqual([200, 409, 409]);
    for (const refused of answers.filter((answer) => answer.status === 409)) expect(refused.body.detail).toMatch(/is running .*not waiting on an answer/);
    expect(await startModes(runId)).toEqual(['exec', 'resume']);
  });

  it('refuses a run past its token budget with 409, starting nothing: the run still waits on its answer', { timeout: 60_000 }, async () => {
    const runId = 'spent-run';
    await launchedRun(runId, 'question', { token_budget: 1_000 });
    await receiver.waitFor(runId, 'question_pending', 20_000);
    expect((await reportSpent(runId, 1_200)).status).toBe(200);
    const refused = await client.resume(runId, { resume_id: 'spent-1', prompt: 'Use the 2024 split.' });
    expect(refused.status).toBe(409);
    expect(refused.body.detail).toMatch(/has spent its token budget \(1200 of 1000 tokens\)/);
    expect(await startModes(runId)).toEqual(['exec']);
    const view = await client.runView(runId);
    expect(view).toMatchObject({ gate_state: 'question_pending', question_detail: { kind: 'question' } });
    expect(view?.resumes ?? []).toEqual([]);
  });

  it('refuses a run not waiting on an answer with 409 naming its state, an unknown run with 404, a bad body with 422', { timeout: 60_000 }, async () => {
    const runId = 'working-run';
    await launchedRun(runId, 'hold');
    await receiver.waitFor(runId, 'session_started', 20_000);
    const working = await client.resume(runId, { resume_id: 'working-1', prompt: 'Go on.' });
    expect(working.status).toBe(409);
    expect(working.body.detail).toMatch(/^run 'working-run' is running \(agent session running\), not waiting on an answer/);
    expect((await client.call('POST', `/runs/${runId}/cancel`)).status).toBe(200);

    expect((await client.resume('no-such-run', { resume_id: 'x-1', prompt: 'Go on.' })).status).toBe(404);
    for (const body of [
      { resume_id: 'has spaces', prompt: 'Go on.' },
      { resume_id: 'x-2', prompt: '   ' },
      { resume_id: 'x-3', prompt: 'Go on.', allowed_tools: [{ rule: 'Bash(npm test)', scope: 'forever' }] },
      { resume_id: 'x-4', prompt: 'Go on.', surprise: true },
    ]) {
      expect((await client.resume(runId, body)).status, JSON.stringify(body)).toBe(422);
    }
    expect(await startModes(runId)).toEqual(['exec']);
  });
});

describe('resuming a run that waited out a usage limit', () => {
  it('a long wait lets the slot go: another run takes it, the resume is refused while it holds it, and goes through once it is gone', { timeout: 60_000 }, async () => {
    const oneSlot = await writeGateConfig({ callbackUrl: receiver.url, overrides: { run_slots: 1, usage_limit_hold_sec: 0 } });
    const small = await startGateProcess(oneSlot);
    const on = gateClient(oneSlot);
    const runId = 'limit-slot-run';
    const other = 'limit-slot-other-run';
    try {
      expect((await on.launch(runId, 'usage-limit-long')).status).toBe(200);
      const limited = await receiver.waitFor(runId, 'usage_limited', 20_000);
      expect(limited.body).toMatchObject({ gate_state: 'usage_limited', holds_slot: false, cause: { kind: 'usage_limit', message: "You've hit your usage limit. Try again in 3600 seconds." } });
      expect((await on.runView(runId))?.usage_limit).toMatchObject({ holds_slot: false });

      // The slot is free meanwhile: another run is dispatched into it.
      expect((await on.launch(other, 'hold')).status).toBe(200);
      const refused = await on.resume(runId, { resume_id: 'limit-1', prompt: 'The limit has reset.' });
      expect(refused.status).toBe(409);
      expect(refused.body.detail).toBe(`run '${runId}' let its slot go while it waited out a usage limit, and cannot take it back now: all 1 slots hold runs: ${other}`);
      expect((await on.runView(runId))?.gate_state).toBe('usage_limited');

      expect((await on.call('POST', `/runs/${other}/cancel`)).status).toBe(200);
      const resumed = await on.resume(runId, { resume_id: 'limit-1', prompt: 'The limit has reset.' });
      expect(resumed.status, JSON.stringify(resumed.body)).toBe(200);
      expect(resumed.body).toMatchObject({ gate_state: 'running', resumes: 1 });
      // Resumed, it holds the slot again: the next dispatch finds every slot held.
      const third = await on.launch('limit-slot-third-run', 'hold');
      expect(third.status).toBe(409);
      expect(JSON.stringify(third.body)).toContain(`all 1 slots hold runs: ${runId}`);
    } finally {
      // A gate's runs outlive its process by design, so the resumed agent (asleep for its hour) is cancelled first.
      for (const started of [runId, other]) await on.call('POST', `/runs/${started}/cancel`);
      await small.kill('SIGTERM');
      await rm(oneSlot.dir, { recursive: true, force: true });
    }
  });
});

