import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { insertProject } from '../../capabilities/runs/projects.ts';
import { startTestApp, type TestApp } from '../support/app.ts';
import { jsonClient, tableCounts } from '../support/ledgers.ts';
import { candidate } from '../support/research.ts';

/**
 * POST /control/api/v1/followups/launch-next on real Postgres: which run gets a follow-up, what the candidate says,
 * that an admitted one is queued with its lineage, and that a parent never gets two.
 */

let t: TestApp;
beforeAll(async () => {
  t = await startTestApp();
});
afterAll(async () => t.close());

const launch = (body: Record<string, unknown>) => jsonClient(t).post('/control/api/v1/followups/launch-next', { requested_by: 'followup-test', ...body });
let runSecond = 0;
/** Unrelated subjects, so that no two seeded parents read as near-identical to the planner. */
const SUBJECTS = ['mixture-of-experts routing', 'rotary embedding scaling', 'speculative decoding drafts', 'low-rank adapters', 'int4 weight packing', 'kv cache eviction'];

/** A promoted candidate's project with one finished run of that decision; returns the run id. */
async function finishedRun(dedupeKey: string, decision: string, options: { fromCandidate?: boolean; finishedAt?: string } = {}): Promise<string> {
  let projectId = dedupeKey;
  if (options.fromCandidate !== false) {
    const imported = await jsonClient(t).post('/control/api/research/import-candidates', {
      candidates: [
        candidate({
          dedupe_key: dedupeKey,
          title: `Parent study ${dedupeKey}`,
          hypothesis: `${dedupeKey} ${SUBJECTS[runSecond % SUBJECTS.length]} improves held-out accuracy.`,
          mechanism: `${dedupeKey}: ${SUBJECTS[(runSecond + 3) % SUBJECTS.length]} replaces the default component.`,
        }),
      ],
      dry_run: false,
      requested_by: 'seed',
    });
    const candidateId = imported.body.results[0].candidate_id;
    const promoted = await jsonClient(t).post('/control/api/research/promote-candidate', { candidate_id: candidateId, dry_run: false, requested_by: 'seed', idempotency_key: `seed-${dedupeKey}` });
    expect(promoted.status, JSON.stringify(promoted.body)).toBe(200);
    projectId = promoted.body.project_id;
    await t.store.query(`UPDATE queue_items SET status = 'completed' WHERE project_id = $1`, [projectId]);
  } else {
    await insertProject(t.store, { project_id: projectId, project_name: `Hand-made ${projectId}`, project_dir: projectId, workload_class: 'unknown' });
  }
  runSecond += 1;
  const runId = `${projectId}-20261122T10${String(Math.floor(runSecond / 60)).padStart(2, '0')}${String(runSecond % 60).padStart(2, '0')}Z`;
  await t.store.query(
    `INSERT INTO runs (run_id, project_id, workflow_id, state, lane, wake_gate_url, workload_class, requested_by, decision, decision_summary, finished_at)
     VALUES ($1, $2, $3, 'reconciled', 'default', 'http://127.0.0.1:9', 'unknown', 'test', $4, 'Block-sparse attention lost 9 points at 16k.', $5)`,
    [runId, projectId, `run:${runId}`, decision, options.finishedAt ?? new Date(Date.UTC(2026, 10, 22, 10, 0, runSecond)).toISOString()],
  );
  return runId;
}

describe('launch-next', () => {
  it('answers noop when no run waits for a follow-up, and needs an idempotency key to go live', async () => {
    expect((await launch({})).body).toMatchObject({ ok: true, action: 'noop', dry_run: true, parent_run: null, candidate: null });
    const keyless = await launch({ dry_run: false });
    expect(keyless.status).toBe(422);
    expect(keyless.body.detail[0].loc).toEqual(['body', 'idempotency_key']);
  });

  it('dry run: names the parent and the candidate (what changed and why), writes nothing; live: plans and queues it once', async () => {
    await finishedRun('positive-parent', 'finalize_positive');
    const parentRun = await finishedRun('negative-parent', 'negative');
    const before = await tableCounts(t.store);

    const dry = await launch({});
    expect(dry.body).toMatchObject({
      ok: true,
      action: 'dry_run_followup',
      parent_run: { run_id: parentRun, project_id: 'negative-parent', decision: 'negative' },
      candidate: { generation_mode: 'followup_from_negative', decision: 'admitted', candidate_id: null },
    });
    expect(dry.body.candidate.novelty_comparison).toMatch(new RegExp(`What changed and why: parent run ${parentRun} .* ended negative`));
    expect(dry.body.candidate.score).toBeGreaterThanOrEqual(72);
    expect(await tableCounts(t.store)).toEqual(before);

    const live = await launch({ dry_run: false, idempotency_key: 'followup-1' });
    expect(live.status, JSON.stringify(live.body)).toBe(200);
    expect(live.body).toMatchObject({ ok: true, action: 'followup_queued', parent_run: { run_id: parentRun }, promotion: { queue_status: 'queued' } });
    const candidateId = live.body.candidate.candidate_id as string;
    const stored = await jsonClient(t).get(`/control/api/research/candidates/${candidateId}`);
    expect(stored.body).toMatchObject({ generation_mode: 'followup_from_negative', parent_run_id: parentRun, parent_project_id: 'negative-parent', queue_admitted: true });
    const links = await t.store.query(`SELECT from_kind, from_id, to_kind, relation FROM research_lineage WHERE to_id = $1 OR from_id = $1 ORDER BY lineage_id`, [candidateId]);
    expect(links.rows).toEqual([
      { from_kind: 'project', from_id: 'negative-parent', to_kind: 'followup_candidate', relation: 'followup' },
      { from_kind: 'run', from_id: parentRun, to_kind: 'followup_candidate', relation: 'followup' },
      { from_kind: 'candidate', from_id: candidateId, to_kind: 'idea', relation: 'promoted_to' },
    ]);
    const item = await t.store.query<{ status: string }>('SELECT status FROM queue_items WHERE project_id = $1', [live.body.promotion.project_id]);
    expect(item.rows).toEqual([{ status: 'queued' }]);

    // The same key answers the first result; a new key finds nothing left to follow up: never twice for one parent.
    expect((await launch({ dry_run: false, idempotency_key: 'followup-1' })).body).toEqual(live.body);
    expect((await launch({ dry_run: false, idempotency_key: 'followup-2' })).body.action).toBe('noop');
    const followups = await t.store.query(`SELECT 1 FROM research_lineage WHERE from_kind = 'run' AND from_id = $1 AND to_kind = 'followup_candidate'`, [parentRun]);
    expect(followups.rowCount).toBe(1);
  });

  it('passes over runs with a paper; a parent without a candidate gets a follow-up recorded for review, not queued', async () => {
    const withPaper = await finishedRun('paper-parent', 'negative', { finishedAt: '2026-01-01T00:00:00Z' });
    await t.store.query(`UPDATE runs SET paper_status = 'eligible' WHERE run_id = $1`, [withPaper]);
    const handMade = await finishedRun('hand-made-parent', 'inconclusive', { fromCandidate: false });
    const live = await launch({ dry_run: false, idempotency_key: 'followup-3' });
    expect(live.body).toMatchObject({ action: 'followup_recorded', parent_run: { run_id: handMade, decision: 'inconclusive' }, promotion: null });
    expect(live.body.candidate.decision).toBe('needs-review');
    expect((await t.store.query('SELECT 1 FROM queue_items WHERE candidate_id = $1', [live.body.candidate.candidate_id])).rowCount).toBe(0);
  });

  it('gives one parent one follow-up under 10 concurrent live calls', async () => {
    const parentRun = await finishedRun('contended-parent', 'mixed');
    const answers = await Promise.all(Array.from({ length: 10 }, (_, index) => launch({ dry_run: false, idempotency_key: `race-${index}` })));
    expect(answers.map((answer) => answer.status)).toEqual(Array(10).fill(200));
    const queued = answers.filter((answer) => answer.body.action === 'followup_queued');
    expect(queued).toHaveLength(1);
    expect(queued[0]!.body.parent_run.run_id).toBe(parentRun);
    // Admitted, not merged into the earlier follow-up: each follow-up reads as its own parent's.
    expect(queued[0]!.body.candidate.decision).toBe('admitted');
    expect(answers.filter((answer) => answer.body.action !== 'followup_queued').every((answer) => answer.body.action === 'noop')).toBe(true);
  });
});
