import { createHash } from 'node:crypto';
import { existsSync } from 'node:fs';
import { mkdir, readFile, rm, symlink } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  CALLBACK_TOKEN,
  CallbackReceiver,
  CONTROL_TOKEN,
  GATE_TOKEN,
  dispatchCount,
  FAKE_GPU_BIN,
  gateClient,
  startGateProcess,
  waitUntil,
  writeGateConfig,
  type GateFixture,
  type GateProcess,
} from '../support/gate.ts';
import { isProcessRunning } from '../support/process.ts';
import { callbackTokenFingerprint } from '../../platform/http/tokens.ts';

// expected duration: ~45 s

// The quiet window needs idle_sustain_sec (min 30) of samples after the agent's processes exited.
const WINDOW_MS = 75_000;
const DISPATCH_TIMEOUT_SEC = 20;

let receiver: CallbackReceiver;
let fixture: GateFixture;
let gate: GateProcess;
let client: ReturnType<typeof gateClient>;
/** `/dashboard/api` as the first request after `/healthz` said ready. */
let firstSnapshot: Awaited<ReturnType<ReturnType<typeof gateClient>['dashboard']>>;

beforeAll(async () => {
  receiver = await CallbackReceiver.start();
  // Four test files at a time on two cores: starting the fake agent can take several seconds.
  // The tests below run side by side on this gate, each with a run of its own: a slot each.
  fixture = await writeGateConfig({ callbackUrl: receiver.url, overrides: { dispatch_timeout_sec: DISPATCH_TIMEOUT_SEC, run_slots: 8 } });
  // A fake nvidia-smi on the PATH: the GPU figures, the VRAM baseline and the GPU side of the window are exercised.
  gate = await startGateProcess(fixture, { PATH: `${FAKE_GPU_BIN}:${process.env.PATH ?? ''}` });
  client = gateClient(fixture);
  firstSnapshot = await client.dashboard();
});

afterAll(async () => {
  await gate?.kill('SIGTERM');
  await receiver?.down();
  if (fixture) await rm(fixture.dir, { recursive: true, force: true });
});

/** Launches a run that the gate must accept; a refusal fails with the gate's answer (exit code, stderr) in view. */
async function launchedRun(runId: string, scenario: string) {
  const answer = await client.launch(runId, scenario);
  expect(answer.status, JSON.stringify(answer.body)).toBe(200);
  return answer;
}

const postEvent = (body: unknown, token = CONTROL_TOKEN) => client.call('POST', '/legacy-agent/event', body, token);

describe.concurrent('a run on the real gate process', () => {
  it('reports session_started, then exactly one session_finished_ready after the quiet window', { timeout: 120_000 }, async () => {
    const runId = 'alpha-run';
    const dispatched = await client.launch(runId, 'normal');
    expect(dispatched.status).toBe(200);
    expect(dispatched.body).toMatchObject({ ok: true, run_id: runId, already_dispatched: false });
    expect(dispatched.body.root_pid).toBeGreaterThan(0);

    const started = await receiver.waitFor(runId, 'session_started', 20_000);
    expect(started.headers.authorization).toBe(`Bearer ${CALLBACK_TOKEN}`);
    expect(started.body.idempotency_key).toMatch(new RegExp(`^${runId}:session_started:\\d{4}-`));

    const finished = await receiver.waitFor(runId, 'session_finished_ready', WINDOW_MS);
    expect(finished.body).toMatchObject({
      run_id: runId,
      project_id: 'alpha',
      gate_state: 'finished_ready',
      process_tracking: { root_alive: false, alive_pids: [] },
      evidence: { run_notes: true, decision_file: true, sufficient_for_paper: true },
    });
    expect(finished.body.idempotency_key).toBe(`${runId}:session_finished_ready:${finished.body.idle_seen_at}`);
    // Judged on the run (quiet_window_scope 'run'): the GPU is at 3 %, but none of its compute processes are the run's.
    expect(finished.body.telemetry.quiet_window).toMatchObject({ samples_in_window: 30, gpu_present: true, peak_gpu_pct: 0, vram_delta_mib: 0 });
    expect(finished.body.telemetry).toMatchObject({ gpu_source: 'nvidia-smi', vram_baseline_mib: 1024 });
    expect(dispatched.body.vram_baseline_mib).toBe(1024);
    // The window counts from the later of the end event and the last process exit.
    expect(finished.at - Date.parse(finished.body.idle_seen_at!)).toBeGreaterThanOrEqual(29_000);
    expect(finished.body.delivered_at).not.toBeNull();

    // Repeated lifecycle events after readiness change nothing and send nothing.
    for (const event of ['session-idle', 'session-end', 'session-stop']) {
      const repeated = await postEvent({ event, run_id: runId, session_id: finished.body.session_id });
      expect(repeated.body).toMatchObject({ ignored: true, gate_state: 'finished_ready' });
    }
    // Dispatching the same run again answers the first result without running the script a second time.
    const again = await client.dispatch(client.dispatchBody(runId));
    expect(again.body).toMatchObject({ already_dispatched: true, root_pid: dispatched.body.root_pid });
    const conflicting = await client.dispatch(client.dispatchBody(runId, { mode: 'resume' }));
    expect(conflicting.status).toBe(409);

    await new Promise((resolve) => setTimeout(resolve, 3000));
    expect(receiver.forRun(runId).map((c) => c.body.event_type)).toEqual(['session_started', 'session_finished_ready']);
    expect(await dispatchCount(fixture, runId)).toBe(1);
  });

  it('reaps a lingering marker process in the project, then reports readiness', { timeout: 120_000 }, async () => {
    const runId = 'bravo-run';
    await launchedRun(runId, 'linger');
    await receiver.waitFor(runId, 'session_started', 20_000);
    const reaped = await waitUntil('the lingering process to be reaped', async () => (await client.runView(runId))?.reaped?.[0], 30_000);
    expect(['terminated', 'killed']).toContain(reaped.outcome);
    expect(reaped.command).toContain('rcp-linger-marker');
    expect(isProcessRunning(reaped.pid)).toBe(false);

    const finished = await receiver.waitFor(runId, 'session_finished_ready', WINDOW_MS);
    expect(finished.body.process_tracking.reaped_pids).toContain(reaped.pid);
    expect(receiver.forRun(runId)).toHaveLength(2);
  });

  it('reports wake_ready when the agent goes idle without ending its session', { timeout: 120_000 }, async () => {
    const runId = 'papa-run';
    await launchedRun(runId, 'idle-only');
    const ready = await receiver.waitFor(runId, 'wake_ready', WINDOW_MS);
    expect(ready.body).toMatchObject({ gate_state: 'wake_ready', evidence: { run_notes: true, decision: 'inconclusive' } });
    expect(ready.body.idempotency_key).toBe(`${runId}:wake_ready:${ready.body.idle_seen_at}`);
    // The session ending afterwards changes nothing: the gate has settled for this session.
    const late = await postEvent({ event: 'session-end', run_id: runId, session_id: ready.body.session_id });
    expect(late.body).toMatchObject({ ignored: true, gate_state: 'wake_ready' });
    await new Promise((resolve) => setTimeout(resolve, 2000));
    expect(receiver.forRun(runId).map((c) => c.body.event_type)).toEqual(['session_started', 'wake_ready']);
  });

  it('reports a question once and then stays settled', { timeout: 60_000 }, async () => {
    const runId = 'charlie-run';
    await launchedRun(runId, 'question');
    const question = await receiver.waitFor(runId, 'question_pending', 20_000);
    expect(question.body.gate_state).toBe('question_pending');
    expect(question.body.question).toEqual(expect.any(String));
    expect(question.body.question!.length).toBeGreaterThan(0);
    await new Promise((resolve) => setTimeout(resolve, 3000));
    expect(receiver.forRun(runId).map((c) => c.body.event_type)).toEqual(['session_started', 'question_pending']);
  });

  it('cancels a run on request: its processes are stopped and no callback follows', { timeout: 60_000 }, async () => {
    const runId = 'cancel-gate-run';
    const launched = await launchedRun(runId, 'slow');
    await receiver.waitFor(runId, 'session_started', 20_000);
    const rootPid = launched.body.root_pid as number;
    expect(isProcessRunning(rootPid)).toBe(true);

    const cancelled = await client.call('POST', `/runs/${runId}/cancel`);
    expect(cancelled.status).toBe(200);
    expect(cancelled.body).toMatchObject({ ok: true, run_id: runId, gate_state: 'cancelled', already_cancelled: false });
    expect(cancelled.body.stopped.length).toBeGreaterThan(0);
    await waitUntil('the cancelled agent to exit', () => (isProcessRunning(rootPid) ? undefined : true), 10_000);
    expect((await client.runView(runId))).toMatchObject({ gate_state: 'cancelled', processes_alive: false });

    const again = await client.call('POST', `/runs/${runId}/cancel`);
    expect(again.body).toMatchObject({ ok: true, already_cancelled: true, stopped: [] });
    expect((await client.call('POST', '/runs/no-such-run/cancel')).status).toBe(404);
    await new Promise((resolve) => setTimeout(resolve, 3000));
    expect(receiver.forRun(runId).map((c) => c.body.event_type)).toEqual(['session_started']);
  });

  it('reports gate_error when the agent exits without any lifecycle event', { timeout: 60_000 }, async () => {
    const runId = 'delta-run';
    await launchedRun(runId, 'silent-exit');
    const error = await receiver.waitFor(runId, 'gate_error', 30_000);
    expect(error.body.gate_state).toBe('error');
    expect(error.body.reason).toMatch(/exited before the agent reported/);
    await new Promise((resolve) => setTimeout(resolve, 2500));
    expect(receiver.forRun(runId)).toHaveLength(1);
  });

  it('answers 502 for a failing script or one that prints no JSON, and 504 when it runs past dispatch_timeout_sec', { timeout: 60_000 }, async () => {
    const failed = await client.launch('echo-run', 'fail');
    expect(failed.status).toBe(502);
    expect(failed.body.detail).toMatchObject({ exit_code: 3 });
    expect(failed.body.detail.stderr_tail).toEqual(expect.any(String));

    const badJson = await client.launch('foxtrot-run', 'bad-json');
    expect(badJson.status).toBe(502);
    expect(badJson.body.detail.message).toMatch(/JSON/);

    const started = Date.now();
    const hung = await client.launch('golf-run', 'hang');
    expect(hung.status).toBe(504);
    expect(Date.now() - started).toBeLessThan((DISPATCH_TIMEOUT_SEC + 7) * 1000);

    // A failed dispatch leaves no run behind, so the control plane may try again.
    const runs = ((await client.dashboard()).body.runs as { run_id: string }[]).map((run) => run.run_id);
    expect(runs).not.toContain('echo-run');
    expect(runs).not.toContain('golf-run');
  });
});

describe('prepare-project', () => {
  const base = { run_id: 'hotel-run', project_id: 'hotel', project_dir: 'hotel', prompt_file: 'prompt.md', prompt_text: 'first' };

  it('creates the workspace, its prompt and .research/project.json', async () => {
    const prepared = await client.prepare({ ...base, workload_class: 'training', machine_target: 'gpu-box' });
    expect(prepared.status).toBe(200);
    expect(prepared.body).toMatchObject({ created: true, overwritten: false });
    expect(await readFile(join(fixture.projectRoot, 'hotel', 'prompt.md'), 'utf8')).toBe('first');
    const projectJson = JSON.parse(await readFile(join(fixture.projectRoot, 'hotel', '.research', 'project.json'), 'utf8'));
    expect(projectJson).toMatchObject({ run_id: 'hotel-run', project_id: 'hotel', workload_class: 'training', machine_target: 'gpu-box' });
  });

  it('treats the same run and prompt as a retry, refuses other existing files without overwrite, replaces them with it', async () => {
    expect((await client.prepare(base)).body).toMatchObject({ created: false });
    const clash = await client.prepare({ ...base, prompt_text: 'second' });
    expect(clash.status).toBe(409);
    expect(clash.body.detail).toMatch(/already exist/);
    expect(await readFile(join(fixture.projectRoot, 'hotel', 'prompt.md'), 'utf8')).toBe('first');
    const replaced = await client.prepare({ ...base, prompt_text: 'second', overwrite: true });
    expect(replaced.body).toMatchObject({ created: true, overwritten: true });
    expect(await readFile(join(fixture.projectRoot, 'hotel', 'prompt.md'), 'utf8')).toBe('second');
  });

  it.each([
    ['a parent-relative project_dir', { project_dir: '../outside' }],
    ['an absolute project_dir elsewhere', { project_dir: '/tmp/elsewhere' }],
    ['project_root itself', { project_dir: '.' }],
    ['a prompt_file climbing out', { prompt_file: '../../escape.md' }],
    ['an absolute prompt_file elsewhere', { prompt_file: '/etc/passwd' }],
  ])('refuses %s with 400', async (_name, change) => {
    const refused = await client.prepare({ ...base, run_id: 'india-run', project_dir: 'india', ...change });
    expect(refused.status).toBe(400);
    expect(refused.body.detail).toMatch(/escapes project_root|must name a file/);
  });

  it('refuses a symbolic link that leads out of project_root', async () => {
    const outside = join(fixture.dir, 'outside');
    await mkdir(outside, { recursive: true });
    await symlink(outside, join(fixture.projectRoot, 'sneaky'));
    const refused = await client.prepare({ ...base, run_id: 'juliet-run', project_dir: 'sneaky/inner' });
    expect(refused.status).toBe(400);
    expect(refused.body.detail).toMatch(/symbolic link/);
  });

  it('rejects unknown fields and bad values with 422', async () => {
    const unknown = await client.prepare({ ...base, surprise: true });
    expect(unknown.status).toBe(422);
    expect(unknown.body.detail).toContainEqual(expect.objectContaining({ loc: ['body', 'surprise'] }));
    const badEffort = await client.dispatch({ ...base, prompt_text: undefined, reasoning_effort: 'extreme' });
    expect(badEffort.status).toBe(422);
  });
});

describe('authentication and the event hook', () => {
  it('guards the gate routes with the worker gate token and the event hook with the control API token', async () => {
    for (const [method, path] of [['POST', '/prepare-project'], ['POST', '/dispatch'], ['GET', '/dashboard/api'], ['POST', '/runs/kilo-run/cancel']] as const) {
      expect((await client.call(method, path, method === 'POST' ? {} : undefined, CONTROL_TOKEN)).status).toBe(401);
      const anonymous = await fetch(`${fixture.url}${path}`, { method });
      expect(anonymous.status).toBe(401);
      expect(anonymous.headers.get('www-authenticate')).toBe('Bearer');
    }
    expect((await postEvent({ event: 'session-idle', run_id: 'kilo-run' }, GATE_TOKEN)).status).toBe(401);
    expect((await fetch(`${fixture.url}/healthz`)).status).toBe(200);
    expect((await fetch(`${fixture.url}/no-such-path`)).status).toBe(401);
    expect((await client.call('GET', '/no-such-path')).status).toBe(404);
  });

  it('answers 422 for invalid events and records events of unknown runs without acting on them', async () => {
    const invalid = await postEvent({ event: 'session-nap', run_id: 'kilo-run' });
    expect(invalid.status).toBe(422);
    expect(invalid.body.detail[0].loc).toEqual(['body', 'event']);
    expect((await postEvent({ event: 'session-idle', run_id: 'kilo-run', extra: 1 })).status).toBe(422);
    expect((await postEvent({ event: 'session-idle', run_id: 'kilo-run', timestamp: 'yesterday' })).status).toBe(422);

    const unknown = await postEvent({ event: 'session-start', run_id: 'lima-run', session_id: 's-1', timestamp: new Date().toISOString() });
    expect(unknown.status).toBe(200);
    expect(unknown.body).toMatchObject({ recorded: true, ignored: true, ignore_reason: 'unknown run' });
    const events = (await client.dashboard()).body.events as { kind: string; run_id: string }[];
    expect(events).toContainEqual(expect.objectContaining({ kind: 'lifecycle_event', run_id: 'lima-run', ignored: true }));
    expect(receiver.forRun('lima-run')).toHaveLength(0);
  });

  it('reports CPU, memory and GPU figures from the first request after it is ready', () => {
    expect(firstSnapshot.status).toBe(200);
    expect(firstSnapshot.body.telemetry).toMatchObject({ cpu_pct: expect.any(Number), memory_available_mib: expect.any(Number), gpu_pct: 3 });
  });

  it('shows the service, totals, telemetry and the callback-token fingerprint on /dashboard/api', async () => {
    const { status, body } = await client.dashboard();
    expect(status).toBe(200);
    // The fingerprint the control plane computes from its own token, and not the bare SHA-256 of the token.
    expect(body.service.completion_callback_token_fingerprint).toBe(callbackTokenFingerprint(CALLBACK_TOKEN));
    expect(body.service.completion_callback_token_fingerprint).toMatch(/^[0-9a-f]{16}$/);
    expect(createHash('sha256').update(CALLBACK_TOKEN).digest('hex')).not.toContain(body.service.completion_callback_token_fingerprint);
    expect(body.totals).toEqual(expect.objectContaining({ active_or_waiting: expect.any(Number), live: expect.any(Number), callback_pending: expect.any(Number) }));
    expect(body.telemetry).toEqual(
      expect.objectContaining({ cpu_pct: expect.any(Number), memory_available_mib: expect.any(Number), memory_source: expect.any(String), gpu_compute_pids: [] }),
    );
    expect(body.telemetry).toMatchObject({ gpu_source: 'nvidia-smi', gpu_pct: 3, vram_used_mib: 1024 });
    expect(JSON.stringify(body)).not.toContain(CALLBACK_TOKEN);
    expect(JSON.stringify(body)).not.toContain(CONTROL_TOKEN);
    const limited = await client.call('GET', '/dashboard/api?limit=1&event_limit=2');
    expect(limited.body.runs.length).toBeLessThanOrEqual(1);
    expect(limited.body.events).toHaveLength(2);
    expect((await client.call('GET', '/dashboard/api?limit=0')).status).toBe(422);
    // A run's event-token digest would let a stolen copy be matched offline; no reader needs it.
    expect(body.runs.length).toBeGreaterThan(0);
    for (const run of body.runs) expect(run).not.toHaveProperty('event_token_sha256');
  });

  it('refuses a body on cancel, which takes none, and cancels nothing', async () => {
    const refused = await client.call('POST', '/runs/alpha-run/cancel', { reason: 'operator asked' });
    expect(refused.status).toBe(422);
    expect(refused.body.detail).toEqual([{ loc: ['body'], msg: 'this route takes no body', type: 'body_not_allowed' }]);
    const runs = (await client.dashboard()).body.runs as { run_id: string; gate_state: string }[];
    expect(runs.find((run) => run.run_id === 'alpha-run')?.gate_state).not.toBe('cancelled');
  });
});

describe('the gate alone', () => {
  it('keeps its records as files under state_dir, with no database and no Temporal', async () => {
    const state = join(fixture.dir, 'state');
    expect(existsSync(join(state, 'worker-gate', 'runs', 'alpha-run.json'))).toBe(true);
    expect(existsSync(join(state, 'worker-gate', 'events.jsonl'))).toBe(true);
    expect(existsSync(join(state, 'pgdata'))).toBe(false);
    expect(existsSync(join(state, 'temporal'))).toBe(false);
    expect(gate.output()).toContain('no database, no Temporal');
  });

  it('never writes the tokens to its log', async () => {
    expect(gate.output()).not.toContain(GATE_TOKEN);
    expect(gate.output()).not.toContain(CONTROL_TOKEN);
    expect(gate.output()).not.toContain(CALLBACK_TOKEN);
  });
});
