import { createServer, type Server } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { insertProject } from '../../capabilities/runs/projects.ts';
import { insertQueueItem, type QueueItemInsert } from '../../capabilities/runs/queue-items.ts';
import { workerRoutingFrom } from '../../capabilities/runs/domain/worker-lanes.ts';
import { gateIdentityProof } from '../../platform/http/tokens.ts';
import { NO_WORKERS, startTestApp, TEST_TOKEN, type TestApp } from '../support/app.ts';
import { launchChromium, openDashboard } from '../support/browser.ts';
import { scrape, sampleValue } from '../support/prometheus.ts';
import { rcpCli } from '../support/rcp-cli.ts';

// expected duration: ~20 s

/**
 * Why nothing moves (GET /control/api/v1/why, `rcp why`, the overview): every reason comes from a real state of the
 * ledgers, the lanes and a gate. A stand-in gate (a real HTTP server) holds the runs in flight and judges their quiet
 * windows; one target's gate is down, and a real preflight of it fails.
 */

const GATE_TOKEN = 'why-gate-token-0123456789abcdef0123';
const STAMP = '20261129T090000Z';
const run = (project: string) => `${project}-${STAMP}`;
const QUESTION = 'Which dataset should I use?\n\u001b[31mthe red one\u001b[0m';
const CPU_REASON = 'mean CPU 63% above threshold 20%';

let gate: Server;
let t: TestApp;
let controlUrl: string;

function quietWindow(samples: number, overdue: boolean, waitingSec: number) {
  return { samples_in_window: samples, samples_needed: 30, verdict: 'waiting_for_quiet_window', reasons: [CPU_REASON], waiting_sec: waitingSec, overdue, idle_sustain_sec: 30, scope: 'run' };
}

const GATE_RUNS = [
  { run_id: run('on-busy'), gate_state: 'running', processes_alive: true, updated_at: new Date().toISOString(), quiet_window: quietWindow(12, false, 20) },
  { run_id: run('on-far'), gate_state: 'finished_pending_gate', processes_alive: false, updated_at: new Date().toISOString(), quiet_window: quietWindow(30, true, 5400) },
];

async function seedItem(item: Partial<QueueItemInsert> & { project_id: string }, runState?: string, runColumns: Record<string, unknown> = {}) {
  await t.store.transaction(async (tx) => {
    await insertProject(tx, { project_id: item.project_id, project_name: `Study ${item.project_id}`, project_dir: item.project_id, workload_class: item.workload_class ?? 'unknown' });
    await insertQueueItem(tx, { project_name: `Study ${item.project_id}`, ...item });
    if (!runState) return;
    const runId = run(item.project_id);
    await tx.query(
      `INSERT INTO runs (run_id, project_id, workflow_id, state, lane, wake_gate_url, workload_class, requested_by, question, usage_limit)
       VALUES ($1, $2, $3, $4, $5, 'http://127.0.0.1:9', 'unknown', 'test', $6, $7::jsonb)`,
      [runId, item.project_id, `run:${runId}`, runState, item.lane, runColumns.question ?? null, runColumns.usage_limit ? JSON.stringify(runColumns.usage_limit) : null],
    );
    await tx.query('UPDATE queue_items SET current_run_id = $1 WHERE project_id = $2', [runId, item.project_id]);
  });
}

beforeAll(async () => {
  gate = createServer((request, response) => {
    if (request.url?.startsWith('/gate-identity')) {
      const challenge = new URL(request.url, 'http://gate').searchParams.get('challenge') ?? '';
      response.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ service: 'worker-gate', proof: gateIdentityProof(GATE_TOKEN, challenge) }));
    } else if (request.url?.startsWith('/dashboard/api')) {
      response.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ ok: true, runs: GATE_RUNS }));
    } else response.writeHead(404).end();
  });
  await new Promise<void>((resolve) => gate.listen(0, '127.0.0.1', resolve));
  const url = `http://127.0.0.1:${(gate.address() as { port: number }).port}`;
  const up = { wake_gate_url: url, bearer_token: GATE_TOKEN, role: 'gpu_worker' as const };
  const down = { wake_gate_url: 'http://127.0.0.1:9', bearer_token: GATE_TOKEN, role: 'gpu_worker' as const };
  const routing = workerRoutingFrom({
    worker_targets: { busy: up, slots: { ...up, slots: 2 }, far: up, silent: down, down, free: { ...up, role: 'cpu_worker' }, 'cpu-box': { ...up, role: 'cpu_worker' } },
    workload_machine_targets: {},
  });
  t = await startTestApp({ dispatch: { ...NO_WORKERS, liveDispatchEnabled: true, routing } });

  // The runs in flight: working, waiting on a question, waiting out a usage limit, overdue, and one whose gate is down.
  await seedItem({ project_id: 'on-busy', machine_target: 'busy', status: 'running', lane: 'busy' }, 'running');
  await seedItem({ project_id: 'on-slots-1', machine_target: 'slots', status: 'running', lane: 'slots' }, 'question_pending', { question: QUESTION });
  const limit = { resets_at: '2026-11-29T12:00:00.000Z', resumes_at: '2026-11-29T12:00:05.000Z', holds_slot: true };
  await seedItem({ project_id: 'on-slots-2', machine_target: 'slots', status: 'running', lane: 'slots/2' }, 'usage_limited', { usage_limit: limit });
  await seedItem({ project_id: 'on-far', machine_target: 'far', status: 'running', lane: 'far' }, 'awaiting_wake');
  await seedItem({ project_id: 'on-silent', machine_target: 'silent', status: 'running', lane: 'silent' }, 'running');
  // The queue, in dispatch order.
  const queued: (Partial<QueueItemInsert> & { project_id: string })[] = [
    { project_id: 'go-first', machine_target: 'free' },
    { project_id: 'go-second', machine_target: 'free' },
    { project_id: 'wait-busy', machine_target: 'busy' },
    { project_id: 'wait-slots', machine_target: 'slots' },
    { project_id: 'wait-down', machine_target: 'down' },
    { project_id: 'too-big', machine_target: 'cpu-box', gpu_count: 1 },
    { project_id: 'after-big', machine_target: 'cpu-box' },
    { project_id: 'flagged', machine_target: 'free', manual_review_required: true },
    { project_id: 'laneless', workload_class: 'inference_eval' },
  ];
  for (const [index, item] of queued.entries()) await seedItem({ dispatch_priority: index + 1, ...item });
  controlUrl = await t.app.listen({ port: 0, host: '127.0.0.1' });
});

afterAll(async () => {
  await t?.close();
  await new Promise((resolve) => gate?.close(resolve));
});

const api = async (method: 'GET' | 'POST', url: string, payload?: Record<string, unknown>) => {
  const answer = await t.app.inject({ method, url, headers: t.auth, ...(payload === undefined ? {} : { payload }) });
  expect(answer.statusCode, answer.body).toBe(200);
  return answer.json();
};
const why = () => api('GET', '/control/api/v1/why');
const byKey = <T extends Record<string, any>>(rows: T[], key: string) => Object.fromEntries(rows.map((row) => [row[key], { kind: row.kind, reason: row.reason }]));

describe('why nothing moves', () => {
  it('says, for each queued item, each lane and each active run, what holds it', async () => {
    // A real preflight of the target whose gate is down fails, and is what holds its item.
    const preflight = await api('POST', '/control/api/preflight', { machine_target: 'down', require_paused: false });
    expect(preflight.ok).toBe(false);

    const answer = await why();
    expect(answer.blockers).toEqual([]);
    expect(answer.summary).toBe(
      '1 item can go now, first go-first to free; nothing dispatches by itself while the queue pump is off (rcp dispatch, or queue_pump_enabled). 5 runs are active, 2 waiting for you.',
    );
    const items = byKey(answer.items, 'project_id');
    const lanes = byKey(answer.lanes, 'lane');
    expect(answer.items.map((item: { project_id: string }) => item.project_id)).toEqual(['go-first', 'go-second', 'wait-busy', 'wait-slots', 'wait-down', 'too-big', 'after-big', 'flagged', 'laneless']);
    expect(items['go-first']).toEqual({ kind: 'dispatchable', reason: 'the next dispatch takes it to free' });
    expect(lanes.free).toEqual({ kind: 'ready', reason: 'idle: the next dispatch takes go-first' });
    expect(items['go-second']).toEqual({ kind: 'behind', reason: 'waits behind go-first for free' });
    expect(items['wait-busy']).toEqual({ kind: 'lane_busy', reason: `its lane busy: runs ${run('on-busy')} of on-busy` });
    expect(items['wait-slots']).toEqual({ kind: 'lane_busy', reason: 'all 2 slots of slots are taken (2 by runs)' });
    expect(items['wait-down']!.kind).toBe('preflight_failing');
    expect(items['wait-down']!.reason).toMatch(/^the latest preflight of down failed: wake_gate_healthz/);
    expect(items['too-big']).toEqual({ kind: 'does_not_fit', reason: 'too-big needs 1 GPU, but cpu-box is a cpu_worker' });
    expect(items['after-big']).toEqual({ kind: 'behind', reason: 'waits behind too-big for cpu-box' });
    expect(items.flagged).toEqual({ kind: 'flagged', reason: 'flagged for manual review (requeue it to clear the flag)' });
    expect(items.laneless!.kind).toBe('no_lane');
    expect(items.laneless!.reason).toContain('no worker target for workload class inference_eval');

    expect(Object.fromEntries(Object.entries(lanes).map(([lane, reason]) => [lane, (reason as { kind: string }).kind]))).toEqual({
      busy: 'busy',
      slots: 'busy',
      'slots/2': 'busy',
      far: 'busy',
      silent: 'busy',
      down: 'preflight_failing',
      free: 'ready',
      'cpu-box': 'waiting',
    });
    expect(lanes['cpu-box']!.reason).toBe('idle: too-big waits: too-big needs 1 GPU, but cpu-box is a cpu_worker');

    const runs = byKey(answer.runs, 'run_id');
    expect(runs[run('on-busy')]).toEqual({ kind: 'quiet_window', reason: `working: its quiet window holds 12 of the 30 quiet samples it needs: ${CPU_REASON}` });
    expect(runs[run('on-slots-1')]).toEqual({
      kind: 'question',
      reason: `waits for your answer (rcp runs answer ${run('on-slots-1')}): Which dataset should I use? \u001b[31mthe red one\u001b[0m`,
    });
    expect(runs[run('on-slots-2')]!.kind).toBe('usage_limit');
    expect(runs[run('on-slots-2')]!.reason).toContain('until 2026-11-29T12:00:05.000Z');
    expect(runs[run('on-far')]!.kind).toBe('overdue');
    expect(runs[run('on-silent')]!.kind).toBe('gate_silent');
    expect(answer.queue.queued).toBe(9);
    expect(Date.parse(answer.queue.last_moved_at)).toBeGreaterThan(Date.now() - 60_000);
  });

  it('puts a pause before every lane: each item with a free lane says so, and the summary leads with it', async () => {
    await api('POST', '/control/pause', { reason: 'a why test', paused_by: 'test', maintenance_mode: false });
    try {
      const answer = await why();
      expect(answer.blockers).toEqual([{ kind: 'paused', reason: 'the queue is paused (POST /control/resume, or rcp resume)' }]);
      expect(answer.summary).toMatch(/^Nothing dispatches: the queue is paused/);
      expect(byKey(answer.items, 'project_id')['go-first']!.kind).toBe('paused');
      expect(byKey(answer.lanes, 'lane').free).toEqual({ kind: 'waiting', reason: 'idle: go-first waits: the queue is paused (POST /control/resume, or rcp resume)' });
    } finally {
      await api('POST', '/control/resume', { resumed_by: 'test' });
    }
  });

  it('exports when the queue last moved, for the alert on a queue that stands still', async () => {
    const metrics = await scrape(controlUrl, TEST_TOKEN);
    const movedAt = sampleValue(metrics, 'rcp_queue_last_moved_timestamp_seconds');
    expect(movedAt).toBeGreaterThan(Date.now() / 1000 - 60);
    expect(movedAt).toBeLessThanOrEqual(Date.now() / 1000 + 1);
  });

  it('prints in rcp why, with the agent\'s control characters shown, not obeyed', { timeout: 60_000 }, async () => {
    const { code, stdout, stderr } = await rcpCli(['why'], { url: controlUrl, token: TEST_TOKEN });
    expect(code, stderr).toBe(0);
    const text = stdout.toString();
    expect(text.split('\n')[0]).toMatch(/^1 item can go now, first go-first to free/);
    expect(text).toMatch(/^ITEM +LANE +WHY +REASON$/m);
    expect(text).toMatch(/^after-big +- +behind +waits behind too-big for cpu-box$/m);
    expect(text).toMatch(/^RUN +STATE +WHY +REASON$/m);
    expect(text).toContain('Which dataset should I use? \\u001b[31mthe red one\\u001b[0m');
    expect(text).not.toContain('\u001b');
  });

  it('shows on the overview at 1440 and 390 px: the summary, and each reason as text', { timeout: 60_000 }, async () => {
    const browser = await launchChromium();
    try {
      for (const width of [1440, 390]) {
        const tab = await openDashboard(browser, controlUrl, { viewport: { width, height: 900 } });
        await tab.signIn(TEST_TOKEN);
        await tab.open('#/overview');
        const card = tab.card('Why nothing moves');
        await expect.poll(() => card.locator('[data-key="why-summary"]').innerText()).toMatch(/^1 item can go now, first go-first to free/);
        const rows = card.getByRole('region', { name: 'Queued items, in dispatch order' }).locator('tbody tr');
        expect(await rows.count()).toBe(9);
        expect(await rows.nth(6).innerText()).toMatch(/after-big[\s\S]*behind[\s\S]*waits behind too-big for cpu-box/);
        const question = card.getByRole('region', { name: 'Active runs' }).locator('tr', { hasText: run('on-slots-1') });
        expect(await question.innerText()).toContain('Which dataset should I use?');
        expect(await card.getByRole('region', { name: 'Lanes' }).locator('tr', { hasText: 'cpu-box' }).innerText()).toContain('waiting');
        if (width === 390) expect(await tab.page.evaluate('document.documentElement.scrollWidth')).toBeLessThanOrEqual(390);
        expect(tab.problems).toEqual([]);
        await tab.screenshot(`why-nothing-moves-${width}`);
        await tab.page.context().close();
      }
    } finally {
      await browser.close();
    }
  });
});
