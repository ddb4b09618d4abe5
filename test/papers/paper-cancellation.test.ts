import { Client, Connection } from '@temporalio/client';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { waitUntil } from '../support/gate.ts';
import { fetchRunHistory, maybeSaveHistory } from '../support/histories.ts';
import { evidenceFiles, startPaperHarness, type PaperHarness } from '../support/paper-harness.ts';
import { SlowWriter, WRITER_RESULTS } from '../support/slow-writer.ts';
import { parentOf } from '../support/workflow-listing.ts';

// expected duration: ~30 s

/**
 * Canceling a paper step mid-way, through the HTTP routes and real paper workflows (an in-process worker on the run's
 * dev server) with a hosted writer that answers when the test lets it: the paper workflow itself, a draft-next and a
 * rewrite batch are canceled as an operator would in the Temporal UI. Each paper is given back within seconds, the
 * waiting call answers 409 naming what was canceled, and the paper can be drafted or rewritten again.
 */

let h: PaperHarness;
let writer: SlowWriter;
let client: Client;
let connection: Connection;

beforeAll(async () => {
  writer = await SlowWriter.start();
  h = await startPaperHarness(() => ({
    writer: {
      provider: 'openai_compatible',
      hosted: { base_url: writer.url, model: 'cancel-model', api_key: 'cancel-key', timeout_ms: 60_000, temperature: 0.2, max_tokens: 4000 },
      fallback: false,
    },
  }));
  connection = await Connection.connect({ address: inject('temporalAddress') });
  client = new Client({ connection });
}, 60_000);

afterAll(async () => {
  writer.whileWriting = null;
  await h?.close();
  await connection?.close();
  await writer?.close();
});

/** Holds each request the writer gets from now on until the test lets it through: `held[i]()` the i-th, `release()` all. */
function holdWriter() {
  const held: (() => void)[] = [];
  writer.whileWriting = () => new Promise<void>((resolve) => held.push(resolve));
  return {
    held,
    release() {
      writer.whileWriting = null;
      for (const resolve of held) resolve();
    },
  };
}

const path = (paperId: string) => encodeURIComponent(paperId);
const statusOf = async (paperId: string) =>
  (await h.t.store.query<{ paper_status: string }>('SELECT paper_status FROM papers WHERE paper_id = $1', [paperId])).rows[0]?.paper_status;
/** A completed run whose results are the numbers the writer writes, so its drafts pass the automated checklist. */
const completedRun = (projectId: string) => h.completedRun(projectId, { evidence: evidenceFiles(WRITER_RESULTS) });
const draftNext = () => h.call('POST', '/control/papers/draft-next', { requested_by: 'cancel-test', dry_run: false });
const askedAfter = (before: number) => waitUntil('the writer to be asked', () => (writer.requests > before ? true : undefined), 30_000, 50);
const failedEvents = async (paperId: string) =>
  (await h.t.store.query<{ event_type: string; payload: { to: string; error: string } }>(
    `SELECT event_type, payload FROM audit_events WHERE entity_id = $1 AND event_type IN ('paper.draft_failed', 'paper_review.rewrite_failed') ORDER BY id`,
    [paperId],
  )).rows;

/** Drafts a paper of its own through draft-next, the writer answering at once. */
async function draftedPaper(projectId: string): Promise<string> {
  const paperId = await completedRun(projectId);
  const drafted = await draftNext();
  expect(drafted.body, JSON.stringify(drafted.body)).toMatchObject({ action: 'drafted', paper_id: paperId, paper: { paper_status: 'draft_review' } });
  return paperId;
}

describe('a canceled draft', () => {
  it('gives the paper back when its own workflow is canceled mid-write; draft-next answers 409 naming it, and drafts it again', { timeout: 60_000 }, async () => {
    const paperId = await completedRun('cancel-paper');
    const writing = holdWriter();
    const before = writer.requests;
    const call = draftNext();
    await askedAfter(before);
    expect(await statusOf(paperId)).toBe('draft_generating');
    await client.workflow.getHandle(`paper:${paperId}`).cancel();

    const answer = await call;
    writing.release();
    expect(answer.status, JSON.stringify(answer.body)).toBe(409);
    expect(answer.body.detail).toMatchObject({ message: expect.stringMatching(/^the draft-next did not finish: workflow paper:.* was canceled before it finished/), workflow_id: `paper:${paperId}` });
    expect(await statusOf(paperId)).toBe('eligible');
    expect(await failedEvents(paperId)).toEqual([{ event_type: 'paper.draft_failed', payload: expect.objectContaining({ to: 'eligible', error: `the draft was canceled (workflow paper:${paperId})` }) }]);
    maybeSaveHistory('paper-canceled.paper-step-cancellation', await fetchRunHistory(`paper:${paperId}`));

    const again = await draftNext();
    expect(again.body).toMatchObject({ action: 'drafted', paper_id: paperId, paper: { paper_status: 'draft_review' } });
  });

  it('gives the paper back when its draft-next is canceled mid-write; the call answers 409 naming the draft-next', { timeout: 60_000 }, async () => {
    const paperId = await completedRun('cancel-draft-next');
    const writing = holdWriter();
    const before = writer.requests;
    const call = draftNext();
    await askedAfter(before);
    const draftNextId = (await parentOf(`paper:${paperId}`))!;
    expect(draftNextId).toMatch(/^paper-draft-next:request:/);
    await client.workflow.getHandle(draftNextId).cancel();

    const answer = await call;
    writing.release();
    expect(answer.status, JSON.stringify(answer.body)).toBe(409);
    expect(answer.body.detail).toMatchObject({ message: expect.stringContaining(`workflow ${draftNextId} was canceled`), workflow_id: draftNextId });
    expect(await statusOf(paperId)).toBe('eligible');
    expect((await client.workflow.getHandle(`paper:${paperId}`).describe()).status.name).toBe('CANCELLED');

    const again = await draftNext();
    expect(again.body).toMatchObject({ action: 'drafted', paper_id: paperId });
  });
});

describe('a canceled rewrite batch', () => {
  it('ends canceled instead of reporting success, gives its paper back, and the call answers 409', { timeout: 60_000 }, async () => {
    const paperId = await draftedPaper('cancel-batch');
    const writing = holdWriter();
    const before = writer.requests;
    const call = h.call('POST', '/control/api/paper-reviews/rewrite-batch', { idempotency_key: 'cancel-batch-1', requested_by: 'cancel-test', search: 'cancel-batch', limit: 1 });
    await askedAfter(before);
    expect(await statusOf(paperId)).toBe('publication_generating');
    const batch = client.workflow.getHandle('paper-rewrite-batch:cancel-batch-1');
    await batch.cancel();

    const answer = await call;
    writing.release();
    expect(answer.status, JSON.stringify(answer.body)).toBe(409);
    expect(answer.body.detail).toEqual({
      workflow_id: 'paper-rewrite-batch:cancel-batch-1',
      message: 'the rewrite batch did not finish: workflow paper-rewrite-batch:cancel-batch-1 was canceled before it finished; any paper it held is back where it was, and a new idempotency_key runs the batch again',
    });
    expect((await batch.describe()).status.name).toBe('CANCELLED');
    expect(await statusOf(paperId)).toBe('draft_review');
    expect(await failedEvents(paperId)).toEqual([{ event_type: 'paper_review.rewrite_failed', payload: expect.objectContaining({ to: 'draft_review' }) }]);
    maybeSaveHistory('paper-rewrite-batch-canceled.paper-step-cancellation', await fetchRunHistory('paper-rewrite-batch:cancel-batch-1'));

    // The batch of a key runs once: the key keeps the 409 as its answer (another body with it is refused as a reuse),
    // and a new key runs the batch, which rewrites the paper.
    const again = await h.call('POST', '/control/api/paper-reviews/rewrite-batch', { idempotency_key: 'cancel-batch-1', requested_by: 'cancel-test', search: 'cancel-batch', limit: 1 });
    expect(again.status, JSON.stringify(again.body)).toBe(409);
    expect(again.body).toEqual(answer.body);
    const reused = await h.call('POST', '/control/api/paper-reviews/rewrite-batch', { idempotency_key: 'cancel-batch-1', requested_by: 'cancel-test', search: 'cancel-batch', limit: 2 });
    expect(reused.status).toBe(409);
    expect(reused.body).toEqual({ detail: "idempotency key 'cancel-batch-1' was reused with different payload" });
    const rerun = await h.call('POST', '/control/api/paper-reviews/rewrite-batch', { idempotency_key: 'cancel-batch-2', requested_by: 'cancel-test', search: 'cancel-batch', limit: 1 });
    expect(rerun.status, JSON.stringify(rerun.body)).toBe(200);
    expect(rerun.body).toMatchObject({ count: 1, rewritten: 1, results: [{ paper_id: paperId, outcome: 'drafted' }] });
    expect(await statusOf(paperId)).toBe('publication_draft');
  });

  it('reports a paper whose rewrite was already running as refused, not failed, and goes on', { timeout: 60_000 }, async () => {
    const first = await draftedPaper('running-batch-a');
    const second = await draftedPaper('running-batch-b');
    const filters = { requested_by: 'cancel-test', search: 'running-batch-', limit: 2 };
    const preview = await h.call('POST', '/control/api/paper-reviews/rewrite-batch', { ...filters, idempotency_key: 'running-batch-1', dry_run: true });
    const [batchFirst, batchSecond] = (preview.body.selected as { paper_id: string }[]).map((paper) => paper.paper_id);
    expect(new Set([batchFirst, batchSecond])).toEqual(new Set([first, second]));

    // The batch's first rewrite waits for the writer while a rewrite of its second paper starts on its own; the batch's
    // is let through, and the other waits until the batch has answered.
    const writing = holdWriter();
    let before = writer.requests;
    const batchCall = h.call('POST', '/control/api/paper-reviews/rewrite-batch', { ...filters, idempotency_key: 'running-batch-1' });
    await askedAfter(before);
    before = writer.requests;
    const ownCall = h.call('POST', `/control/api/paper-reviews/${path(batchSecond!)}/rewrite-draft`, { idempotency_key: 'running-batch-own', requested_by: 'cancel-test' });
    await askedAfter(before);
    await waitUntil('both requests held', () => (writing.held.length === 2 ? true : undefined), 10_000, 20);
    writing.held[0]!();

    const batch = await batchCall;
    writing.release();
    expect(batch.status, JSON.stringify(batch.body)).toBe(200);
    expect(batch.body.results).toEqual([
      expect.objectContaining({ outcome: 'drafted', paper_id: batchFirst }),
      { outcome: 'refused', paper_id: batchSecond, reason: `a draft or rewrite of '${batchSecond}' is running now (workflow paper:${batchSecond})` },
    ]);
    expect((await ownCall).status).toBe(200);
  });
});
