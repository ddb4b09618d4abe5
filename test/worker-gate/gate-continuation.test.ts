import { readFile, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CallbackReceiver, gateClient, startGateProcess, writeGateConfig, type GateFixture, type GateProcess } from '../support/gate.ts';

/**
 * A premature stop on a real gate process with the fake agent (test/fixtures/agents/fake-agent.ts): a session that
 * ends without its evidence is resumed with a prompt naming what is missing, at most agent_continue_limit times, then
 * judged (docs/worker-gate.md#continuing-a-premature-stop). The real tools are continued in agent-codex.test.ts and
 * agent-claude-code.test.ts.
 */

// expected duration: ~80 s

// Each session's quiet window needs idle_sustain_sec (min 30) of samples after its processes exited: two windows here.
const TWO_WINDOWS_MS = 110_000;

let receiver: CallbackReceiver;
const gates: { fixture: GateFixture; process: GateProcess }[] = [];
let continuing: ReturnType<typeof gateClient>;
let judging: ReturnType<typeof gateClient>;

async function startGate(overrides: Record<string, unknown>) {
  const fixture = await writeGateConfig({ callbackUrl: receiver.url, overrides: { run_slots: 4, ...overrides } });
  gates.push({ fixture, process: await startGateProcess(fixture) });
  return { client: gateClient(fixture), fixture };
}

let continuingFixture: GateFixture;

beforeAll(async () => {
  receiver = await CallbackReceiver.start();
  const first = await startGate({ agent_continue_limit: 1 });
  continuing = first.client;
  continuingFixture = first.fixture;
  judging = (await startGate({ agent_continue_limit: 0 })).client;
});

afterAll(async () => {
  await Promise.all(gates.map((gate) => gate.process.kill('SIGTERM')));
  await receiver?.down();
  for (const gate of gates) await rm(gate.fixture.dir, { recursive: true, force: true });
});

async function launched(client: ReturnType<typeof gateClient>, runId: string, scenario: string) {
  const answer = await client.launch(runId, scenario);
  expect(answer.status, JSON.stringify(answer.body)).toBe(200);
}

const callbackTypes = (runId: string) => receiver.deliveredForRun(runId).map((callback) => callback.body.event_type);
const MISSING = ['`run_notes.md` in the project directory', '`.research/decision.json`'];

describe.concurrent('a session that ends without its evidence', () => {
  it('is resumed once with what is missing named, and the run finishes on the continued session with its evidence', { timeout: TWO_WINDOWS_MS + 20_000 }, async () => {
    const runId = 'premature-run';
    await launched(continuing, runId, 'premature');
    const continued = await receiver.waitFor(runId, 'session_continued', TWO_WINDOWS_MS / 2);
    for (const missing of MISSING) expect(continued.body.reason).toContain(missing);
    expect(continued.body.evidence).toMatchObject({ run_notes: false, decision_file: false, results_json_files: 0 });

    const finished = await receiver.waitFor(runId, 'session_finished_ready', TWO_WINDOWS_MS);
    expect(finished.body.evidence).toMatchObject({ run_notes: true, decision_file: true });
    expect(callbackTypes(runId)).toEqual(['session_started', 'session_continued', 'session_started', 'session_finished_ready']);
    // The continued session got the prompt naming what was missing.
    const notes = await readFile(join(continuingFixture.projectRoot, 'premature', 'run_notes.md'), 'utf8');
    expect(notes).toContain('Continued with:\nYour session ended, but the run is not finished');
    for (const missing of MISSING) expect(notes).toContain(missing);
    const record = await continuing.runView(runId);
    expect(record?.resumes?.map((resume: { resume_id: string }) => resume.resume_id)).toEqual(['continue-1']);
  });

  it('is resumed at most agent_continue_limit times (1), then judged as it is', { timeout: TWO_WINDOWS_MS + 20_000 }, async () => {
    const runId = 'premature-always-run';
    await launched(continuing, runId, 'premature-always');
    const finished = await receiver.waitFor(runId, 'session_finished_ready', TWO_WINDOWS_MS);
    expect(finished.body.evidence).toMatchObject({ run_notes: false, decision_file: false, sufficient_for_paper: false });
    expect(callbackTypes(runId)).toEqual(['session_started', 'session_continued', 'session_started', 'session_finished_ready']);
    expect((await continuing.runView(runId))?.resumes).toHaveLength(1);
  });

  it('is judged on its first session where agent_continue_limit is 0', { timeout: TWO_WINDOWS_MS }, async () => {
    const runId = 'premature-judged-run';
    await launched(judging, runId, 'premature');
    const finished = await receiver.waitFor(runId, 'session_finished_ready', TWO_WINDOWS_MS / 2);
    expect(finished.body.evidence).toMatchObject({ run_notes: false, decision_file: false });
    expect(callbackTypes(runId)).toEqual(['session_started', 'session_finished_ready']);
    expect((await judging.runView(runId))?.resumes ?? []).toEqual([]);
  });
});
