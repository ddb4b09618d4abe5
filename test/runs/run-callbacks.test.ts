import { Agent, request as httpRequest } from 'node:http';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { CALLBACK_OBJECT_MAX_BYTES, CALLBACK_OBJECT_MAX_DEPTH } from '../../worker-gate/contract/callback-body.ts';
import { CALLBACK_TOKEN, CONTROL_TOKEN, GATE_TOKEN, waitUntil } from '../support/gate.ts';
import { gateTarget, ledgerReads, RUN_STACK_START_MS, startRunStack, type RunStack } from '../support/run-stack.ts';

// expected duration: ~15 s

/**
 * POST /control/api/worker-callback against real runs (docs/runs.md#runs): a control plane (HTTP + Temporal worker on
 * Postgres) and a worker gate running the fake agent. Each test dispatches its own project on its own lane; the
 * 'slow' agent keeps its run in awaiting_wake/running for two minutes, so the callbacks a test sends are the only ones
 * that move it. Callbacks are built here, in the shape the gate posts (domain/worker-callback.ts).
 */

const CALLBACK_PATH = '/control/api/worker-callback';

let stack: RunStack;
const { queueItem, runRow, count } = ledgerReads(() => stack.store);

beforeAll(async () => {
  stack = await startRunStack({
    defaultLane: false,
    controlPlaneOverrides: (gate) => ({ worker_targets: { replay: gateTarget(gate), stale: gateTarget(gate), burst: gateTarget(gate), foreign: gateTarget(gate), contest: gateTarget(gate) } }),
  });
}, RUN_STACK_START_MS);

afterAll(() => stack?.close());

afterEach(async () => {
  await stack.store.query(`UPDATE queue_items SET status = 'paused' WHERE status = 'queued'`);
});

const setScenario = (projectId: string, scenario: Record<string, unknown>) => stack.writeScenario(projectId, scenario);

const seed = (projectId: string, lane: string, scenario: Record<string, unknown>) => stack.seed(projectId, { projectName: `Callback ${projectId}`, lane, scenario });

const dispatchLive = () => stack.api('POST', '/control/dispatch-next', { dry_run: false, requested_by: 'callback-test' });

/** Dispatches the one queued item; the worker must accept it. */
async function startRun(projectId: string): Promise<string> {
  const live = await dispatchLive();
  expect(live.status, JSON.stringify(live.body)).toBe(200);
  expect(live.body).toMatchObject({ action: 'live_dispatch', candidate: { project_id: projectId } });
  stack.agents.remember(live.body);
  return live.body.run_id as string;
}

/** Cancels a run the test no longer needs and makes sure its agent is gone, even where the cancel never reached the gate. */
async function stopRun(runId: string): Promise<void> {
  await stack.api('POST', `/control/api/runs/${runId}/cancel`, { requested_by: 'callback-test' });
  await stack.killRunAgent(runId);
}

const storedCallback = async (key: string) =>
  (await stack.store.query('SELECT run_id, project_id, event_type, ignored, ignore_reason, signaled_at FROM worker_callbacks WHERE idempotency_key = $1', [key])).rows;

/** What changes when a callback acts on a run: compared before and after a callback that must change nothing. */
async function runFootprint(runId: string, projectId: string) {
  const item = await queueItem(projectId);
  return {
    run_state: (await runRow(runId))?.state,
    item: { status: item.status, current_run_id: item.current_run_id, last_run_state: item.last_run_state, last_error: item.last_error },
    transitions: await count('SELECT 1 FROM run_transitions WHERE run_id = $1', [runId]),
    events: await count('SELECT 1 FROM audit_events WHERE entity_id = $1', [runId]),
  };
}

let stamp = 0;
/** A distinct ISO time per call, as a redelivery has. */
const freshTime = () => new Date(Date.UTC(2030, 0, 1) + (stamp += 1) * 1000).toISOString();

/** A callback as the worker gate posts it (WorkerCallbackSchema). */
function callback(runId: string, projectId: string, eventType: string, key: string, overrides: Record<string, unknown> = {}): Record<string, any> {
  return {
    event_type: eventType,
    run_id: runId,
    session_id: 'test-session',
    project_id: projectId,
    gate_state: eventType === 'gate_error' ? 'error' : 'running',
    reason: `${eventType} sent by the test`,
    idle_seen_at: null,
    seen_at: freshTime(),
    delivered_at: freshTime(),
    telemetry: {
      cpu_pct: 2.5,
      gpu_pct: null,
      vram_used_mib: null,
      vram_baseline_mib: null,
      memory_available_mib: 64000,
      gpu_source: 'none',
      quiet_window: null,
    },
    process_tracking: { root_pid: 4242, process_group_id: 4242, tmux_session: null, root_alive: true, alive_pids: [4242], reaped_pids: [] },
    idempotency_key: key,
    ...overrides,
  };
}

/** A body sent as this JSON text, for nesting deeper than JSON.stringify can write. */
class RawJson {
  readonly text: string;
  constructor(text: string) {
    this.text = text;
  }
}

/** Raw POST, so a test can send no Authorization header at all. */
async function postCallback(body: unknown, bearer: string | null = CALLBACK_TOKEN) {
  const response = await fetch(`${stack.cpFixture.url}${CALLBACK_PATH}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...(bearer === null ? {} : { authorization: `Bearer ${bearer}` }) },
    body: body instanceof RawJson ? body.text : JSON.stringify(body),
  });
  const text = await response.text();
  return { status: response.status, headers: response.headers, text, body: (text ? JSON.parse(text) : null) as Record<string, any> };
}

/** Many deliveries at once share a bounded pool of keep-alive connections, as a gate's outbox retries would. */
const burstAgent = new Agent({ keepAlive: true, maxSockets: 64 });
afterAll(() => burstAgent.destroy());

function postCallbackPooled(body: unknown): Promise<{ status: number; text: string }> {
  const payload = JSON.stringify(body);
  return new Promise((resolve, reject) => {
    const request = httpRequest(
      `${stack.cpFixture.url}${CALLBACK_PATH}`,
      { method: 'POST', agent: burstAgent, headers: { 'content-type': 'application/json', authorization: `Bearer ${CALLBACK_TOKEN}`, 'content-length': Buffer.byteLength(payload) } },
      (response) => {
        let text = '';
        response.setEncoding('utf8');
        response.on('data', (chunk: string) => (text += chunk));
        response.on('end', () => resolve({ status: response.statusCode ?? 0, text }));
      },
    );
    request.on('error', reject);
    request.end(payload);
  });
}

describe('worker callback: authentication and validation', () => {
  it('takes the completion callback token alone, and refuses the control token, the gate token or none', async () => {
    const viaCallbackToken = await postCallback(callback('auth-one-20300101T000000Z', 'auth-one', 'session_started', 'auth:callback-token'), CALLBACK_TOKEN);
    expect(viaCallbackToken.status).toBe(200);
    expect(viaCallbackToken.body).toMatchObject({ ok: true, idempotency_key: 'auth:callback-token', ignored: true });

    for (const [key, bearer] of [
      ['auth:control-token', CONTROL_TOKEN],
      ['auth:gate-token', GATE_TOKEN],
      ['auth:none', null],
      ['auth:wrong', `${CALLBACK_TOKEN}x`],
    ] as const) {
      const refused = await postCallback(callback('auth-one-20300101T000000Z', 'auth-one', 'session_started', key), bearer);
      expect(refused.status, key).toBe(401);
      expect(refused.body).toEqual({ detail: 'invalid bearer token' });
      expect(refused.headers.get('www-authenticate')).toBe('Bearer');
      expect(await storedCallback(key)).toEqual([]);
    }
    expect(await storedCallback('auth:callback-token')).toHaveLength(1);
  });

  it('refuses an invalid body with 422 naming the field, and stores nothing', async () => {
    const before = await count('SELECT 1 FROM worker_callbacks');
    const valid = callback('invalid-one-20300101T000000Z', 'invalid-one', 'session_started', 'invalid:key');
    const { idempotency_key: _key, ...withoutKey } = valid;
    const cases: [Record<string, unknown> | RawJson, (string | number)[]][] = [
      [withoutKey, ['body', 'idempotency_key']],
      [{ ...valid, idempotency_key: '' }, ['body', 'idempotency_key']],
      [{ ...valid, event_type: 'session_exploded' }, ['body', 'event_type']],
      [{ ...valid, gate_state: 'sleeping' }, ['body', 'gate_state']],
      [{ ...valid, surprise: true }, ['body', 'surprise']],
      [{ ...valid, run_id: 42 }, ['body', 'run_id']],
      [{ ...valid, telemetry: 'busy' }, ['body', 'telemetry']],
      [{ ...valid, process_tracking: [4242] }, ['body', 'process_tracking']],
      [{ ...valid, evidence: true }, ['body', 'evidence']],
      [{ ...valid, telemetry: { log: 'x'.repeat(CALLBACK_OBJECT_MAX_BYTES) } }, ['body', 'telemetry']],
      [{ ...valid, process_tracking: nested(CALLBACK_OBJECT_MAX_DEPTH + 1) }, ['body', 'process_tracking']],
      // Deeper than the call stack goes, were the depth measured all the way down.
      [new RawJson(JSON.stringify({ ...valid, evidence: 'DEEP' }).replace('"DEEP"', `${'{"a":['.repeat(50_000)}1${']}'.repeat(50_000)}`)), ['body', 'evidence']],
    ];
    for (const [body, loc] of cases) {
      const refused = await postCallback(body);
      expect(refused.status, JSON.stringify(loc)).toBe(422);
      expect(refused.body.detail).toContainEqual(expect.objectContaining({ loc }));
      for (const problem of refused.body.detail as { loc: unknown[] }[]) expect(problem.loc[0]).toBe('body');
    }
    expect(await count('SELECT 1 FROM worker_callbacks')).toBe(before);
    expect(await storedCallback('invalid:key')).toEqual([]);
  });
});

/** `{a: {a: ... {}}}`, `depth` objects deep. */
const nested = (depth: number): Record<string, unknown> => (depth <= 1 ? {} : { a: nested(depth - 1) });


describe('worker callback: a gate of another implementation', () => {
  it('acts on a callback whose telemetry, process tracking and evidence have another shape, storing them as sent', { timeout: 60_000 }, async () => {
    await seed('foreign-one', 'foreign', { scenario: 'slow', work_sec: 120 });
    const runId = await startRun('foreign-one');
    const key = `${runId}:session_finished_ready:foreign`;
    const telemetry = { cpu_pct_avg: 1.5, cpu_pct_peak: 3.0, gpu_pct_avg: 0, gpu_pct_peak: 0 };
    const processTracking = { process_alive: false, descendants_alive: false };
    // Wrong types count as absent; fields this control plane does not know are kept in the stored payload only.
    const evidence = { run_notes: true, decision_file: 'yes', results_json_files: 2, decision: 'finalize_positive', notebook: { cells: 3 } };
    const body = callback(runId, 'foreign-one', 'session_finished_ready', key, { gate_state: 'finished_ready', telemetry, process_tracking: processTracking, evidence });

    const answer = await postCallback(body);
    expect(answer.status, answer.text).toBe(200);
    expect(answer.body).toEqual({ ok: true, idempotency_key: key, run_id: runId, event_type: 'session_finished_ready', ignored: false });
    await waitUntil('the item to complete', async () => ((await queueItem('foreign-one')).status === 'completed' ? true : undefined), 20_000, 200);

    const stored = await stack.store.query<{ payload: Record<string, unknown> }>('SELECT payload FROM worker_callbacks WHERE idempotency_key = $1', [key]);
    expect(stored.rows[0]!.payload).toMatchObject({ telemetry, process_tracking: processTracking, evidence });
    const run = await stack.store.query<{ decision: string | null; evidence: Record<string, unknown> }>('SELECT decision, evidence FROM runs WHERE run_id = $1', [runId]);
    expect(run.rows[0]).toEqual({
      decision: 'finalize_positive',
      evidence: { run_notes: true, decision_file: false, results_json_files: 2, decision: 'finalize_positive', decision_summary: null, sufficient_for_paper: true },
    });
    await stack.killRunAgent(runId);
  });
});

describe('worker callback: token usage', () => {
  it("shows the agent's tokens its newest callback reported in the v1 run list and the run detail, and refuses a malformed count", { timeout: 60_000 }, async () => {
    await seed('tokens-one', 'foreign', { scenario: 'slow', work_sec: 120 });
    const runId = await startRun('tokens-one');
    const usageOf = async () => {
      const list = await stack.api('GET', `/control/api/v1/runs?project=tokens-one`);
      const detail = await stack.api('GET', `/control/api/v1/runs/${runId}`);
      expect([list.status, detail.status], JSON.stringify([list.body, detail.body]).slice(0, 600)).toEqual([200, 200]);
      return { list: list.body.items[0].token_usage, detail: detail.body.run.token_usage };
    };
    expect(await usageOf()).toEqual({ list: null, detail: null });

    const started = { input_tokens: 1200, output_tokens: 80, total_tokens: 1280 };
    expect((await postCallback(callback(runId, 'tokens-one', 'session_started', `${runId}:tokens:1`, { token_usage: started }))).status).toBe(200);
    expect(await usageOf()).toEqual({ list: started, detail: started });
    // A later callback without a count leaves the last one reported; a newer count replaces it.
    expect((await postCallback(callback(runId, 'tokens-one', 'session_started', `${runId}:tokens:2`))).status).toBe(200);
    const later = { input_tokens: 5000, output_tokens: 400, total_tokens: 5400 };
    expect((await postCallback(callback(runId, 'tokens-one', 'session_started', `${runId}:tokens:3`, { token_usage: later }))).status).toBe(200);
    expect(await usageOf()).toEqual({ list: later, detail: later });

    const malformed = await postCallback(callback(runId, 'tokens-one', 'session_started', `${runId}:tokens:4`, { token_usage: { input_tokens: -1, output_tokens: 0, total_tokens: 0 } }));
    expect(malformed.status).toBe(422);
    expect(JSON.stringify(malformed.body)).toContain('token_usage');
    await stopRun(runId);
  });
});

describe('worker callback: which callbacks act', () => {
  it('records a callback for an unknown run and answers ignored', async () => {
    const key = 'unknown-run:session_started:1';
    const answer = await postCallback(callback('ghost-20300101T000000Z', 'ghost', 'session_started', key));
    expect(answer.status).toBe(200);
    expect(answer.body).toMatchObject({ ok: true, idempotency_key: key, run_id: 'ghost-20300101T000000Z', event_type: 'session_started', ignored: true });
    expect(answer.body.ignore_reason).toMatch(/unknown run/);
    expect(await storedCallback(key)).toEqual([
      { run_id: 'ghost-20300101T000000Z', project_id: 'ghost', event_type: 'session_started', ignored: true, ignore_reason: answer.body.ignore_reason, signaled_at: null },
    ]);
    expect(await count('SELECT 1 FROM runs WHERE run_id = $1', ['ghost-20300101T000000Z'])).toBe(0);
  });

  it('answers a redelivery with the first answer and a reused key with other content with 409', { timeout: 60_000 }, async () => {
    await seed('replay-one', 'replay', { scenario: 'slow', work_sec: 120 });
    const runId = await startRun('replay-one');
    const key = `${runId}:session_started:test`;
    const first = callback(runId, 'replay-one', 'session_started', key);
    const answer = await postCallback(first);
    expect(answer.status).toBe(200);
    expect(answer.body).toEqual({ ok: true, idempotency_key: key, run_id: runId, event_type: 'session_started', ignored: false });

    const redelivered = await postCallback({ ...first, seen_at: freshTime(), delivered_at: freshTime() });
    expect(redelivered.status).toBe(200);
    expect(redelivered.body).toEqual(answer.body);
    const withoutDelivery = await postCallback({ ...first, delivered_at: null });
    expect(withoutDelivery.status).toBe(200);
    expect(withoutDelivery.body).toEqual(answer.body);

    for (const changed of [{ reason: 'something else happened' }, { session_id: 'another-session' }, { telemetry: { ...first.telemetry, cpu_pct: 99 } }]) {
      const conflict = await postCallback({ ...first, ...changed });
      expect(conflict.status, JSON.stringify(changed)).toBe(409);
      expect(conflict.body).toEqual({ detail: `idempotency key '${key}' was reused with different payload` });
    }
    const rows = await storedCallback(key);
    expect(rows).toHaveLength(1);
    expect(rows[0]).toMatchObject({ run_id: runId, ignored: false });
    const stored = await stack.store.query<{ payload: Record<string, unknown> }>('SELECT payload FROM worker_callbacks WHERE idempotency_key = $1', [key]);
    expect(stored.rows[0]!.payload.reason).toBe(first.reason);
    expect(['awaiting_wake', 'running']).toContain((await queueItem('replay-one')).status);
    await stopRun(runId);
  });

  it('ignores a callback for an earlier run of the project, changing nothing', { timeout: 60_000 }, async () => {
    await seed('stale-one', 'stale', { scenario: 'bad-json' });
    const failed = await dispatchLive();
    expect(failed.status, JSON.stringify(failed.body)).toBe(502);
    const staleRunId = failed.body.detail.run_id as string;
    expect((await runRow(staleRunId))!.state).toBe('dispatch_error');

    await setScenario('stale-one', { scenario: 'slow', work_sec: 120 });
    const runId = await startRun('stale-one');
    expect(runId).not.toBe(staleRunId);
    await waitUntil('the run to be running', async () => ((await queueItem('stale-one')).status === 'running' ? true : undefined), 20_000, 200);

    const before = { current: await runFootprint(runId, 'stale-one'), stale: await runFootprint(staleRunId, 'stale-one') };
    for (const eventType of ['session_finished_ready', 'gate_error']) {
      const key = `${staleRunId}:${eventType}:late`;
      const answer = await postCallback(callback(staleRunId, 'stale-one', eventType, key));
      expect(answer.status).toBe(200);
      expect(answer.body).toMatchObject({ ok: true, run_id: staleRunId, ignored: true });
      expect(answer.body.ignore_reason).toMatch(/stale run/);
      expect(await storedCallback(key)).toEqual([expect.objectContaining({ ignored: true, ignore_reason: answer.body.ignore_reason })]);
    }
    // A callback naming the current run under another project is not acted on either.
    const wrongProject = await postCallback(callback(runId, 'other-project', 'gate_error', `${runId}:gate_error:wrong-project`));
    expect(wrongProject.body).toMatchObject({ ignored: true });
    expect(wrongProject.body.ignore_reason).toMatch(/belongs to project stale-one/);

    // Give a wrongly delivered signal time to act before checking that nothing moved.
    await new Promise((resolve) => setTimeout(resolve, 1500));
    expect({ current: await runFootprint(runId, 'stale-one'), stale: await runFootprint(staleRunId, 'stale-one') }).toEqual(before);
    expect((await queueItem('stale-one')).status).toBe('running');
    await stopRun(runId);
  });

  it('acts once on 1,000 concurrent deliveries of one callback, then ignores callbacks for the finished run', { timeout: 90_000 }, async () => {
    await seed('burst-one', 'burst', { scenario: 'slow', work_sec: 120 });
    const runId = await startRun('burst-one');
    const key = `${runId}:gate_error:2030-01-01T00:00:00.000Z`;
    const body = callback(runId, 'burst-one', 'gate_error', key, { reason: 'synthetic gate error' });

    const answers = await Promise.all(Array.from({ length: 1000 }, () => postCallbackPooled(body)));
    expect(answers.filter((answer) => answer.status !== 200).map((answer) => `${answer.status} ${answer.text}`)).toEqual([]);
    const expected = { ok: true, idempotency_key: key, run_id: runId, event_type: 'gate_error', ignored: false };
    for (const answer of answers) expect(JSON.parse(answer.text)).toEqual(expected);

    await waitUntil('the item to be blocked', async () => ((await queueItem('burst-one')).status === 'blocked' ? true : undefined), 20_000, 200);
    const item = await queueItem('burst-one');
    expect(item).toMatchObject({ status: 'blocked', current_run_id: runId, last_run_state: 'gate_error' });
    expect(item.last_error).toMatch(/gate_error: synthetic gate error/);
    expect((await runRow(runId))!.state).toBe('gate_error');
    expect(await count('SELECT 1 FROM worker_callbacks WHERE idempotency_key = $1', [key])).toBe(1);
    expect(await count(`SELECT 1 FROM audit_events WHERE entity_id = $1 AND event_type = 'run.gate_error'`, [runId])).toBe(1);
    expect(await count(`SELECT 1 FROM run_transitions WHERE run_id = $1 AND transition = 'gate_error'`, [runId])).toBe(1);

    // The run has finished: a later callback is recorded and ignored; a redelivery of the acted-on one answers as before.
    const before = await runFootprint(runId, 'burst-one');
    const lateKey = `${runId}:session_finished_ready:late`;
    const late = await postCallback(callback(runId, 'burst-one', 'session_finished_ready', lateKey));
    expect(late.status).toBe(200);
    expect(late.body).toMatchObject({ ok: true, run_id: runId, ignored: true });
    expect(late.body.ignore_reason).toMatch(/already finished \(gate_error\)/);
    expect(await storedCallback(lateKey)).toEqual([expect.objectContaining({ ignored: true })]);
    const again = await postCallback({ ...body, delivered_at: freshTime() });
    expect(again.status).toBe(200);
    expect(again.body).toEqual(expected);
    await new Promise((resolve) => setTimeout(resolve, 1000));
    expect(await runFootprint(runId, 'burst-one')).toEqual(before);

    await stack.killRunAgent(runId);
  });

  it('answers 100 concurrent deliveries of one key with 100 different payloads: one stored, every other one 409', { timeout: 60_000 }, async () => {
    await seed('contest-one', 'contest', { scenario: 'slow', work_sec: 120 });
    const runId = await startRun('contest-one');
    const key = `${runId}:session_started:contest`;
    const bodies = Array.from({ length: 100 }, (_, index) => callback(runId, 'contest-one', 'session_started', key, { reason: `variant ${index}` }));

    const answers = await Promise.all(bodies.map((body) => postCallbackPooled(body)));
    const accepted = answers.flatMap((answer, index) => (answer.status === 200 ? [index] : []));
    expect(accepted).toHaveLength(1);
    const conflicts = answers.filter((answer) => answer.status === 409);
    expect(conflicts).toHaveLength(99);
    for (const conflict of conflicts) expect(JSON.parse(conflict.text)).toEqual({ detail: `idempotency key '${key}' was reused with different payload` });

    const stored = await stack.store.query<{ payload: Record<string, unknown> }>('SELECT payload FROM worker_callbacks WHERE idempotency_key = $1', [key]);
    expect(stored.rows.map((row) => row.payload.reason)).toEqual([`variant ${accepted[0]}`]);
    // The stored one wins for good: a redelivery of it is answered, any other variant still conflicts.
    expect((await postCallbackPooled(bodies[accepted[0]!])).status).toBe(200);
    expect((await postCallbackPooled(bodies[(accepted[0]! + 1) % 100])).status).toBe(409);
    await stopRun(runId);
  });
});
