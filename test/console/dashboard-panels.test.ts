import { spawn } from 'node:child_process';
import { rm } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PAPER_STATUSES, REVIEW_STATUSES } from '../../capabilities/papers/domain/paper-status.ts';
import { QUEUE_GROUPS, QUEUE_STATUSES, isRunOwned } from '../../capabilities/runs/domain/queue-status.ts';
import { RUN_STATES } from '../../capabilities/runs/domain/run-state.ts';
import { openStore } from '../../platform/store/open-store.ts';
import { insertProject } from '../../capabilities/runs/projects.ts';
import { insertQueueItem } from '../../capabilities/runs/queue-items.ts';
import type { Store } from '../../platform/store/store.ts';
import { browserState, columnTexts, inPage, launchChromium, openDashboard, seriousAccessibilityViolations, type DashboardTab } from '../support/browser.ts';
import { controlClient, reserveControlPlane, startControlPlaneProcess, writeControlPlaneConfig, type ControlPlaneFixture, type ControlPlaneProcess } from '../support/control-plane.ts';
import { createTestDatabase, type TestDatabase } from '../support/database.ts';
import { CONTROL_TOKEN, GATE_TOKEN } from '../support/gate.ts';
import { candidate } from '../support/research.ts';

// expected duration: ~45 s

/**
 * The dashboard in Debian's Chromium against a real control plane (its own process, on real Postgres and the run's
 * Temporal dev server) whose store is seeded with rows in every status: each panel shows what the API answers, in
 * counts, rows and pages; every panel passes axe-core; nothing spills sideways on a narrow screen.
 */

let database: TestDatabase;
let store: Store;
let fixture: ControlPlaneFixture;
let cp: ControlPlaneProcess;
let browser: Browser;
let tab: DashboardTab;
let api: ReturnType<typeof controlClient>;

const at = (minutes: number) => new Date(Date.parse('2026-11-20T08:00:00Z') + minutes * 60_000).toISOString();
const stamp = (minutes: number) => at(minutes).replace(/[-:]/g, '').replace(/\.\d+Z$/, 'Z');

/** Queue items in every status (in-flight ones each on a lane of their own), one flagged, and enough queued rows for two pages. */
async function seedQueue(): Promise<void> {
  await store.transaction(async (tx) => {
    const items = [
      ...QUEUE_STATUSES.map((status) => ({ id: `q-${status.replaceAll('_', '-')}`, status, flagged: false })),
      { id: 'q-flagged', status: 'queued' as const, flagged: true },
      ...Array.from({ length: 30 }, (_, n) => ({ id: `q-more-${String(n).padStart(2, '0')}`, status: 'queued' as const, flagged: false })),
    ];
    for (const [n, item] of items.entries()) {
      await insertProject(tx, { project_id: item.id, project_name: `Queue item ${item.id}`, project_dir: item.id, workload_class: 'unknown' });
      await insertQueueItem(tx, {
        project_id: item.id,
        project_name: `Queue item ${item.id}`,
        status: item.status,
        manual_review_required: item.flagged,
        dispatch_priority: 60 + (n % 7),
        selection_rank: n,
        workload_class: 'unknown',
        ...(isRunOwned(item.status) ? { lane: `lane-${item.status.replaceAll('_', '-')}` } : {}),
      });
    }
  });
}

/** A worker target of two slots, the second held by a run placed on GPU 1 (docs/runs.md#slots-and-gpus). */
async function seedSlots(): Promise<void> {
  await store.transaction(async (tx) => {
    await insertProject(tx, { project_id: 'slot-held', project_name: 'Slot held', project_dir: 'slot-held', workload_class: 'unknown' });
    await insertQueueItem(tx, { project_id: 'slot-held', project_name: 'Slot held', status: 'running', workload_class: 'unknown', lane: 'gpu-box/2', gpu_count: 1 });
    const runId = `slot-held-${stamp(300)}`;
    await tx.query(
      `INSERT INTO runs (run_id, project_id, workflow_id, state, lane, wake_gate_url, workload_class, requested_by, gpu_indices)
       VALUES ($1, 'slot-held', $2, 'running', 'gpu-box/2', 'http://127.0.0.1:9', 'unknown', 'seed', '{1}')`,
      [runId, `run:${runId}`],
    );
    await tx.query(`UPDATE queue_items SET current_run_id = $1 WHERE project_id = 'slot-held'`, [runId]);
  });
}

/** Thirty runs cycling through every run state, and thirty papers (on runs of their own) in every paper and review status. */
async function seedRunsAndPapers(): Promise<void> {
  await store.transaction(async (tx) => {
    for (let n = 0; n < 30; n += 1) {
      const state = RUN_STATES[n % RUN_STATES.length]!;
      const project = `q-more-${String(n).padStart(2, '0')}`;
      const runId = `${project}-${stamp(n)}`;
      await tx.query(
        `INSERT INTO runs (run_id, project_id, workflow_id, state, lane, wake_gate_url, workload_class, requested_by, created_at, updated_at)
         VALUES ($1, $2, $3, $4, 'default', 'http://127.0.0.1:9', 'unknown', 'seed', $5, $5)`,
        [runId, project, `run:${runId}`, state, at(n)],
      );
    }
    for (let n = 0; n < 30; n += 1) {
      const project = `paper-${String(n).padStart(2, '0')}`;
      const runId = `${project}-${stamp(100 + n)}`;
      await insertProject(tx, { project_id: project, project_name: `Paper project ${n}`, project_dir: project, workload_class: 'unknown' });
      await tx.query(
        `INSERT INTO runs (run_id, project_id, workflow_id, state, lane, wake_gate_url, workload_class, requested_by, decision, finished_at)
         VALUES ($1, $2, $3, 'reconciled', 'default', 'http://127.0.0.1:9', 'unknown', 'seed', 'finalize_positive', $4)`,
        [runId, project, `run:${runId}`, at(100 + n)],
      );
      await tx.query(
        `INSERT INTO papers (paper_id, project_id, run_id, paper_status, review_status, rank_score, rank_reasons, title)
         VALUES ($1, $2, $3, $4, $5, $6, $7::jsonb, $8)`,
        [
          `${project}:${runId}:draft`,
          project,
          runId,
          PAPER_STATUSES[n % PAPER_STATUSES.length],
          REVIEW_STATUSES[n % REVIEW_STATUSES.length],
          100 - n,
          JSON.stringify([`seeded rank ${100 - n} (+${100 - n})`]),
          `Seeded paper number ${n}`,
        ],
      );
    }
    await tx.query(
      `INSERT INTO audit_events (entity_type, entity_id, event_type, payload, actor)
       SELECT 'seed', 'seed-' || g, 'seed.recorded', jsonb_build_object('n', g), 'seed' FROM generate_series(1, 60) AS g`,
    );
  });
}

/** An unbroken run of characters, as ids, paths and error texts have: it cannot wrap at a space. */
const unbroken = (prefix: string, length: number) => `${prefix}${'x'.repeat(length - prefix.length)}`;
/** A project whose id is as long as a run id allows, so its run's id is one long word. */
const LONG_PROJECT = unbroken('narrow-screen-', 110);
const LONG_RUN = `${LONG_PROJECT}-${stamp(200)}`;
const LONG_PAPER = `${LONG_PROJECT}:${LONG_RUN}:draft`;

/** A run (without a queue item, so the queue's counts stay as seeded) whose id, error, question, evidence and paper are long. */
async function seedLongRun(): Promise<void> {
  await store.transaction(async (tx) => {
    await insertProject(tx, { project_id: LONG_PROJECT, project_name: unbroken('A-project-name-', 120), project_dir: LONG_PROJECT, workload_class: 'unknown' });
    await tx.query(
      `INSERT INTO runs (run_id, project_id, workflow_id, state, lane, wake_gate_url, workload_class, requested_by, question, decision, decision_summary, evidence, last_error, created_at, finished_at)
       VALUES ($1, $2, $3, 'gate_error', $4, 'http://127.0.0.1:9', 'unknown', $5, $6, 'finalize_positive', $7, $8::jsonb, $9, $10, $10)`,
      [
        LONG_RUN,
        LONG_PROJECT,
        `run:${LONG_RUN}`,
        unbroken('lane-', 80),
        unbroken('requested-by-', 80),
        `Which baseline? ${unbroken('question-', 200)}`,
        `The agent says: ${unbroken('summary-', 240)}`,
        JSON.stringify({ run_notes: true, decision_file: true, results_json_files: 1, note: unbroken('note-', 200), files: [`results/${'deeply/'.repeat(30)}metrics.json`] }),
        `dispatch failed: ${unbroken('ECONNREFUSED-', 300)} (after 3 tries)`,
        at(200),
      ],
    );
    await tx.query(
      `INSERT INTO papers (paper_id, project_id, run_id, paper_status, review_status, rank_score, rank_reasons, title)
       VALUES ($1, $2, $3, 'draft_review', 'in_review', 1, $4::jsonb, $5)`,
      [LONG_PAPER, LONG_PROJECT, LONG_RUN, JSON.stringify([unbroken('a-reason-', 160)]), `A title that will not wrap: ${unbroken('title-', 160)}`],
    );
    await tx.query(
      `INSERT INTO audit_events (entity_type, entity_id, event_type, payload, actor) VALUES ('run', $1, 'run.failed', $2::jsonb, $3)`,
      [LONG_RUN, JSON.stringify({ error: unbroken('error-', 400) }), unbroken('actor-', 80)],
    );
  });
}

/** Candidates with every admission decision, through the real import command. */
async function seedCandidates(): Promise<void> {
  const factors = (value: number) => ({ novelty: value, feasibility: value, accessibility: value, falsifiability: value });
  const answer = await api('POST', '/control/api/research/import-candidates', {
    requested_by: 'seed',
    dry_run: false,
    candidates: [
      candidate({ title: 'Admitted candidate', dedupe_key: 'seed-admitted' }),
      candidate({ title: 'Needs-review candidate', dedupe_key: 'seed-review', hypothesis: 'A different hypothesis about quantized adapters.', mechanism: 'Quantize the adapters to four bits.', ...factors(7) }),
      candidate({ title: 'Rejected candidate', dedupe_key: 'seed-rejected', hypothesis: 'A weak hypothesis about caching.', mechanism: 'Cache everything.', ...factors(3) }),
    ],
  });
  expect(answer.status).toBe(200);
  const merged = await api('POST', '/control/api/research/import-candidates', {
    requested_by: 'seed',
    dry_run: false,
    candidates: [candidate({ title: 'Merged candidate', dedupe_key: 'seed-merged' })],
  });
  expect(merged.body.counts).toMatchObject({ merged: 1 });
}

beforeAll(async () => {
  database = await createTestDatabase();
  store = await openStore({ backend: 'pg', pgDatabaseUrl: database.url });
  const reserved = await reserveControlPlane();
  // A worker lane whose gate is not running (the lanes and health panels show it as configured and stale), and live
  // dispatch off, as a first start has it.
  fixture = await writeControlPlaneConfig(reserved, {
    databaseUrl: database.url,
    gateUrl: 'http://127.0.0.1:9',
    overrides: { live_dispatch_enabled: false, worker_targets: { 'gpu-box': { wake_gate_url: 'http://127.0.0.1:9', bearer_token: GATE_TOKEN, role: 'gpu_worker', slots: 2 } } },
  });
  [cp, browser] = await Promise.all([startControlPlaneProcess(fixture), launchChromium()]);
  api = controlClient(fixture.url);
  await seedQueue();
  await seedRunsAndPapers();
  await seedLongRun();
  await seedSlots();
  await seedCandidates();
  tab = await openDashboard(browser, fixture.url);
  await tab.signIn(CONTROL_TOKEN);
}, 120_000);

afterAll(async () => {
  await browser?.close();
  await cp?.kill('SIGTERM');
  await store?.close();
  await database?.drop();
  if (fixture) await rm(fixture.dir, { recursive: true, force: true });
});

/** The value after the last line break: the hint line (an id) under a name in a cell. */
const lastLine = (text: string) => text.split('\n').at(-1)!.trim();

describe('each panel shows what the API answers', () => {
  it('overview: the five lane counts, what needs a person, readiness and health', { timeout: 30_000 }, async () => {
    const overview = (await api('GET', '/control/api/v1/overview?active_limit=10&event_limit=10')).body;
    await tab.open('#/overview');
    const lanes = tab.card('Operator lanes').locator('.lane-card');
    await expect.poll(() => lanes.count()).toBe(5);
    for (const [index, lane] of ['attention', 'running', 'write', 'publish', 'imported'].entries()) {
      expect(await lanes.nth(index).locator('.lane-count').innerText(), lane).toBe(String(overview.operator_counts[lane]));
    }
    expect(overview.operator_counts.attention).toBeGreaterThan(0);
    const needs = tab.card('What needs a person').locator('table');
    expect(await needs.locator('tbody tr').count()).toBe(overview.actionable_items.length);
    const readiness = (await api('GET', '/control/api/v1/automation-readiness')).body;
    await expect.poll(() => tab.card('Automation readiness').locator('.verdict').innerText()).toContain(readiness.first_failing.detail);
    await expect.poll(() => tab.card('Health').innerText()).toMatch(/default[\s\S]*stale/);
    await tab.screenshot('overview');
  });

  it('queue: every group tab with its count, rows in the dispatch order, and cursor paging', { timeout: 60_000 }, async () => {
    const byGroup = (await api('GET', '/control/api/v1/overview')).body.operator_detail_counts.queue.by_group;
    expect(byGroup).toMatchObject({ queued: 32, blocked: 4, active: 7, paused: 1, completed: 2, all: 45 });
    await tab.open('#/queue');
    const tabs = tab.page.getByRole('tab');
    await expect.poll(() => tabs.count()).toBe(QUEUE_GROUPS.length);
    for (const group of QUEUE_GROUPS) {
      await expect.poll(() => tab.page.getByRole('tab', { name: new RegExp(`^${group}`, 'i') }).locator('.tab-count').innerText()).toBe(String(byGroup[group]));
    }
    const items = tab.card('Items');
    const first = (await api('GET', '/control/api/v1/queue?group=queued&page_size=25')).body;
    const second = (await api('GET', `/control/api/v1/queue?group=queued&page_size=25&cursor=${encodeURIComponent(first.page.next_cursor)}`)).body;
    const ids = (page: Record<string, any>) => page.items.map((item: { project_id: string }) => item.project_id);
    await expect.poll(async () => (await columnTexts(items.locator('table'), 'Project')).map(lastLine)).toEqual(ids(first));
    await items.getByRole('button', { name: 'Next →' }).click();
    await expect.poll(async () => (await columnTexts(items.locator('table'), 'Project')).map(lastLine)).toEqual(ids(second));
    await expect(items.getByRole('button', { name: 'Next →' }).isDisabled()).resolves.toBe(true);
    await items.getByRole('button', { name: '← Previous' }).click();
    await expect.poll(async () => (await columnTexts(items.locator('table'), 'Project')).map(lastLine)).toEqual(ids(first));

    // The blocked tab, by keyboard: arrow keys move between tabs and select them.
    await tab.page.getByRole('tab', { name: /^queued/i }).focus();
    await tab.page.keyboard.press('ArrowRight');
    await expect.poll(() => tab.page.getByRole('tab', { selected: true }).innerText()).toMatch(/^blocked/i);
    const blocked = (await api('GET', '/control/api/v1/queue?group=blocked&page_size=25')).body;
    await expect.poll(async () => (await columnTexts(items.locator('table'), 'Project')).map(lastLine)).toEqual(ids(blocked));
    // Each row offers exactly the commands the API says it takes.
    for (const item of blocked.items) {
      const row = items.locator('tbody tr', { hasText: item.project_id });
      expect(await row.getByRole('button').allInnerTexts(), item.project_id).toEqual(
        item.operator_actions.map((action: string) => ({ requeue: 'Requeue', mark_paused: 'Park…', dispatch: 'Dispatch…' })[action]),
      );
    }

    // Search narrows the rows to what the API finds.
    await tab.page.getByRole('tab', { name: /^queued/i }).click();
    await expect.poll(async () => (await columnTexts(items.locator('table'), 'Project')).map(lastLine)).toEqual(ids(first));
    await items.getByLabel('Search').fill('q-more-2');
    const found = (await api('GET', '/control/api/v1/queue?group=queued&search=q-more-2&page_size=25')).body;
    expect(ids(found)).toHaveLength(10);
    await expect.poll(async () => (await columnTexts(items.locator('table'), 'Project')).map(lastLine)).toEqual(ids(found));
    await items.getByLabel('Search').fill('');
    await expect.poll(async () => (await columnTexts(items.locator('table'), 'Project')).map(lastLine)).toEqual(ids(first));
    await tab.screenshot('queue');
  });

  it('queue: dispatch is dry run first, and its live button says why it is disabled while live dispatch is off', { timeout: 30_000 }, async () => {
    await tab.open('#/queue');
    const dispatch = tab.card('Dispatch an item');
    expect(await dispatch.getByRole('button', { name: 'Dispatch it live' }).count()).toBe(0);
    await dispatch.getByRole('button', { name: 'Dry run' }).click();
    const live = dispatch.getByRole('button', { name: 'Dispatch it live' });
    await live.waitFor();
    expect(await live.isDisabled()).toBe(true);
    const reasonId = await live.getAttribute('aria-describedby');
    expect(await tab.page.locator(`#${reasonId}`).innerText()).toContain('Live dispatch is off: set "live_dispatch_enabled": true');
    // The preview names the candidate the API names, its route, and the preflight that failed on the absent gate.
    const preview = (await api('POST', '/control/dispatch-next', { dry_run: true, requested_by: 'test', force_preflight: true })).body;
    const shown = await dispatch.locator('.preview').innerText();
    expect(shown).toContain(preview.candidate.project_name);
    expect(shown).toMatch(new RegExp(`Route\\s+${preview.dispatch_route.machine_target} \\(gpu worker\\)`));
    expect(shown).toContain('not ready');
    expect(tab.calls.filter((call) => call.path === '/control/dispatch-next' && call.body?.includes('"dry_run":false'))).toEqual([]);
  });

  it('lanes and runs: every lane, and the runs newest first by cursor', { timeout: 30_000 }, async () => {
    const lanes = (await api('GET', '/control/api/v1/lanes')).body;
    const runs = (await api('GET', '/control/api/v1/runs?page_size=25')).body;
    await tab.open('#/runs');
    await expect.poll(() => tab.card('Lanes').locator('li.lane').count()).toBe(lanes.lanes.length);
    // Each slot of a target is a lane card of its own, with the GPUs of the run that holds it.
    const slot = tab.card('Lanes').locator('li.lane').filter({ has: tab.page.getByRole('heading', { name: 'gpu-box/2', exact: false }) });
    await expect.poll(() => slot.innerText()).toContain('slot 2 of gpu-box');
    expect(await slot.innerText()).toMatch(/GPUs\s+1/);
    expect(await slot.innerText()).toContain('Slot held');
    const list = tab.card('Runs');
    await expect.poll(async () => columnTexts(list.locator('table'), 'Run')).toEqual(runs.items.map((run: { run_id: string }) => run.run_id));
    await list.getByRole('button', { name: 'Next →' }).click();
    const next = (await api('GET', `/control/api/v1/runs?page_size=25&cursor=${encodeURIComponent(runs.page.next_cursor)}`)).body;
    await expect.poll(async () => columnTexts(list.locator('table'), 'Run')).toEqual(next.items.map((run: { run_id: string }) => run.run_id));
    await list.getByLabel('State').selectOption('gate_error');
    const failed = (await api('GET', '/control/api/v1/runs?page_size=25&state=gate_error')).body;
    await expect.poll(async () => columnTexts(list.locator('table'), 'Run')).toEqual(failed.items.map((run: { run_id: string }) => run.run_id));
    await tab.screenshot('runs');

    // A finished run offers no cancel; one in flight does.
    await list.getByRole('link', { name: failed.items[0].run_id }).click();
    await expect.poll(() => tab.card('Run').innerText()).toContain('gate error');
    expect(await tab.page.getByRole('button', { name: 'Cancel this run…' }).count()).toBe(0);
    const running = (await api('GET', '/control/api/v1/runs?page_size=1&state=running')).body.items[0];
    await tab.open(`#/runs/${running.run_id}`);
    await expect.poll(() => tab.card('Run').innerText()).toContain('running');
    await expect.poll(() => tab.page.getByRole('button', { name: 'Cancel this run…' }).count()).toBe(1);
  });

  it('papers: the pipeline counts and the review list by rank, with its reasons, by cursor', { timeout: 30_000 }, async () => {
    const overview = (await api('GET', '/control/api/v1/overview')).body;
    const papers = (await api('GET', '/control/api/v1/papers?page_size=25')).body;
    await tab.open('#/papers');
    const pipeline = tab.card('Pipeline');
    await expect.poll(() => pipeline.locator('.stat-value').allInnerTexts()).toEqual(
      ['write_needed', 'publish_ready', 'published_imported', 'not_writable_by_decision_gate', 'raw_completed_no_paper_candidates'].map((key) => String(overview.paper_pipeline[key])),
    );
    const list = tab.card('Review list');
    const titles = (page: Record<string, any>) => page.items.map((paper: { title: string }) => paper.title);
    await expect.poll(async () => (await columnTexts(list.locator('table'), 'Paper')).map((text) => text.split('\n')[0])).toEqual(titles(papers));
    expect(await list.locator('tbody tr').first().locator('.reasons li').allInnerTexts()).toEqual(papers.items[0].rank_reasons);
    await list.getByRole('button', { name: 'Next →' }).click();
    const next = (await api('GET', `/control/api/v1/papers?page_size=25&cursor=${encodeURIComponent(papers.page.next_cursor)}`)).body;
    await expect.poll(async () => (await columnTexts(list.locator('table'), 'Paper')).map((text) => text.split('\n')[0])).toEqual(titles(next));
    await tab.screenshot('papers');

    // A paper's page: its review moves are the ones the API allows.
    const paper = papers.items[1];
    const detail = (await api('GET', `/control/api/v1/papers/${encodeURIComponent(paper.paper_id)}`)).body;
    await tab.open(`#/papers/${encodeURIComponent(paper.paper_id)}`);
    const review = tab.card('Review');
    await expect.poll(() => review.locator('.actions button').allInnerTexts()).toEqual(detail.review_moves.map((move: string) => move.replaceAll('_', ' ')));
    await expect.poll(() => tab.card('Draft').innerText()).toContain('No draft yet.');
  });

  it('Research Facility: ledger counts, every decision, and a candidate\'s score breakdown, reasons and lineage', { timeout: 30_000 }, async () => {
    const facility = (await api('GET', '/control/api/research/facility')).body;
    const candidates = (await api('GET', '/control/api/research/candidates?page_size=20')).body;
    await tab.open('#/research');
    const ledgers = tab.card('Ledgers');
    await expect.poll(async () => (await ledgers.locator('.stat-value').allInnerTexts()).slice(0, 6)).toEqual(
      [facility.counts.sources, facility.counts.candidates, ...['admitted', 'needs-review', 'rejected', 'merged'].map((decision) => facility.counts.admissions_by_decision[decision])].map(String),
    );
    const list = tab.card('Candidates');
    await expect.poll(async () => (await columnTexts(list.locator('table'), 'Candidate')).map((text) => text.split('\n')[0])).toEqual(candidates.items.map((item: { title: string }) => item.title));
    expect(await columnTexts(list.locator('table'), 'Decision')).toEqual(candidates.items.map((item: { decision: string }) => item.decision));

    const admitted = candidates.items.find((item: { title: string }) => item.title === 'Admitted candidate');
    const detail = (await api('GET', `/control/api/research/candidates/${admitted.candidate_id}`)).body;
    await list.locator('tbody tr', { hasText: 'Admitted candidate' }).getByRole('button', { name: 'Details' }).click();
    const shown = list.locator('.candidate-detail');
    expect(detail.admissions).toHaveLength(1);
    await expect.poll(() => shown.innerText()).toContain(detail.admissions[0].reasons[0]);
    const breakdown = detail.admissions[0].score_breakdown;
    expect(breakdown).toMatchObject({ weighted: expect.any(Number) });
    expect(await shown.innerText()).toContain(`Weighted\n${breakdown.weighted.toFixed(1)}`);
    // The merged candidate points at this one: its lineage shows the link.
    expect(await shown.locator('table tbody tr').count()).toBe(detail.lineage.length);
    expect(await shown.locator('table').innerText()).toContain('merged into');
    await tab.screenshot('research');
  });

  it('events: newest first, filtered, by cursor', { timeout: 30_000 }, async () => {
    const events = (await api('GET', '/control/api/v1/events?page_size=50')).body;
    await tab.open('#/events');
    const log = tab.card('Audit log');
    const entities = (page: Record<string, any>) => page.items.map((event: { entity_type: string; entity_id: string }) => `${event.entity_type} ${event.entity_id}`);
    await expect.poll(async () => columnTexts(log.locator('table'), 'Entity')).toEqual(entities(events));
    await log.getByRole('button', { name: 'Next →' }).click();
    const next = (await api('GET', `/control/api/v1/events?page_size=50&cursor=${encodeURIComponent(events.page.next_cursor)}`)).body;
    await expect.poll(async () => columnTexts(log.locator('table'), 'Entity')).toEqual(entities(next));
    await log.getByLabel('Event type').fill('research.candidate_decided');
    const decided = (await api('GET', '/control/api/v1/events?page_size=50&event_type=research.candidate_decided')).body;
    await expect.poll(async () => columnTexts(log.locator('table'), 'Entity')).toEqual(entities(decided));
    await tab.screenshot('events');
    expect(tab.problems).toEqual([]);
    expect(await browserState(tab.page)).toEqual({ localStorage: 0, sessionStorage: 0, scriptCookies: '', indexedDb: 0 });
  });
});

describe('dry run first', () => {
  it('takes the live button away when an input changes while the dry run is on its way', { timeout: 30_000 }, async () => {
    const own = await openDashboard(browser, fixture.url);
    try {
      await own.signIn(CONTROL_TOKEN);
      await own.open('#/research');
      const smoke = own.card('Smoke batch');
      // The first dry run's answer is held back in the network until the form has changed (a fixed delay lost the
      // race on a loaded machine).
      let formChanged!: () => void;
      const changed = new Promise<void>((resolve) => (formChanged = resolve));
      await own.page.route('**/control/api/research/generate-batch', async (route) => {
        await changed;
        await route.continue();
      });
      await smoke.getByRole('button', { name: 'Dry run' }).click();
      await smoke.getByLabel('Candidates', { exact: true }).fill('2');
      formChanged();
      await expect.poll(() => smoke.locator('.command-output').innerText()).toContain('The inputs changed during the dry run');
      expect(await smoke.getByRole('button', { name: 'Generate it' }).count()).toBe(0);

      // A dry run of what the form now holds brings the button back; a change after it takes it away again.
      await smoke.getByRole('button', { name: 'Dry run' }).click();
      await smoke.getByRole('button', { name: 'Generate it' }).waitFor();
      // The panel's own reads may come after it: the command's call is the last one to its route.
      expect(own.calls.filter((call) => call.path === '/control/api/research/generate-batch').at(-1)?.body).toContain('"count":2');
      await smoke.getByLabel('Candidates', { exact: true }).fill('1');
      await expect.poll(() => smoke.getByRole('button', { name: 'Generate it' }).count()).toBe(0);
      expect(own.calls.filter((call) => call.body?.includes('"dry_run":false'))).toEqual([]);
    } finally {
      await own.close();
    }
  });
});

const PANELS = ['#/overview', '#/queue', '#/runs', '#/papers', '#/research', '#/events'];

describe('every panel is usable', () => {
  it('passes axe-core with no serious or critical violation, signed out and on every panel and detail page', { timeout: 90_000 }, async () => {
    const audited = await openDashboard(browser, fixture.url, { bypassCSP: true });
    try {
      await audited.page.goto(`${fixture.url}/control/dashboard-v2`);
      await audited.page.getByLabel('Control API token').waitFor();
      expect(await seriousAccessibilityViolations(audited.page), 'sign-in').toEqual([]);
      await audited.signIn(CONTROL_TOKEN);
      const run = (await api('GET', '/control/api/v1/runs?page_size=1')).body.items[0];
      const paper = (await api('GET', '/control/api/v1/papers?page_size=1')).body.items[0];
      for (const route of [...PANELS, `#/runs/${run.run_id}`, `#/papers/${encodeURIComponent(paper.paper_id)}`]) {
        await audited.open(route);
        await audited.settled();
        expect(await seriousAccessibilityViolations(audited.page), route).toEqual([]);
      }
      // The states a person opens: a candidate's detail, the park form, a dry run's preview.
      await audited.open('#/research');
      await audited.card('Candidates').getByRole('button', { name: 'Details' }).first().click();
      await audited.card('Smoke batch').getByRole('button', { name: 'Dry run' }).click();
      await audited.card('Smoke batch').locator('.preview').waitFor();
      await audited.settled();
      expect(await seriousAccessibilityViolations(audited.page), 'research, opened').toEqual([]);
      await audited.open('#/queue/blocked');
      await audited.settled();
      await audited.card('Items').getByRole('button', { name: 'Park…' }).first().click();
      expect(await seriousAccessibilityViolations(audited.page), 'queue, parking').toEqual([]);
      // The audit does find what it looks for: an image without a text alternative is a critical violation.
      await inPage(audited.page, `document.querySelector('main').append(Object.assign(document.createElement('img'), { src: '/favicon.ico' }))`);
      expect((await seriousAccessibilityViolations(audited.page)).map((violation) => violation.id)).toContain('image-alt');
    } finally {
      await audited.close();
    }
  });

  it('fits a narrow screen: every panel and page no wider than 390 px (only tables scroll, in place), every panel in the nav in view', { timeout: 120_000 }, async () => {
    const narrow = await openDashboard(browser, fixture.url, { viewport: { width: 390, height: 844 } });
    /** The page's width, and what sticks out past the viewport (outside a table's own scroller) to name in a failure. */
    const widths = () =>
      inPage<{ page: number; viewport: number; wide: string[] }>(
        narrow.page,
        `(() => {
          const viewport = window.innerWidth;
          const wide = [...document.querySelectorAll('body *')]
            .filter((el) => el.getBoundingClientRect().right > viewport + 0.5 && !el.parentElement.closest('.table-wrap, pre'))
            .slice(0, 5)
            .map((el) => el.tagName.toLowerCase() + (el.className ? '.' + String(el.className).replaceAll(' ', '.') : '') + ' ' + Math.round(el.getBoundingClientRect().right) + 'px');
          return { page: document.documentElement.scrollWidth, viewport, wide };
        })()`,
      );
    const fits = async (what: string) => {
      const measured = await widths();
      expect(measured.viewport).toBe(390);
      expect(measured.page, `${what} is ${measured.page} px wide: ${measured.wide.join(', ')}`).toBeLessThanOrEqual(measured.viewport);
    };
    try {
      await narrow.signIn(CONTROL_TOKEN);
      // Every panel's nav entry is on screen, whole: the nav wraps rather than hiding entries in a scroller.
      const navLinks = narrow.page.locator('#nav a');
      expect(await navLinks.count()).toBe(PANELS.length);
      for (const link of await navLinks.all()) {
        expect(await link.isVisible(), await link.innerText()).toBe(true);
        const box = (await link.boundingBox())!;
        expect(box.x, await link.innerText()).toBeGreaterThanOrEqual(0);
        expect(box.x + box.width, await link.innerText()).toBeLessThanOrEqual(390);
      }
      expect(await inPage(narrow.page, `(() => { const nav = document.getElementById('nav'); return nav.scrollWidth <= nav.clientWidth; })()`), 'the nav hides entries in a scroller').toBe(true);

      for (const route of PANELS) {
        await narrow.open(route);
        await narrow.page.locator('main table:visible, main .empty:visible').first().waitFor();
        await narrow.settled();
        await fits(route);
      }
      // The pages with the longest words: a run and a paper whose ids, error, question, evidence and title are long.
      await narrow.open(`#/runs/${encodeURIComponent(LONG_RUN)}`);
      await narrow.page.locator('main .error-text').waitFor();
      await narrow.settled();
      await fits('the run page');
      await narrow.screenshot('run-detail-narrow');
      await narrow.open(`#/papers/${encodeURIComponent(LONG_PAPER)}`);
      await narrow.page.locator('main .paper-title').waitFor();
      await narrow.settled();
      await fits('the paper page');
      await narrow.open(`#/queue/all/${encodeURIComponent(LONG_PROJECT)}`);
      await narrow.settled();
      await fits('the queue searched by a long project id');
      // The states a person opens: a candidate's detail and a dry run's preview.
      await narrow.open('#/research');
      await narrow.card('Candidates').getByRole('button', { name: 'Details' }).first().click();
      await narrow.card('Candidates').locator('.candidate-detail').waitFor();
      await narrow.settled();
      await fits('a candidate\'s detail');
      await narrow.open('#/queue');
      await narrow.card('Dispatch an item').getByRole('button', { name: 'Dry run' }).click();
      await narrow.card('Dispatch an item').locator('.preview').waitFor();
      await narrow.settled();
      await fits('the dispatch preview');

      await narrow.open('#/overview');
      await narrow.page.locator('.lane-card').first().waitFor();
      await narrow.screenshot('overview-narrow');
      expect(narrow.problems).toEqual([]);
    } finally {
      await narrow.close();
    }
  });
});

describe('an imported paper', () => {
  const MANIFEST = 'c'.repeat(64);

  /** A finalized paper of a completed run with its finalization package, as the package command leaves it. */
  async function seedFinalizedPaper(projectId: string): Promise<string> {
    const runId = `${projectId}-${stamp(300)}`;
    const paperId = `${projectId}:${runId}:draft`;
    await store.transaction(async (tx) => {
      await insertProject(tx, { project_id: projectId, project_name: 'Imported paper project', project_dir: projectId, workload_class: 'unknown' });
      await tx.query(
        `INSERT INTO runs (run_id, project_id, workflow_id, state, lane, wake_gate_url, workload_class, requested_by, decision, finished_at)
         VALUES ($1, $2, $3, 'reconciled', 'default', 'http://127.0.0.1:9', 'unknown', 'seed', 'finalize_positive', $4)`,
        [runId, projectId, `run:${runId}`, at(300)],
      );
      // paper_status stays where the last draft left it: the package finalizes the review, not the paper status.
      await tx.query(
        `INSERT INTO papers (paper_id, project_id, run_id, paper_status, review_status, rank_score, title)
         VALUES ($1, $2, $3, 'draft_review', 'finalized', 1000, 'The imported paper')`,
        [paperId, projectId, runId],
      );
      await tx.query(
        `INSERT INTO paper_finalization_packages (paper_id, target_label, package_dir, manifest, manifest_sha256, requested_by)
         VALUES ($1, 'corpus', 'papers/imported/package', '{}', $2, 'seed')`,
        [paperId, MANIFEST],
      );
    });
    return paperId;
  }

  /** `rcp args` against this control plane; answers its exit code and output. */
  function rcp(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
    return new Promise((resolve, reject) => {
      const { RCP_URL: _url, RCP_TOKEN: _token, ...inherited } = process.env as Record<string, string>;
      const child = spawn(process.execPath, [fileURLToPath(new URL('../../bin/rcp.js', import.meta.url)), ...args], {
        env: { ...inherited, RCP_URL: fixture.url, RCP_TOKEN: CONTROL_TOKEN, NO_COLOR: '1' },
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      let stdout = '';
      let stderr = '';
      child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
      child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
      child.on('error', reject);
      child.on('close', (code) => resolve({ code: code ?? -1, stdout, stderr }));
    });
  }

  it('reads "imported" and offers no command, in the API answers, in rcp papers and on its dashboard page', { timeout: 120_000 }, async () => {
    const paperId = await seedFinalizedPaper('imported-paper');
    const path = encodeURIComponent(paperId);
    const before = (await api('GET', `/control/api/v1/papers/${path}`)).body;
    expect(before.paper).toMatchObject({ stage: 'finalized', imported: false, operator_actions: ['record_import'] });

    const base = `/control/api/publication-automation/${path}`;
    const imported = await api('POST', `${base}/record-import`, { idempotency_key: 'import-1', requested_by: 'test', corpus_repo: 'lab/corpus', commit_sha: 'abc1234', manifest_sha256: MANIFEST });
    expect(imported.status).toBe(200);
    expect(imported.body.paper).toMatchObject({ paper_status: 'draft_review', review_status: 'finalized', imported: true, stage: 'imported', operator_actions: [] });
    const detail = (await api('GET', `/control/api/v1/papers/${path}`)).body;
    expect(detail.paper).toMatchObject({ stage: 'imported', imported: true, operator_actions: [] });
    expect(detail.review_moves).toEqual([]);
    const [row] = (await api('GET', '/control/api/v1/papers?page_size=1')).body.items;
    expect(row).toMatchObject({ paper_id: paperId, stage: 'imported', operator_actions: [] });
    // The commands the answer leaves out are refused, saying why.
    const refusals = [
      await api('POST', `${base}/checklist/final_human_approval`, { idempotency_key: 'late-1', requested_by: 'test', status: 'pass' }),
      await api('POST', `${base}/prepare-finalization-package`, { idempotency_key: 'late-2', requested_by: 'test', target_label: 'again', dry_run: true }),
      await api('POST', `${base}/rewrite-draft`, { idempotency_key: 'late-3', requested_by: 'test', force: true }),
    ];
    for (const refused of refusals) {
      expect(refused.status).toBe(409);
      expect(refused.body.detail).toContain('is imported into a corpus');
    }

    // rcp papers: the stage and the commands the server names, highest rank (this paper) first.
    const listed = await rcp(['papers', '--limit', '1']);
    expect(listed.code, listed.stderr).toBe(0);
    const [header, line] = listed.stdout.trim().split('\n').map((text) => text.trim().split(/ {2,}/));
    expect(header).toEqual(['PAPER_ID', 'STAGE', 'REVIEW_STATUS', 'RANK_SCORE', 'ACTIONS', 'TITLE']);
    expect(line).toEqual([paperId, 'imported', 'finalized', '1000', '-', 'The imported paper']);

    // The dashboard: the list and the page say imported, and the page offers no rewrite, checklist, package or import.
    await tab.open('#/papers');
    const list = tab.card('Review list');
    await list.getByLabel('Search').fill('The imported paper');
    await expect.poll(async () => columnTexts(list.locator('table'), 'Stage')).toEqual(['imported']);
    await tab.open(`#/papers/${path}`);
    await expect.poll(() => tab.card('Summary').locator('.facts').innerText()).toMatch(/Stage\s+imported review finalized/);
    await expect.poll(() => tab.card('Corpus import').innerText()).toContain('imported into lab/corpus at abc1234');
    await tab.settled();
    const page = tab.page.locator('main');
    expect(await page.getByRole('button', { name: 'Rewrite the draft' }).isVisible()).toBe(false);
    expect(await tab.card('Checklist').getByRole('button').count()).toBe(0);
    expect(await tab.card('Checklist').getByRole('combobox').count()).toBe(0);
    expect(await tab.card('Checklist').innerText()).toContain('The checklist is settled: the paper is imported.');
    expect(await tab.card('Finalization package').isVisible()).toBe(false);
    expect(await tab.card('Corpus import').getByRole('button', { name: 'Record the import' }).isVisible()).toBe(false);
    expect(await tab.card('Review').locator('.actions button').count()).toBe(0);
    await tab.screenshot('paper-imported');

    // A paper under review still offers what it takes: the same page is not simply bare.
    const reviewed = (await api('GET', `/control/api/v1/papers/${encodeURIComponent(LONG_PAPER)}`)).body;
    expect(reviewed.paper.operator_actions).toEqual(['rewrite_draft', 'set_checklist_item', 'move_review']);
    await tab.open(`#/papers/${encodeURIComponent(LONG_PAPER)}`);
    await expect.poll(() => tab.page.getByRole('button', { name: 'Rewrite the draft' }).isVisible()).toBe(true);
    expect(await tab.card('Checklist').getByRole('button', { name: 'Save' }).count()).toBe(9);
    expect(await tab.card('Finalization package').isVisible()).toBe(false);
  });
});
