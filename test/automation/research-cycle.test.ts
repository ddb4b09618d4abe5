import { Client, Connection } from '@temporalio/client';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { insertProject } from '../../capabilities/runs/projects.ts';
import { insertQueueItem } from '../../capabilities/runs/queue-items.ts';
import { FakeProvider } from '../support/fake-provider.ts';
import { fetchRunHistory, maybeSaveHistory } from '../support/histories.ts';
import { waitUntil } from '../support/gate.ts';
import { jsonClient, tableCounts } from '../support/ledgers.ts';
import { startTestApp } from '../support/app.ts';
import { candidate } from '../support/research.ts';
import { RUN_STACK_START_MS, startRunStack, type RunStack } from '../support/run-stack.ts';
import { parentOf, workflowListing } from '../support/workflow-listing.ts';
import { seedCompletedRun, SlowWriter } from '../support/slow-writer.ts';
import { paperIdFor } from '../../capabilities/papers/domain/paper-status.ts';

// expected duration: ~60 s (a cycle runs an agent to completion across a SIGKILL of the control plane; another drafts a
// paper across one)

/**
 * POST /control/api/research/run-cycle through real processes: a control plane (HTTP + Temporal worker on Postgres),
 * a worker gate running the fake agent, and a local research provider. The cycle is the research-cycle workflow; its
 * dispatch is the run workflow as a child.
 */

let stack: RunStack;
let provider: FakeProvider;
let writer: SlowWriter;

beforeAll(async () => {
  provider = await FakeProvider.start();
  writer = await SlowWriter.start();
  stack = await startRunStack({
    controlPlaneOverrides: (gate) => ({
      research_provider_base_url: `${provider.origin}/v1`,
      research_provider_model: 'research-model-1',
      research_provider_quota_url: `${provider.origin}/quota`,
      // The control plane reads evidence where the gate's agents leave it: one machine, one project_root.
      project_root: gate.projectRoot,
      ...writer.config(),
    }),
  });
}, RUN_STACK_START_MS);

afterAll(async () => {
  await stack?.close();
  await provider?.close();
  await writer?.close();
});

/** A provider candidate (no sources: the test database has none) that the planner admits, with words of its own. */
const proposed = (dedupeKey: string, subject: string) =>
  candidate({
    generation_mode: 'implementation_gap',
    dedupe_key: dedupeKey,
    title: `Cycle study ${dedupeKey}`,
    hypothesis: `${subject} keeps decode throughput on 6 GB cards.`,
    mechanism: `Replace the default path with ${subject} behind a feature switch.`,
  });

const cycle = (body: Record<string, unknown>) => stack.api('POST', '/control/api/research/run-cycle', { requested_by: 'cycle-test', ...body });
/** A live cycle's answer once it has finished, followed with GET as a client would, one poll a quarter second. */
async function followCycle(key: string, timeoutMs = 120_000) {
  return waitUntil(`cycle ${key} to finish`, async () => {
    const answer = await stack.api('GET', `/control/api/research/cycles/${encodeURIComponent(key)}`);
    return answer.status === 200 && answer.body.action === 'research_cycle_running' ? undefined : answer;
  }, timeoutMs, 250);
}

const stage = (body: Record<string, any>, name: string) => (body.stages as { name: string }[]).find((entry) => entry.name === name) as Record<string, any> | undefined;

describe('run-cycle', () => {
  it('dry run: reports every stage, spends no provider request and writes nothing; live needs enabled=true', async () => {
    provider.proposes([proposed('dry-cycle', 'paged attention over a resident page table')]);
    const before = await tableCounts(stack.store);
    const dry = await cycle({ max_dispatches_per_run: 1 });
    expect(dry.status, JSON.stringify(dry.body)).toBe(200);
    expect(dry.body).toMatchObject({ ok: true, action: 'dry_run_research_cycle', dry_run: true });
    expect((dry.body.stages as { name: string }[]).map((entry) => entry.name)).toEqual([
      'stop_conditions',
      'provider_batch',
      'promote',
      'dispatch',
      'paper_draft',
      'publication_rewrite',
    ]);
    expect(stage(dry.body, 'provider_batch')).toMatchObject({ action: 'dry_run_provider_generation' });
    expect(stage(dry.body, 'paper_draft')).toMatchObject({ action: 'skipped', reason: 'max_paper_drafts_per_run is 0' });
    expect(provider.chats).toHaveLength(0);
    expect(await tableCounts(stack.store)).toEqual(before);

    const refused = await cycle({ dry_run: false, idempotency_key: 'cycle-disabled' });
    expect(refused.status).toBe(409);
    expect(refused.body).toEqual({ detail: 'live run-cycle requires enabled=true' });
    const keyless = await cycle({ dry_run: false, enabled: true });
    expect(keyless.status).toBe(422);
    const tooMany = await cycle({ max_dispatches_per_run: 2 });
    expect(tooMany.status).toBe(422);
    expect(tooMany.body.detail[0].loc).toEqual(['body', 'max_dispatches_per_run']);
  });

  it('stops at each stop condition with its reason, spending and writing nothing', { timeout: 60_000 }, async () => {
    const chats = provider.chats.length;
    const expectStopped = async (key: string, condition: string, reason: RegExp, extra: Record<string, unknown> = {}) => {
      const started = await cycle({ dry_run: false, enabled: true, idempotency_key: key, ...extra });
      expect(started.status, JSON.stringify(started.body)).toBe(200);
      const answer = await followCycle(key);
      expect(answer.status, JSON.stringify(answer.body)).toBe(200);
      expect(answer.body).toMatchObject({ ok: false, action: 'research_cycle_blocked', stages: [{ name: 'stop_conditions', action: 'stopped', condition }] });
      expect(answer.body.reason).toMatch(reason);
      expect(answer.body.stages).toHaveLength(1);
    };
    await stack.store.transaction(async (tx) => {
      await insertProject(tx, { project_id: 'cycle-busy', project_name: 'busy', project_dir: 'cycle-busy', workload_class: 'unknown' });
      await insertQueueItem(tx, { project_id: 'cycle-busy', project_name: 'busy', status: 'needs_review' });
    });
    await expectStopped('stop-attention', 'stop_if_dashboard_attention', /1 queue item\(s\) wait for a person/);
    await stack.store.query(`UPDATE queue_items SET status = 'running', lane = 'elsewhere' WHERE project_id = 'cycle-busy'`);
    await expectStopped('stop-active', 'stop_if_queue_active', /1 queue item\(s\) are active/);
    await stack.store.query(`UPDATE queue_items SET status = 'completed' WHERE project_id = 'cycle-busy'`);
    provider.quota = { remaining_credits: 0, window: { limit: 10, remaining: 10, resets_at: '2026-11-24T00:00:00Z' } };
    try {
      await expectStopped('stop-budget', 'require_budget_ok', /remaining credit 0 is below/);
    } finally {
      provider.quota = { remaining_credits: 50, window: { limit: 120, remaining: 100, resets_at: '2026-11-24T00:00:00Z' } };
    }
    expect(provider.chats.length).toBe(chats);
    expect((await stack.api('GET', '/control/api/research/cycles/no-such-cycle')).status).toBe(404);
    maybeSaveHistory('cycle-stopped', await fetchRunHistory('research-cycle:stop-attention'));
  });

  it('live: generates, promotes and dispatches, and after a SIGKILL of the control plane mid-cycle resumes without repeating a stage', { timeout: 180_000 }, async () => {
    provider.proposes([proposed('crash-cycle', 'speculative decoding with a two-layer draft model')]);
    // The agent works long enough for the control plane to die while the cycle waits for its run.
    await stack.writeScenario('crash-cycle', { scenario: 'slow', work_sec: 6 });
    const chatsBefore = provider.chats.length;
    const body = { dry_run: false, enabled: true, idempotency_key: 'cycle-crash-1', max_dispatches_per_run: 1, wait_for_completion: true };
    // The call answers once the cycle has started; the cycle waits for its run without holding it.
    const first = await cycle(body);
    expect(first.status, JSON.stringify(first.body)).toBe(200);
    expect(first.body).toMatchObject({ ok: true, action: 'research_cycle_running', run_cycle_id: 'cycle-crash-1', workflow_id: 'research-cycle:cycle-crash-1' });
    await waitUntil('the cycle to dispatch its run', async () => {
      const runs = await stack.store.query(`SELECT 1 FROM runs WHERE project_id = 'crash-cycle' AND state IN ('awaiting_wake', 'running')`);
      return runs.rowCount ? true : undefined;
    }, 60_000, 200);
    // Followed meanwhile, it reports the stages it has finished so far. Its worker answers that query within 3 s or the
    // answer says none (a loaded CI machine can take longer): asked until it does.
    await expect
      .poll(async () => (await stack.api('GET', '/control/api/research/cycles/cycle-crash-1')).body, { timeout: 30_000, interval: 500 })
      .toMatchObject({ action: 'research_cycle_running', stages: expect.arrayContaining([expect.objectContaining({ name: 'promote', action: 'promoted' })]) });
    await stack.cp.kill('SIGKILL');
    await stack.restartControlPlane();

    // The same key finds the cycle (its workflow ID is the key); followed, it reports once the run has finished.
    expect((await cycle(body)).body).toMatchObject({ run_cycle_id: 'cycle-crash-1', workflow_id: 'research-cycle:cycle-crash-1' });
    const resumed = await followCycle('cycle-crash-1');
    expect(resumed.status, JSON.stringify(resumed.body)).toBe(200);
    expect(resumed.body).toMatchObject({ ok: true, action: 'research_cycle', dry_run: false, run_cycle_id: 'cycle-crash-1', workflow_id: 'research-cycle:cycle-crash-1' });
    expect(stage(resumed.body, 'provider_batch')).toMatchObject({ action: 'provider_generation', counts: { admitted: 1 } });
    expect(stage(resumed.body, 'promote')).toMatchObject({ action: 'promoted', project_id: 'crash-cycle' });
    expect(stage(resumed.body, 'dispatch')).toMatchObject({ action: 'run_finished', run_state: 'reconciled', queue_status: 'completed', candidate: { project_id: 'crash-cycle' } });
    // Once each: one provider request, one project, one run (the one the report names).
    expect(provider.chats.length).toBe(chatsBefore + 1);
    expect((await stack.store.query(`SELECT 1 FROM projects WHERE project_id = 'crash-cycle'`)).rowCount).toBe(1);
    const runs = await stack.store.query<{ workflow_id: string; state: string }>(`SELECT workflow_id, state FROM runs WHERE project_id = 'crash-cycle'`);
    expect(runs.rows).toEqual([{ workflow_id: stage(resumed.body, 'dispatch')!.workflow_id, state: 'reconciled' }]);
    // The run the cycle started as its child is listed as one dispatch-next starts, and carries the cycle's id.
    expect(await workflowListing(runs.rows[0]!.workflow_id)).toEqual({
      summary: 'run of crash-cycle on default, dispatched by cycle-test',
      project_id: 'crash-cycle',
      paper_id: undefined,
      cycle_id: 'cycle-crash-1',
      task_timeout_sec: 4,
    });
    expect(await workflowListing('research-cycle:cycle-crash-1')).toMatchObject({ summary: 'research cycle cycle-crash-1, requested by cycle-test', cycle_id: 'cycle-crash-1' });

    // A replayed key answers the first report; the same key with another policy is a conflict.
    expect((await cycle(body)).body).toEqual(resumed.body);
    expect(provider.chats.length).toBe(chatsBefore + 1);
    expect((await cycle({ ...body, max_promotions_per_run: 0 })).status).toBe(409);
    maybeSaveHistory('cycle-completed.cycle-child-workflows', await fetchRunHistory('research-cycle:cycle-crash-1'));
  });

  it('reports the paper draft it waited on, across a SIGKILL of the control plane while the writer writes', { timeout: 120_000 }, async () => {
    const { runId } = await seedCompletedRun(stack, 'cycle-paper');
    const paperId = paperIdFor('cycle-paper', runId);
    writer.delayMs = 6_000;
    const requestsBefore = writer.requests;
    const body = {
      dry_run: false,
      enabled: true,
      idempotency_key: 'cycle-paper-1',
      max_provider_requests_per_run: 0,
      max_promotions_per_run: 0,
      max_paper_drafts_per_run: 1,
      stop_if_queue_active: false,
      stop_if_dashboard_attention: false,
    };
    expect((await cycle(body)).status).toBe(200);
    await waitUntil('the writer to be asked', () => (writer.requests > requestsBefore ? true : undefined), 30_000, 50);
    await stack.cp.kill('SIGKILL');
    writer.delayMs = 0;
    await stack.restartControlPlane();

    // The stage is the draft's outcome, not an interruption: the cycle waited on its draft-next across the crash.
    const resumed = await followCycle('cycle-paper-1');
    expect(resumed.status, JSON.stringify(resumed.body)).toBe(200);
    expect(stage(resumed.body, 'paper_draft')).toMatchObject({ action: 'drafted', paper_id: paperId, paper_status: 'draft_review' });
    const paper = await stack.store.query<{ paper_status: string; draft_count: number }>('SELECT paper_status, draft_count FROM papers WHERE paper_id = $1', [paperId]);
    expect(paper.rows).toEqual([{ paper_status: 'draft_review', draft_count: 1 }]);
    // The Temporal UI links cycle → draft-next → paper.
    const draftNextId = 'paper-draft-next:research-cycle:cycle-paper-1';
    expect(await parentOf(`paper:${paperId}`)).toBe(draftNextId);
    expect(await parentOf(draftNextId)).toBe('research-cycle:cycle-paper-1');
    expect(await workflowListing(`paper:${paperId}`)).toMatchObject({ summary: `draft of paper ${paperId}, requested by cycle-test`, project_id: 'cycle-paper', paper_id: paperId });
    expect(await workflowListing(draftNextId)).toMatchObject({ cycle_id: 'cycle-paper-1' });
    maybeSaveHistory('cycle-paper-drafted.cycle-child-workflows', await fetchRunHistory('research-cycle:cycle-paper-1'));
    maybeSaveHistory('paper-draft-next', await fetchRunHistory(draftNextId));
  });

  it('gives the paper back within seconds when the cycle is canceled while the writer writes, ends canceled, and the paper is drafted again', { timeout: 120_000 }, async () => {
    const { runId } = await seedCompletedRun(stack, 'cycle-cancel');
    const paperId = paperIdFor('cycle-cancel', runId);
    const paperStatus = async () => (await stack.store.query<{ paper_status: string }>('SELECT paper_status FROM papers WHERE paper_id = $1', [paperId])).rows[0]?.paper_status;
    writer.delayMs = 30_000;
    const requestsBefore = writer.requests;
    // No stage after the paper draft: the cycle's own cancellation must end it, not the next stage's refusal to start.
    const body = { dry_run: false, enabled: true, idempotency_key: 'cycle-cancel-1', max_provider_requests_per_run: 0, max_promotions_per_run: 0, max_paper_drafts_per_run: 1, max_publication_rewrites_per_run: 0, stop_if_queue_active: false, stop_if_dashboard_attention: false };
    expect((await cycle(body)).status).toBe(200);
    await waitUntil('the writer to be asked', () => (writer.requests > requestsBefore ? true : undefined), 30_000, 50);
    expect(await paperStatus()).toBe('draft_generating');
    writer.delayMs = 0;

    const connection = await Connection.connect({ address: inject('temporalAddress') });
    try {
      await new Client({ connection }).workflow.getHandle('research-cycle:cycle-cancel-1').cancel();
    } finally {
      await connection.close();
    }
    await waitUntil('the paper to be given back', async () => ((await paperStatus()) === 'eligible' ? true : undefined), 10_000, 100);
    const ended = await followCycle('cycle-cancel-1', 30_000);
    expect(ended.status, JSON.stringify(ended.body)).toBe(502);
    expect(ended.body.detail).toMatchObject({ workflow_id: 'research-cycle:cycle-cancel-1', message: expect.stringContaining('ended canceled') });
    maybeSaveHistory('cycle-canceled.cycle-cancellation', await fetchRunHistory('research-cycle:cycle-cancel-1'));
    const again = await stack.api('POST', '/control/papers/draft-next', { requested_by: 'cycle-test', dry_run: false });
    expect(again.body).toMatchObject({ action: 'drafted', paper_id: paperId });
  });
});

describe('run-cycle when Temporal does not answer', () => {
  it('answers 502 naming the cycle, and releases the key so the same call can be sent again', async () => {
    const t = await startTestApp();
    try {
      const send = () =>
        jsonClient(t).post('/control/api/research/run-cycle', { requested_by: 'cycle-test', dry_run: false, enabled: true, max_provider_requests_per_run: 0, idempotency_key: 'cycle-no-temporal' });
      const first = await send();
      expect(first.status).toBe(502);
      expect(first.body.detail).toMatchObject({ workflow_id: 'research-cycle:cycle-no-temporal', message: expect.stringMatching(/did not start: this test app has no Temporal connection/) });
      expect((await send()).status).toBe(502);
      expect((await t.store.query(`SELECT 1 FROM idempotency_keys WHERE scope = 'research.run-cycle'`)).rowCount).toBe(0);
    } finally {
      await t.close();
    }
  });
});
