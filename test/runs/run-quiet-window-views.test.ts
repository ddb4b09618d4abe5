import { createServer, type Server } from 'node:http';
import { PassThrough } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createControlClient } from '../../api-client/index.ts';
import { watchRun } from '../../cli/watch.ts';
import { insertProject } from '../../capabilities/runs/projects.ts';
import { insertQueueItem } from '../../capabilities/runs/queue-items.ts';
import { workerRoutingFrom } from '../../capabilities/runs/domain/worker-lanes.ts';
import { gateIdentityProof } from '../../platform/http/tokens.ts';
import { NO_WORKERS, startTestApp, TEST_TOKEN, type TestApp } from '../support/app.ts';
import { launchChromium, openDashboard } from '../support/browser.ts';

// expected duration: ~15 s

/**
 * Why a run waits, on every surface: a worker gate (a real HTTP server standing in for one) holds two runs whose quiet
 * window keeps them waiting, one of them far longer than idle_sustain_sec. The v1 run detail, the gate view, the lanes
 * view, the overview's "what needs a person" and `rcp runs watch` each say so.
 */

const STAMP = '20261128T120000Z';
const GATE_STAND_IN_TOKEN = 'gate-token-0123456789abcdef0123';
const OVERDUE = `overdue-${STAMP}`;
const FRESH = `fresh-${STAMP}`;
const CPU_REASON = 'mean CPU 63% above threshold 20%';
const IDLE_SEEN_AT = '2026-11-28T10:30:00.000Z';

function gateRun(runId: string, window: Record<string, unknown>) {
  return { run_id: runId, gate_state: 'finished_pending_gate', processes_alive: false, updated_at: new Date().toISOString(), idle_seen_at: IDLE_SEEN_AT, quiet_window: window };
}

const GATE_RUNS = [
  gateRun(OVERDUE, { samples_in_window: 30, samples_needed: 30, verdict: 'waiting_for_quiet_window', reasons: [CPU_REASON], waiting_sec: 5400, overdue: true, idle_sustain_sec: 30, scope: 'machine' }),
  gateRun(FRESH, { samples_in_window: 12, samples_needed: 30, verdict: 'waiting_for_quiet_window', reasons: ['collecting quiet samples: 12 of 30'], waiting_sec: 13, overdue: false, idle_sustain_sec: 30, scope: 'run' }),
];

let t: TestApp;
let gate: Server;
let controlUrl: string;

beforeAll(async () => {
  gate = createServer((request, response) => {
    if (request.method === 'GET' && request.url?.startsWith('/gate-identity')) {
      const challenge = new URL(request.url, 'http://gate').searchParams.get('challenge') ?? '';
      response.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ service: 'worker-gate', proof: gateIdentityProof(GATE_STAND_IN_TOKEN, challenge) }));
    } else if (request.method === 'GET' && request.url?.startsWith('/dashboard/api')) {
      response.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ ok: true, runs: GATE_RUNS }));
    } else response.writeHead(404).end();
  });
  await new Promise<void>((resolve) => gate.listen(0, '127.0.0.1', resolve));
  const address = gate.address() as { port: number };
  const target = { wake_gate_url: `http://127.0.0.1:${address.port}`, bearer_token: GATE_STAND_IN_TOKEN, role: 'gpu_worker' as const };
  const routing = workerRoutingFrom({ worker_targets: { 'lane-a': target, 'lane-b': target }, workload_machine_targets: {} });
  t = await startTestApp({ dispatch: { ...NO_WORKERS, routing } });
  await t.store.transaction(async (tx) => {
    for (const [runId, projectId, lane] of [[OVERDUE, 'overdue', 'lane-a'], [FRESH, 'fresh', 'lane-b']] as const) {
      await insertProject(tx, { project_id: projectId, project_name: projectId, project_dir: projectId, workload_class: 'unknown' });
      await tx.query(
        `INSERT INTO runs (run_id, project_id, workflow_id, state, lane, wake_gate_url, workload_class, requested_by)
         VALUES ($1, $2, $3, 'running', $4, 'http://127.0.0.1:9', 'unknown', 'test')`,
        [runId, projectId, `run:${runId}`, lane],
      );
      await insertQueueItem(tx, { project_id: projectId, project_name: projectId, status: 'running', lane });
      await tx.query(`UPDATE queue_items SET current_run_id = $1 WHERE project_id = $2`, [runId, projectId]);
    }
  });
  controlUrl = await t.app.listen({ port: 0, host: '127.0.0.1' });
});

afterAll(async () => {
  await t?.close();
  await new Promise((resolve) => gate?.close(resolve));
});

const get = async (url: string) => {
  const answer = await t.app.inject({ method: 'GET', url, headers: t.auth });
  expect(answer.statusCode, answer.body).toBe(200);
  return answer.json();
};

describe('why a run waits', () => {
  it("shows in the v1 run detail: the window's verdict, its reason and its progress", async () => {
    const detail = await get(`/control/api/v1/runs/${OVERDUE}`);
    expect(detail.quiet_window).toEqual({
      samples_in_window: 30,
      samples_needed: 30,
      verdict: 'waiting_for_quiet_window',
      reasons: [CPU_REASON],
      waiting_sec: 5400,
      overdue: true,
      idle_seen_at: IDLE_SEEN_AT,
    });
  });

  it("shows in the run's gate view", async () => {
    const view = await get(`/control/api/v1/runs/${FRESH}/gate`);
    expect(view).toMatchObject({ seen: true, gate_state: 'finished_pending_gate', quiet_window: { samples_in_window: 12, samples_needed: 30, overdue: false, waiting_sec: 13 } });
  });

  it('shows in the lanes view, on the run in flight of each lane', async () => {
    const { lanes } = await get('/control/api/v1/lanes');
    const lane = (name: string) => lanes.find((entry: { lane: string }) => entry.lane === name);
    expect(lane('lane-a').active.run).toMatchObject({ run_id: OVERDUE, quiet_window: { verdict: 'waiting_for_quiet_window', reasons: [CPU_REASON], overdue: true } });
    expect(lane('lane-b').active.run.quiet_window).toMatchObject({ samples_in_window: 12, samples_needed: 30, overdue: false });
  });

  it('puts a run waiting far longer than idle_sustain_sec under what needs a person, with the reason', async () => {
    const overview = await get('/control/api/v1/overview');
    const waiting = overview.actionable_items.filter((item: { reason: string }) => item.reason === 'quiet_window_overdue');
    expect(waiting).toHaveLength(1);
    expect(waiting[0]).toMatchObject({ kind: 'queue_item', project_id: 'overdue', current_run_id: OVERDUE, since: IDLE_SEEN_AT });
    expect(waiting[0].hint).toContain(`waiting 90 min on its quiet window (${CPU_REASON})`);
  });

  it("shows on the dashboard's run page and its lane", { timeout: 60_000 }, async () => {
    const browser = await launchChromium();
    try {
      const tab = await openDashboard(browser, controlUrl);
      await tab.signIn(TEST_TOKEN);
      await tab.open(`#/runs/${OVERDUE}`);
      const run = tab.card('Run');
      await expect.poll(() => run.innerText()).toContain('quiet 30/30 · waiting for 90 min 0 s');
      expect(await run.innerText()).toContain(CPU_REASON);
      expect(await run.innerText()).toContain('needs a person');
      await tab.open('#/runs');
      await expect.poll(() => tab.page.locator('li.lane', { hasText: 'lane-b' }).innerText()).toContain('quiet 12/30');
      expect(tab.problems).toEqual([]);
    } finally {
      await browser.close();
    }
  });

  it('shows in rcp runs watch: progress, verdict and reason, and that a person is needed', async () => {
    const out = Object.assign(new PassThrough(), { isTTY: false }) as unknown as NodeJS.WriteStream;
    let text = '';
    (out as unknown as PassThrough).on('data', (chunk: Buffer) => (text += chunk.toString()));
    const rcp = createControlClient({ baseUrl: controlUrl, token: TEST_TOKEN });
    const watching = watchRun(rcp, OVERDUE, { output: { json: false, out, err: out }, intervalMs: 100 });
    await new Promise((resolve) => setTimeout(resolve, 500));
    await t.store.query(`UPDATE runs SET state = 'reconciled', finished_at = now() WHERE run_id = $1`, [OVERDUE]);
    expect(await watching).toBe(0);
    expect(text).toContain(`gate finished_pending_gate  quiet 30/30  waiting: ${CPU_REASON} (far longer than the window: needs a person)`);

    let json = '';
    const jsonOut = Object.assign(new PassThrough(), { isTTY: false }) as unknown as NodeJS.WriteStream;
    (jsonOut as unknown as PassThrough).on('data', (chunk: Buffer) => (json += chunk.toString()));
    const fresh = watchRun(rcp, FRESH, { output: { json: true, out: jsonOut, err: jsonOut }, intervalMs: 100 });
    await new Promise((resolve) => setTimeout(resolve, 500));
    await t.store.query(`UPDATE runs SET state = 'reconciled', finished_at = now() WHERE run_id = $1`, [FRESH]);
    await fresh;
    expect(JSON.parse(json.split('\n')[0]!)).toMatchObject({
      quiet_window: { samples: 12, needed: 30, verdict: 'waiting_for_quiet_window', reasons: ['collecting quiet samples: 12 of 30'], waiting_s: 13, overdue: false },
    });
  });
});
