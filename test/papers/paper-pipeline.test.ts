import { createHash } from 'node:crypto';
import { readdir, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { paperIdFor } from '../../capabilities/papers/domain/paper-status.ts';
import { waitUntil } from '../support/gate.ts';
import { RUN_STACK_START_MS, startRunStack, type ControlApi, type RunStack } from '../support/run-stack.ts';
import { seedCompletedRun, SlowWriter, WRITER_RESULTS } from '../support/slow-writer.ts';

// expected duration: ~45 s

/**
 * The paper pipeline with real processes: a run dispatched to a real worker gate (the fake agent ending positive, with
 * results) becomes a paper through draft-next, is reviewed, packaged and recorded as imported. Then the control plane
 * is killed (SIGKILL) while a hosted writer is still writing a draft: after the restart the paper is drafted once.
 */

const RESULTS = WRITER_RESULTS;

let stack: RunStack;
let api: ControlApi;
let writer: SlowWriter;

beforeAll(async () => {
  writer = await SlowWriter.start();
  stack = await startRunStack({
    // The control plane reads evidence where the gate's agents leave it: one machine, one project_root.
    controlPlaneOverrides: (gate) => ({
      project_root: gate.projectRoot,
      ...writer.config(),
    }),
  });
  ({ api } = stack);
}, RUN_STACK_START_MS);

afterAll(async () => {
  await stack?.close();
  await writer?.close();
});

const path = (paperId: string) => encodeURIComponent(paperId);

async function command(url: string, body: Record<string, unknown>) {
  const answer = await api('POST', url, { requested_by: 'pipeline', ...body });
  expect(answer.status, JSON.stringify(answer.body)).toBe(200);
  return answer.body;
}

describe('the paper pipeline', () => {
  it('takes a completed run from draft-next to a recorded corpus import', { timeout: 180_000 }, async () => {
    await stack.seed('pipeline-positive', {
      projectName: 'Pipeline positive',
      scenario: { scenario: 'normal', decision: 'finalize_positive', results: RESULTS },
    });
    const live = await command('/control/dispatch-next', { dry_run: false });
    expect(live.action).toBe('live_dispatch');
    stack.agents.remember(live);
    const runId = live.run_id as string;
    await waitUntil('the run to complete', async () => ((await api('GET', `/control/api/v1/runs/${runId}`)).body.run?.state === 'reconciled' ? true : undefined), 120_000, 500);
    const paperId = paperIdFor('pipeline-positive', runId);

    const stateDir = join(stack.cpFixture.dir, 'state');
    const dry = await command('/control/papers/draft-next', { dry_run: true });
    expect(dry).toMatchObject({ action: 'dry_run_draft', paper_id: paperId, evidence: { complete: true } });
    expect((await stack.store.query('SELECT 1 FROM papers')).rowCount).toBe(0);
    expect(await readdir(join(stateDir, 'papers')).catch(() => [])).toEqual([]);

    const drafted = await command('/control/papers/draft-next', { dry_run: false });
    expect(drafted).toMatchObject({ action: 'drafted', paper_id: paperId, paper: { paper_status: 'draft_review', writer: 'hosted' } });
    expect(await readFile(join(stateDir, 'papers', paperId, 'paper.md'), 'utf8')).toContain(`Accuracy ${RESULTS.accuracy}`);
    const judged = (drafted.paper.checklist as { item_id: string; status: string }[]).filter((item) => item.status === 'pass').map((item) => item.item_id);
    expect(judged).toHaveLength(6);

    for (const [index, to] of ['triage_ready', 'in_review', 'approved_for_finalization'].entries()) {
      await command(`/control/api/publication-automation/${path(paperId)}/status`, { idempotency_key: `move-${index}`, review_status: to });
    }
    await command(`/control/api/publication-automation/${path(paperId)}/checklist/final_human_approval`, { idempotency_key: 'approve', status: 'pass' });
    const packaged = await command(`/control/api/publication-automation/${path(paperId)}/prepare-finalization-package`, { idempotency_key: 'package', target_label: 'corpus-2027' });
    expect(packaged.paper.review_status).toBe('finalized');
    const manifest = await readFile(join(stateDir, packaged.package_dir as string, 'manifest.json'));
    expect(createHash('sha256').update(manifest).digest('hex')).toBe(packaged.manifest_sha256);
    await command(`/control/api/publication-automation/${path(paperId)}/record-import`, {
      idempotency_key: 'import',
      corpus_repo: 'lab/papers',
      commit_sha: 'deadbeef1',
      manifest_sha256: packaged.manifest_sha256,
    });
    // The package call sent again with its key answers as the first time, though the paper has moved on since.
    const replayed = await command(`/control/api/publication-automation/${path(paperId)}/prepare-finalization-package`, { idempotency_key: 'package', target_label: 'corpus-2027' });
    expect(replayed).toEqual(packaged);
    const otherBody = await api('POST', `/control/api/publication-automation/${path(paperId)}/prepare-finalization-package`, { requested_by: 'pipeline', idempotency_key: 'package', target_label: 'another' });
    expect(otherBody.status).toBe(409);
    const status = await api('GET', '/control/api/status');
    expect(status.body.counts.paper_pipeline).toMatchObject({ published_imported: 1, write_needed: 0, publish_ready: 0 });
    const run = await api('GET', `/control/api/v1/runs/${runId}`);
    expect(JSON.stringify(run.body)).toContain(paperId);
  });

  it('drafts a paper once when the control plane is killed while its writer is still writing', { timeout: 180_000 }, async () => {
    const projectId = 'pipeline-crash';
    const { runId } = await seedCompletedRun(stack, projectId);
    const paperId = paperIdFor(projectId, runId);

    writer.delayMs = 6_000;
    const requestsBefore = writer.requests;
    const interrupted = api('POST', '/control/papers/draft-next', { dry_run: false, requested_by: 'pipeline' }).catch((error: unknown) => error);
    await waitUntil('the writer to be asked', () => (writer.requests > requestsBefore ? true : undefined), 30_000, 50);
    await stack.cp.kill('SIGKILL');
    await interrupted;
    writer.delayMs = 0;
    const atKill = await stack.store.query<{ paper_status: string }>('SELECT paper_status FROM papers WHERE paper_id = $1', [paperId]);
    expect(atKill.rows[0]?.paper_status).toBe('draft_generating');

    await stack.restartControlPlane();
    await waitUntil(
      'the interrupted draft to finish',
      async () => ((await stack.store.query<{ paper_status: string }>('SELECT paper_status FROM papers WHERE paper_id = $1', [paperId])).rows[0]?.paper_status === 'draft_review' ? true : undefined),
      90_000,
      500,
    );
    const paper = (await stack.store.query<{ draft_count: number; writer: string }>('SELECT draft_count, writer FROM papers WHERE paper_id = $1', [paperId])).rows[0]!;
    expect(paper).toEqual({ draft_count: 1, writer: 'hosted' });
    const events = await stack.store.query<{ event_type: string }>('SELECT event_type FROM audit_events WHERE entity_id = $1 ORDER BY id', [paperId]);
    expect(events.rows.map((row) => row.event_type)).toEqual(['paper.draft_started', 'paper.drafted']);
  });

  it('judges a draft only against the evidence it was written from: notes edited while the writer writes lose the draft', { timeout: 60_000 }, async () => {
    const projectId = 'pipeline-edited';
    const { runId, dir } = await seedCompletedRun(stack, projectId);
    const paperId = paperIdFor(projectId, runId);
    writer.whileWriting = () => writeFile(join(dir, 'run_notes.md'), '# Notes edited after the evidence was read\n');
    try {
      const answer = await command('/control/papers/draft-next', { dry_run: false });
      expect(answer.action).toBe('noop');
      const skipped = (answer.skipped as { paper_id: string; reason: string; missing: string[] }[]).find((entry) => entry.paper_id === paperId);
      expect(skipped).toMatchObject({ reason: 'missing_evidence', missing: ['the evidence file "run_notes.md" changed since the draft was written'] });
    } finally {
      writer.whileWriting = null;
    }
    const paper = await stack.store.query<{ paper_status: string; draft_count: number }>('SELECT paper_status, draft_count FROM papers WHERE paper_id = $1', [paperId]);
    expect(paper.rows[0]?.draft_count ?? 0).toBe(0);
    const events = await stack.store.query<{ event_type: string }>('SELECT event_type FROM audit_events WHERE entity_id = $1 ORDER BY id', [paperId]);
    expect(events.rows.map((row) => row.event_type)).not.toContain('paper.drafted');
  });
});
