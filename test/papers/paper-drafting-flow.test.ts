import { createHash } from 'node:crypto';
import { readdir, readFile, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { fetchRunHistory, maybeSaveHistory } from '../support/histories.ts';
import { evidenceFiles, startPaperHarness, type PaperHarness } from '../support/paper-harness.ts';

// expected duration: ~20 s

/**
 * Drafting through the HTTP routes and real paper workflows (an in-process worker on the run's dev server), with the
 * deterministic writer: draft-next, rewrites, rewrite-batch and the finalization package, down to the corpus import.
 */

let h: PaperHarness;

beforeAll(async () => {
  h = await startPaperHarness();
}, 60_000);

afterAll(() => h?.close());

const at = (minutes: number) => new Date(Date.parse('2026-11-22T08:00:00Z') + minutes * 60_000).toISOString();
const path = (paperId: string) => encodeURIComponent(paperId);

async function rowCounts() {
  const { rows } = await h.t.store.query<Record<string, number>>(
    `SELECT (SELECT count(*) FROM papers)::int AS papers, (SELECT count(*) FROM audit_events)::int AS events,
            (SELECT count(*) FROM paper_checklist_items)::int AS checklist, (SELECT count(*) FROM idempotency_keys)::int AS keys`,
  );
  return rows[0];
}

async function filesUnder(dir: string): Promise<string[]> {
  try {
    return (await readdir(dir, { recursive: true })).sort();
  } catch {
    return [];
  }
}

async function draftNext(body: Record<string, unknown>) {
  return h.call('POST', '/control/papers/draft-next', { requested_by: 'flow-test', ...body });
}

async function approve(paperId: string, key: string) {
  const answer = await h.call('POST', `/control/api/publication-automation/${path(paperId)}/checklist/final_human_approval`, {
    idempotency_key: key,
    requested_by: 'reviewer',
    status: 'pass',
  });
  expect(answer.status).toBe(200);
}

describe('draft-next', () => {
  it('skips a candidate whose evidence is missing, drafts the next one, and answers noop once only skipped ones are left', { timeout: 60_000 }, async () => {
    const missing = await h.completedRun('flow-missing', { evidence: false, finishedAt: at(1) });
    const good = await h.completedRun('flow-good', { finishedAt: at(2) });
    await h.completedRun('flow-negative', { decision: 'negative', finishedAt: at(3) });

    const before = await rowCounts();
    const dry = await draftNext({ dry_run: true });
    expect(dry.status).toBe(200);
    expect(dry.body).toMatchObject({
      action: 'dry_run_draft',
      paper_id: good,
      writer: 'deterministic',
      evidence: { complete: true, found: ['run_notes.md', '.research/decision.json', 'results/main/metrics.json'], missing: [] },
      skipped: [{ paper_id: missing, reason: 'missing_evidence' }],
    });
    expect(await rowCounts()).toEqual(before);
    expect(await filesUnder(h.settings.stateDir)).toEqual([]);

    const live = await draftNext({ dry_run: false });
    expect(live.status).toBe(200);
    expect(live.body).toMatchObject({
      action: 'drafted',
      paper_id: good,
      result: { outcome: 'drafted', writer: 'deterministic', writer_fallback_reason: null, checklist_passed: true },
      paper: { paper_id: good, paper_status: 'draft_review', review_status: 'unreviewed', writer: 'deterministic', draft_count: 1 },
      skipped: [{ paper_id: missing, reason: 'missing_evidence', missing: expect.arrayContaining([expect.stringContaining('run_notes.md')]) }],
    });
    const checklist = Object.fromEntries((live.body.paper.checklist as { item_id: string; status: string }[]).map((item) => [item.item_id, item.status]));
    expect(checklist).toEqual({
      artifact_readability: 'pass',
      title_abstract_quality: 'pass',
      claim_evidence_alignment: 'pass',
      novelty_significance: 'pending',
      reproducibility: 'pass',
      limitations_ethics: 'pass',
      formatting_quality: 'pass',
      target_venue_fit: 'pending',
      final_human_approval: 'pending',
    });
    const stored = await readFile(join(h.settings.stateDir, 'papers', good, 'paper.md'), 'utf8');
    expect(stored).toContain('| `results/main/metrics.json` | `accuracy` | 0.912 |');
    const artifact = (live.body.paper.draft_artifacts as { path: string; sha256: string }[]).find((a) => a.path.endsWith('paper.md'))!;
    expect(artifact.sha256).toBe(createHash('sha256').update(stored).digest('hex'));
    const events = await h.t.store.query<{ event_type: string }>('SELECT event_type FROM audit_events WHERE entity_id = $1 ORDER BY id', [good]);
    expect(events.rows.map((row) => row.event_type)).toEqual(['paper.draft_started', 'paper.drafted']);
    maybeSaveHistory('paper-drafted', await fetchRunHistory(`paper:${good}`));

    const noop = await draftNext({ dry_run: false });
    expect(noop.status).toBe(200);
    expect(noop.body).toMatchObject({ action: 'noop', skipped: [{ paper_id: missing, reason: 'missing_evidence' }] });
    const status = await h.call('GET', '/control/api/status');
    expect(status.body.counts.paper_pipeline).toMatchObject({ write_needed: 1, not_writable_by_decision_gate: 1 });
  });

  it('redrafts a drafted paper only with force', { timeout: 30_000 }, async () => {
    const plain = await draftNext({ dry_run: true });
    expect(plain.body.action).toBe('noop');
    const forced = await draftNext({ dry_run: false, force: true });
    expect(forced.body).toMatchObject({ action: 'drafted', paper: { paper_id: expect.stringContaining('flow-good'), draft_count: 2, paper_status: 'draft_review' } });
  });

  it('refuses an unknown field or a wrong type with 422', async () => {
    expect((await draftNext({ dry_run: 'yes' })).status).toBe(422);
    expect((await draftNext({ dry_run: true, writer: 'hosted' })).status).toBe(422);
    expect((await h.call('POST', '/control/papers/draft-next', { dry_run: true })).status).toBe(422);
  });
});

describe('rewrites', () => {
  it('rewrites one draft once per idempotency key, the same on both mounts, and 409 on another payload', { timeout: 30_000 }, async () => {
    const paperId = await h.completedRun('flow-rewrite', { finishedAt: at(0) });
    expect((await draftNext({ dry_run: false })).body).toMatchObject({ action: 'drafted', paper_id: paperId });
    const body = { idempotency_key: 'rewrite-1', requested_by: 'reviewer' };
    const first = await h.call('POST', `/control/api/publication-automation/${path(paperId)}/rewrite-draft`, body);
    expect(first.status).toBe(200);
    expect(first.body).toMatchObject({ ok: true, changed: true, paper: { paper_status: 'publication_draft', rewrite_count: 1, draft_count: 2 } });
    const replay = await h.call('POST', `/control/api/paper-reviews/${path(paperId)}/rewrite-draft`, body);
    expect(replay).toEqual(first);
    maybeSaveHistory('paper-rewritten', await fetchRunHistory(`paper:${paperId}`));
    const conflict = await h.call('POST', `/control/api/paper-reviews/${path(paperId)}/rewrite-draft`, { ...body, force: true });
    expect(conflict.status).toBe(409);
    const events = await h.t.store.query<{ event_type: string; entity_type: string }>('SELECT event_type, entity_type FROM audit_events WHERE entity_id = $1 ORDER BY id', [paperId]);
    expect(events.rows.filter((row) => row.event_type === 'paper_review.draft_rewritten')).toEqual([{ event_type: 'paper_review.draft_rewritten', entity_type: 'paper_review' }]);
  });

  it('leaves a draft under review alone unless forced, and answers 404 for an unknown paper', { timeout: 30_000 }, async () => {
    const paperId = await h.completedRun('flow-reviewed', { finishedAt: at(0) });
    await draftNext({ dry_run: false });
    for (const [index, to] of (['triage_ready', 'in_review'] as const).entries()) {
      const moved = await h.call('POST', `/control/api/paper-reviews/${path(paperId)}/status`, { idempotency_key: `move-${index}`, requested_by: 'reviewer', review_status: to });
      expect(moved.status).toBe(200);
    }
    const refused = await h.call('POST', `/control/api/paper-reviews/${path(paperId)}/rewrite-draft`, { idempotency_key: 'r-1', requested_by: 'reviewer' });
    expect(refused.status).toBe(409);
    expect(refused.body.detail).toContain('force');
    const forced = await h.call('POST', `/control/api/paper-reviews/${path(paperId)}/rewrite-draft`, { idempotency_key: 'r-1', requested_by: 'reviewer', force: true });
    expect(forced.status).toBe(200);
    const unknown = await h.call('POST', `/control/api/paper-reviews/${path('nope:nope-20261122T100000Z:draft')}/rewrite-draft`, { idempotency_key: 'r-2', requested_by: 'reviewer' });
    expect(unknown.status).toBe(404);
  });

  it('rewrites 10 of 12 papers with limit 10, highest rank first; a dry run only previews; skip_rewritten leaves rewritten ones out', { timeout: 90_000 }, async () => {
    const ids: string[] = [];
    for (let index = 0; index < 12; index += 1) ids.push(await h.completedRun(`flow-batch-${index}`, { finishedAt: at(index) }));
    for (let index = 0; index < 12; index += 1) expect((await draftNext({ dry_run: false })).body.action).toBe('drafted');
    const filters = { search: 'flow-batch-', idempotency_key: 'batch-1', requested_by: 'batcher' };

    const before = await rowCounts();
    const preview = await h.call('POST', '/control/api/publication-automation/rewrite-batch', { ...filters, dry_run: true, limit: 10 });
    expect(preview.status).toBe(200);
    expect(preview.body).toMatchObject({ dry_run: true, count: 10 });
    expect(await rowCounts()).toEqual(before);

    const batch = await h.call('POST', '/control/api/publication-automation/rewrite-batch', { ...filters, limit: 10 });
    expect(batch.status).toBe(200);
    expect(batch.body).toMatchObject({ dry_run: false, count: 10, rewritten: 10 });
    const rewritten = new Set((batch.body.results as { paper_id: string }[]).map((result) => result.paper_id));
    expect(rewritten).toEqual(new Set((preview.body.selected as { paper_id: string }[]).map((paper) => paper.paper_id)));
    expect((await h.call('POST', '/control/api/paper-reviews/rewrite-batch', { ...filters, limit: 10 })).body).toEqual(batch.body);
    maybeSaveHistory('paper-rewrite-batch', await fetchRunHistory('paper-rewrite-batch:batch-1'));

    const rest = await h.call('POST', '/control/api/paper-reviews/rewrite-batch', { ...filters, idempotency_key: 'batch-2', skip_rewritten: true, dry_run: true });
    expect((rest.body.selected as { paper_id: string }[]).map((paper) => paper.paper_id).sort()).toEqual(ids.filter((id) => !rewritten.has(id)).sort());
    expect((await h.call('POST', '/control/api/paper-reviews/rewrite-batch', { ...filters, idempotency_key: 'batch-3', limit: 201 })).status).toBe(422);
  });
});

describe('finalization', () => {
  it('prepares the package only once the automated checklist passed and a person approved, then records the import once', { timeout: 30_000 }, async () => {
    const paperId = await h.completedRun('flow-final', { finishedAt: at(0), evidence: evidenceFiles({ accuracy: 0.75 }) });
    expect((await draftNext({ dry_run: false })).body).toMatchObject({ action: 'drafted', paper_id: paperId });
    const url = `/control/api/publication-automation/${path(paperId)}/prepare-finalization-package`;
    const request = { idempotency_key: 'pkg-1', requested_by: 'reviewer', target_label: 'workshop-2027' };

    const dry = await h.call('POST', url, { ...request, dry_run: true });
    expect(dry.status).toBe(200);
    expect(dry.body).toMatchObject({ dry_run: true, ready: false, waiting_for: [expect.stringContaining('final_human_approval')] });
    const paths = (dry.body.manifest.files as { path: string }[]).map((file) => file.path);
    expect(paths).toEqual(['checklist.json', 'draft.json', 'evidence/.research/decision.json', 'evidence/results/main/metrics.json', 'evidence/run_notes.md', 'paper.md']);
    expect(await filesUnder(join(h.settings.stateDir, 'papers', paperId, 'packages'))).toEqual([]);
    expect((await h.call('POST', url, request)).status).toBe(409);

    await approve(paperId, 'approve-1');
    const live = await h.call('POST', url, request);
    expect(live.status).toBe(200);
    expect(live.body).toMatchObject({ dry_run: false, paper: { review_status: 'finalized' } });
    const dir = join(h.settings.stateDir, live.body.package_dir as string);
    const manifestText = await readFile(join(dir, 'manifest.json'), 'utf8');
    expect(createHash('sha256').update(manifestText).digest('hex')).toBe(live.body.manifest_sha256);
    const sums = (await readFile(join(dir, 'SHA256SUMS'), 'utf8')).trim().split('\n');
    for (const line of sums) {
      const [sum, file] = line.split('  ');
      expect(createHash('sha256').update(await readFile(join(dir, file!))).digest('hex')).toBe(sum);
    }
    expect(await h.call('POST', url, request)).toEqual(live);

    const imported = await h.call('POST', `/control/api/publication-automation/${path(paperId)}/record-import`, {
      idempotency_key: 'import-1',
      requested_by: 'reviewer',
      corpus_repo: 'lab/corpus',
      commit_sha: 'abc1234',
      manifest_sha256: live.body.manifest_sha256,
    });
    expect(imported.status).toBe(200);
    const status = await h.call('GET', '/control/api/status');
    expect(status.body.counts.paper_pipeline.published_imported).toBe(1);
    const rewrite = await h.call('POST', `/control/api/paper-reviews/${path(paperId)}/rewrite-draft`, { idempotency_key: 'late', requested_by: 'reviewer', force: true });
    expect(rewrite.status).toBe(409);
  });

  it('refuses a package while an automated item fails', { timeout: 30_000 }, async () => {
    const paperId = await h.completedRun('flow-failing', { finishedAt: at(0) });
    await draftNext({ dry_run: false });
    const failed = await h.call('POST', `/control/api/paper-reviews/${path(paperId)}/checklist/claim_evidence_alignment`, {
      idempotency_key: 'fail-1',
      requested_by: 'reviewer',
      status: 'fail',
      note: 'the table misreads the loss',
    });
    expect(failed.status).toBe(200);
    const answer = await h.call('POST', `/control/api/paper-reviews/${path(paperId)}/prepare-finalization-package`, { idempotency_key: 'pkg-2', requested_by: 'reviewer', target_label: 'x', dry_run: true });
    expect(answer.status).toBe(409);
    expect(answer.body.detail).toContain('claim_evidence_alignment is fail');
    await rm(join(h.settings.projectRoot, 'flow-failing'), { recursive: true, force: true });
  });
});
