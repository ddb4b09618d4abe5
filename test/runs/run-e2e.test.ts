import { mkdir, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Store } from '../../platform/store/store.ts';
import { CALLBACK_TOKEN, dispatchCount, gateClient, waitUntil, type GateFixture } from '../support/gate.ts';
import { fetchRunHistory, maybeSaveHistory, replayHistory } from '../support/histories.ts';
import { tableCounts } from '../support/ledgers.ts';
import { candidate } from '../support/research.ts';
import { RUN_STACK_START_MS, startRunStack, type ControlApi, type RunStack } from '../support/run-stack.ts';
import { sampleValue, scrape } from '../support/prometheus.ts';

// expected duration: ~40 s

/**
 * The whole path with real processes: a control plane (HTTP + Temporal worker) on the shared dev server and Postgres,
 * and a worker gate whose dispatch script is the fake agent. Intake → promote → dry run → live dispatch → gate
 * callbacks → completed.
 */

const RUN_MS = 120_000;

let stack: RunStack;
let store: Store;
let gateFixture: GateFixture;
let api: ControlApi;

beforeAll(async () => {
  stack = await startRunStack();
  ({ store, gateFixture, api } = stack);
}, RUN_STACK_START_MS);

afterAll(() => stack?.close());

const queueItem = async (projectId: string) => (await api('GET', `/control/api/projects/${projectId}`)).body.queue_item;

async function promoteOne(dedupeKey: string): Promise<string> {
  const imported = await api('POST', '/control/api/research/import-candidates', {
    candidates: [candidate({ dedupe_key: dedupeKey, title: `Run path ${dedupeKey}` })],
    requested_by: 'e2e',
    dry_run: false,
  });
  expect(imported.status).toBe(200);
  const candidateId = imported.body.results[0].candidate_id as string;
  const promoted = await api('POST', '/control/api/research/promote-candidate', {
    candidate_id: candidateId,
    dry_run: false,
    requested_by: 'e2e',
    idempotency_key: `promote-${dedupeKey}`,
  });
  expect(promoted.status).toBe(200);
  return promoted.body.queue_item.project_id as string;
}

describe('a queued item through the whole run path', () => {
  it('is dispatched to the gate, completes on the gate\'s callbacks, and leaves a correct run and audit trail', { timeout: 180_000 }, async () => {
    const projectId = await promoteOne('run-path-full');
    const project = (await api('GET', `/control/api/projects/${projectId}`)).body.project;
    // The fake agent reads its scenario from the project directory, which prepare keeps.
    await mkdir(join(gateFixture.projectRoot, project.project_dir), { recursive: true });
    await writeFile(join(gateFixture.projectRoot, project.project_dir, 'scenario.json'), JSON.stringify({ scenario: 'normal' }));

    const metricsBefore = await scrape(stack.cpFixture.url);
    const before = await tableCounts(store);
    const dry = await api('POST', '/control/dispatch-next', { dry_run: true, requested_by: 'e2e', force_preflight: true });
    expect(dry.status).toBe(200);
    expect(dry.body).toMatchObject({
      ok: true,
      action: 'dry_run_dispatch',
      candidate: { project_id: projectId },
      dispatch_route: { machine_target: 'default', wake_gate_url: gateFixture.url, worker_role: 'gpu_worker', token_configured: true },
      active_count: 0,
      preflight: { ok: true },
    });
    expect(JSON.stringify(dry.body)).not.toContain(CALLBACK_TOKEN);
    expect(await tableCounts(store)).toEqual(before);
    const observations = await store.query('SELECT 1 FROM worker_observations');
    expect(observations.rowCount).toBe(0);

    const live = await api('POST', '/control/dispatch-next', { dry_run: false, requested_by: 'e2e' });
    expect(live.status).toBe(200);
    expect(live.body).toMatchObject({ ok: true, action: 'live_dispatch', candidate: { project_id: projectId }, prepare: { ok: true }, dispatch: { ok: true } });
    const runId = live.body.run_id as string;
    expect(runId).toMatch(new RegExp(`^${projectId}-\\d{8}T\\d{6}Z$`));
    expect(live.body.workflow_id).toBe(`run:${runId}`);
    expect((await queueItem(projectId)).status).toMatch(/^(awaiting_wake|running)$/);

    await waitUntil('the item to complete', async () => ((await queueItem(projectId)).status === 'completed' ? true : undefined), RUN_MS, 500);

    // The run moved the metrics (docs/operations.md#metrics-and-observability): outcomes counted, the ledgers' gauges followed.
    const metricsAfter = await scrape(stack.cpFixture.url);
    const moved = (name: string, labels: Record<string, string>) =>
      (sampleValue(metricsAfter, name, labels) ?? 0) - (sampleValue(metricsBefore, name, labels) ?? 0);
    expect(moved('rcp_dispatch_outcomes_total', { action: 'dry_run_dispatch' })).toBe(1);
    expect(moved('rcp_dispatch_outcomes_total', { action: 'live_dispatch' })).toBe(1);
    expect(moved('rcp_live_dispatch_duration_seconds_count', { outcome: 'live_dispatch' })).toBe(1);
    expect(moved('rcp_worker_callbacks_total', { outcome: 'accepted' })).toBeGreaterThanOrEqual(2);
    expect(moved('rcp_runs', { state: 'reconciled' })).toBe(1);
    expect(moved('rcp_queue_items', { status: 'completed' })).toBe(1);
    expect(moved('rcp_http_request_duration_seconds_count', { route: '/control/dispatch-next', method: 'POST', status_code: '200' })).toBe(2);
    expect(sampleValue(metricsAfter, 'process_resident_memory_bytes')).toBeGreaterThan(0);
    expect(metricsAfter.some((sample) => sample.name.startsWith('nodejs_eventloop_lag'))).toBe(true);
    // The Temporal worker's own series, from the SDK runtime's exporter, appended to the same scrape.
    expect(metricsAfter.some((sample) => sample.name.startsWith('temporal_'))).toBe(true);
    expect(metricsAfter.every((sample) => !Object.values(sample.labels).includes(runId))).toBe(true);

    const detail = (await api('GET', `/control/api/projects/${projectId}`)).body;
    expect(detail.queue_item).toMatchObject({ status: 'completed', current_run_id: runId, last_run_state: 'reconciled', dispatch_failures: 0 });
    expect(detail.runs).toHaveLength(1);
    const run = detail.runs[0];
    expect(run).toMatchObject({ run_id: runId, state: 'reconciled', lane: 'default', decision: 'inconclusive', requested_by: 'e2e' });
    expect(run.evidence).toMatchObject({ run_notes: true, decision_file: true, sufficient_for_paper: true });
    expect(run.transitions.map((t: { transition: string }) => t.transition)).toEqual([
      'claimed',
      'prepared',
      'worker_accepted',
      'session_started',
      'wake_received',
      'reconciling',
      'completed',
    ]);
    expect(detail.worker_observations.some((o: { run_id: string | null }) => o.run_id === runId)).toBe(true);
    const runEvents = (detail.events as { event_type: string; entity_id: string }[]).filter((event) => event.entity_id === runId);
    expect(runEvents.map((event) => event.event_type).sort()).toEqual(
      ['run.claimed', 'run.prepared', 'run.worker_accepted', 'run.session_started', 'run.wake_received', 'run.reconciling', 'run.completed'].sort(),
    );
    expect(await dispatchCount(gateFixture, runId)).toBe(1);
    // The prompt states the candidate's research contract and the budget follows its expected_token_budget, both
    // copied onto the project at promotion (docs/runs.md#research-contract).
    const prompt = await readFile(join(gateFixture.projectRoot, project.project_dir, '.research', 'prompts', `${runId}.md`), 'utf8');
    expect(prompt).toContain('# Run path run-path-full\n');
    expect(prompt).toContain(`## Hypothesis\n${candidate().hypothesis}\n`);
    expect(prompt).toContain(`## Required evidence\n- ${(candidate().required_evidence as string[])[0]}\n`);
    expect((await gateClient(gateFixture).runView(runId))?.token_budget).toBe(2 * (candidate().expected_token_budget as number));

    const runDetail = (await api('GET', `/control/api/v1/runs/${runId}?event_limit=3`)).body;
    expect(runDetail).toMatchObject({
      run: { run_id: runId, state: 'reconciled' },
      project: { project_id: projectId },
      papers: [],
      // This control plane uses a Temporal server it did not start, so it knows no UI address.
      temporal: { workflow_id: `run:${runId}`, ui_url: null },
    });
    expect(runDetail.run.transitions).toHaveLength(7);
    expect(runDetail.events.map((event: { event_type: string }) => event.event_type)).toEqual(['run.completed', 'run.reconciling', 'run.wake_received']);
    expect((await api('GET', '/control/api/v1/runs/no-such-run-20260101T000000Z')).status).toBe(404);

    // The inconclusive decision is recorded as lineage the planner reads as a known negative/mixed outcome.
    const lineage = await store.query<{ relation: string }>(`SELECT relation FROM research_lineage WHERE from_id = $1 AND to_kind = 'decision'`, [projectId]);
    expect(lineage.rows.map((row) => row.relation)).toEqual(['mixed']);

    const callbacks = await store.query<{ event_type: string; ignored: boolean }>(
      'SELECT event_type, ignored FROM worker_callbacks WHERE run_id = $1 ORDER BY received_at',
      [runId],
    );
    expect(callbacks.rows).toEqual([
      { event_type: 'session_started', ignored: false },
      { event_type: 'session_finished_ready', ignored: false },
    ]);

    const idle = await api('POST', '/control/dispatch-next', { dry_run: false, requested_by: 'e2e' });
    expect(idle.body).toMatchObject({ action: 'noop' });

    // The history this run left replays against the current workflow code without non-determinism errors.
    const history = await fetchRunHistory(`run:${runId}`);
    await replayHistory(history, `run:${runId}`);
    maybeSaveHistory('run-completed', history);
  });
});
