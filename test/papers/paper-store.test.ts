import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { emptyPaperPipelineCounts, paperCandidacy, paperPipelineCount, type PaperPipelineCounts } from '../../capabilities/papers/domain/paper-candidacy.ts';
import { CHECKLIST_ITEM_IDS, CHECKLIST_STATUSES, PAPER_STATUSES, paperIdFor, REVIEW_STATUSES, type ReviewStatus } from '../../capabilities/papers/domain/paper-status.ts';
import { paperCounts } from '../../capabilities/papers/paper-counts.ts';
import { listDraftCandidates, REDRAFTABLE_STATUSES } from '../../capabilities/papers/store/draft-ledger.ts';
import { insertProject } from '../../capabilities/runs/projects.ts';
import type { Queryable } from '../../platform/store/store.ts';
import { startTestApp, type TestApp } from '../support/app.ts';

let t: TestApp;

beforeAll(async () => {
  t = await startTestApp();
});

afterAll(async () => {
  await t?.close();
});

/** Rolls back whatever the body wrote, so each generated case starts from an empty ledger. */
class Rollback extends Error {}
async function inRolledBackTransaction(body: (tx: Queryable) => Promise<void>): Promise<void> {
  await t.store.transaction(async (tx) => {
    await body(tx);
    throw new Rollback();
  }).catch((error: unknown) => {
    if (!(error instanceof Rollback)) throw error;
  });
}

interface SeedRun {
  state: string;
  decision: string | null;
  /** What the run's evidence column holds: no evidence, or an object whose sufficient_for_paper is this value. */
  evidence: null | { sufficient_for_paper: unknown };
  paper: null | { paper_status: string; review_status: ReviewStatus; imported: boolean };
}

const RUN_STATES = ['reconciled', 'running', 'gate_error', 'canceled'] as const;
const seedRun: fc.Arbitrary<SeedRun> = fc.record({
  state: fc.constantFrom(...RUN_STATES),
  decision: fc.constantFrom('finalize_positive', 'negative', 'inconclusive', 'finalize_positive ', null),
  evidence: fc.option(fc.record({ sufficient_for_paper: fc.constantFrom<unknown>(true, false, 'true', null) }), { nil: null }),
  paper: fc.option(
    fc.record({
      paper_status: fc.constantFrom(...PAPER_STATUSES),
      review_status: fc.constantFrom(...REVIEW_STATUSES),
      imported: fc.boolean(),
    }),
    { nil: null },
  ),
});

async function seed(tx: Queryable, runs: SeedRun[]): Promise<void> {
  for (const [index, run] of runs.entries()) {
    const projectId = `paper-count-${index}`;
    const runId = `${projectId}-20261122T1000${String(index % 60).padStart(2, '0')}Z`;
    await insertProject(tx, { project_id: projectId, project_name: `Paper count ${index}`, project_dir: projectId, workload_class: 'unknown' });
    await tx.query(
      `INSERT INTO runs (run_id, project_id, workflow_id, state, lane, wake_gate_url, workload_class, requested_by, decision, evidence)
       VALUES ($1, $2, $3, $4, 'default', 'http://127.0.0.1:9', 'unknown', 'test', $5, $6::jsonb)`,
      [runId, projectId, `run:${runId}`, run.state, run.decision, run.evidence === null ? null : JSON.stringify(run.evidence)],
    );
    if (!run.paper) continue;
    const paperId = paperIdFor(projectId, runId);
    await tx.query('INSERT INTO papers (paper_id, project_id, run_id, paper_status, review_status) VALUES ($1, $2, $3, $4, $5)', [
      paperId,
      projectId,
      runId,
      run.paper.paper_status,
      run.paper.review_status,
    ]);
    if (run.paper.imported) {
      await tx.query(
        `INSERT INTO corpus_imports (paper_id, corpus_repo, commit_sha, manifest_sha256, requested_by) VALUES ($1, 'lab/corpus', 'abc1234', $2, 'test')`,
        [paperId, 'a'.repeat(64)],
      );
    }
  }
}

/** The counts the domain rule gives for the same rows, reading the evidence the way the store does. */
function expectedCounts(runs: SeedRun[]): PaperPipelineCounts {
  const counts = emptyPaperPipelineCounts();
  for (const run of runs) {
    const name = paperPipelineCount(
      { state: run.state, decision: run.decision, sufficient_for_paper: run.evidence?.sufficient_for_paper === true },
      run.paper,
    );
    if (name) counts[name] += 1;
  }
  return counts;
}

describe('the paper ledgers', () => {
  it('hold the CHECK value lists of the TypeScript vocabularies', async () => {
    const expected: Record<string, readonly string[]> = {
      papers_paper_status_check: PAPER_STATUSES,
      papers_review_status_check: REVIEW_STATUSES,
      papers_writer_check: ['deterministic', 'hosted'],
      paper_review_history_from_status_check: REVIEW_STATUSES,
      paper_review_history_to_status_check: REVIEW_STATUSES,
      paper_checklist_items_item_id_check: CHECKLIST_ITEM_IDS,
      paper_checklist_items_status_check: CHECKLIST_STATUSES,
    };
    const result = await t.store.query<{ conname: string; def: string }>(
      `SELECT conname, pg_get_constraintdef(oid) AS def FROM pg_constraint
        WHERE contype = 'c' AND conname IN (SELECT jsonb_array_elements_text($1::jsonb))`,
      [JSON.stringify(Object.keys(expected))],
    );
    const actual = Object.fromEntries(result.rows.map((row) => [row.conname, [...row.def.matchAll(/'([^']*)'::text/g)].map((m) => m[1]).sort()]));
    expect(actual).toEqual(Object.fromEntries(Object.entries(expected).map(([name, values]) => [name, [...values].sort()])));
  });

  it('refuse a paper id that is not <project_id>:<run_id>:draft, a failed checklist item without a note, and a second import', async () => {
    await inRolledBackTransaction(async (tx) => {
      await seed(tx, [{ state: 'reconciled', decision: 'finalize_positive', evidence: { sufficient_for_paper: true }, paper: null }]);
      const runId = 'paper-count-0-20261122T100000Z';
      await expect(
        tx.query(`INSERT INTO papers (paper_id, project_id, run_id, paper_status) VALUES ('other', 'paper-count-0', $1, 'eligible')`, [runId]),
      ).rejects.toThrow(/papers_paper_id_format/);
    });
    await inRolledBackTransaction(async (tx) => {
      await seed(tx, [{ state: 'reconciled', decision: 'finalize_positive', evidence: { sufficient_for_paper: true }, paper: { paper_status: 'draft_review', review_status: 'unreviewed', imported: true } }]);
      const paperId = paperIdFor('paper-count-0', 'paper-count-0-20261122T100000Z');
      await expect(
        tx.query(`INSERT INTO paper_checklist_items (paper_id, item_id, status, note) VALUES ($1, 'reproducibility', 'fail', ' ')`, [paperId]),
      ).rejects.toThrow(/paper_checklist_items_note_required/);
    });
    await inRolledBackTransaction(async (tx) => {
      await seed(tx, [{ state: 'reconciled', decision: 'finalize_positive', evidence: { sufficient_for_paper: true }, paper: { paper_status: 'draft_review', review_status: 'finalized', imported: true } }]);
      const paperId = paperIdFor('paper-count-0', 'paper-count-0-20261122T100000Z');
      await expect(
        tx.query(`INSERT INTO corpus_imports (paper_id, corpus_repo, commit_sha, manifest_sha256, requested_by) VALUES ($1, 'x', 'abc1234', $2, 't')`, [paperId, 'b'.repeat(64)]),
      ).rejects.toThrow(/corpus_imports_pkey/);
    });
  });

  it('count the paper pipeline as the domain rule does, on generated runs and papers', async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(seedRun, { maxLength: 12 }), async (runs) => {
        await inRolledBackTransaction(async (tx) => {
          await seed(tx, runs);
          expect(await paperCounts(tx)).toEqual({ total: runs.filter((run) => run.paper).length, pipeline: expectedCounts(runs) });
        });
      }),
      { numRuns: 60 },
    );
  });
});

/** Where a seeded paper goes next: another status, deleted, or nowhere; and its review moves, and its import comes or goes. */
const paperMove = fc.option(fc.constantFrom<string>(...PAPER_STATUSES, 'deleted'), { nil: null });
const reviewMove = fc.record({ review_status: fc.option(fc.constantFrom(...REVIEW_STATUSES), { nil: null }), imported: fc.option(fc.boolean(), { nil: null }) });

/** The draft candidates the domain rule names, in draft-next's order (these runs share finished_at, so by run id). */
function expectedCandidates(runs: { run: SeedRun; run_id: string; paper_status: string | null }[], force: boolean): string[] {
  const writable = runs.filter(({ run }) => {
    const sufficient = run.evidence?.sufficient_for_paper === true;
    return paperCandidacy({ state: run.state, decision: run.decision, sufficient_for_paper: sufficient }).writable;
  });
  const byRunId = (a: { run_id: string }, b: { run_id: string }) => (a.run_id < b.run_id ? -1 : 1);
  const waiting = writable.filter((r) => r.paper_status === null || r.paper_status === 'eligible').sort(byRunId);
  const redraftable = writable
    .filter((r) => force && (REDRAFTABLE_STATUSES as readonly string[]).includes(r.paper_status ?? '') && !['finalized', 'rejected'].includes(r.run.paper!.review_status))
    .sort(byRunId);
  return [...waiting, ...redraftable].map((r) => r.run_id);
}

describe("draft-next's candidates", () => {
  it('are the writable runs whose paper is not drafted (with force, then the redraftable ones), after any paper moves; the pipeline counts follow, and a paper move leaves its run untouched', async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(fc.tuple(seedRun, paperMove, reviewMove), { maxLength: 12 }), fc.boolean(), async (cases, force) => {
        await inRolledBackTransaction(async (tx) => {
          await seed(tx, cases.map(([run]) => run));
          const before = await tx.query<{ run_id: string; updated_at: Date }>('SELECT run_id, updated_at FROM runs ORDER BY run_id');
          const seeded: { run: SeedRun; run_id: string; paper_status: string | null }[] = [];
          const moved: SeedRun[] = [];
          for (const [index, [run, move, review]] of cases.entries()) {
            const projectId = `paper-count-${index}`;
            const runId = `${projectId}-20261122T1000${String(index % 60).padStart(2, '0')}Z`;
            const paperId = paperIdFor(projectId, runId);
            let paper = run.paper ? { ...run.paper } : null;
            if (paper && move === 'deleted') {
              await tx.query('DELETE FROM corpus_imports WHERE paper_id = $1', [paperId]);
              await tx.query('DELETE FROM papers WHERE run_id = $1', [runId]);
              paper = null;
            } else if (paper) {
              if (move !== null) await tx.query('UPDATE papers SET paper_status = $2 WHERE run_id = $1', [runId, move]);
              if (review.review_status !== null) await tx.query('UPDATE papers SET review_status = $2 WHERE run_id = $1', [runId, review.review_status]);
              if (review.imported === false) await tx.query('DELETE FROM corpus_imports WHERE paper_id = $1', [paperId]);
              if (review.imported === true && !paper.imported) {
                await tx.query(
                  `INSERT INTO corpus_imports (paper_id, corpus_repo, commit_sha, manifest_sha256, requested_by) VALUES ($1, 'lab/corpus', 'abc1234', $2, 'test')`,
                  [paperId, 'b'.repeat(64)],
                );
              }
              paper = {
                paper_status: move ?? paper.paper_status,
                review_status: review.review_status ?? paper.review_status,
                imported: review.imported ?? paper.imported,
              };
            }
            moved.push({ ...run, paper });
            seeded.push({ run: moved.at(-1)!, run_id: runId, paper_status: paper?.paper_status ?? null });
          }
          const candidates = await listDraftCandidates(tx, { force, limit: 100 });
          expect(candidates.map((c) => c.run_id)).toEqual(expectedCandidates(seeded, force));
          expect(candidates.map((c) => c.paper_status)).toEqual(expectedCandidates(seeded, force).map((id) => seeded.find((r) => r.run_id === id)!.paper_status));
          expect(await paperCounts(tx)).toEqual({ total: moved.filter((run) => run.paper).length, pipeline: expectedCounts(moved) });
          expect((await tx.query('SELECT run_id, updated_at FROM runs ORDER BY run_id')).rows).toEqual(before.rows);
        });
      }),
      { numRuns: 80 },
    );
  });

  it('can be read from the awaiting-draft index, whatever the table size makes the planner prefer', async () => {
    await inRolledBackTransaction(async (tx) => {
      await tx.query('SET LOCAL enable_seqscan = off');
      await tx.query('SET LOCAL enable_bitmapscan = off');
      const plan = await tx.query<{ 'QUERY PLAN': string }>(
        `EXPLAIN SELECT run_id FROM runs r
          WHERE r.state = 'reconciled' AND r.decision = ANY (ARRAY['finalize_positive'])
            AND r.evidence -> 'sufficient_for_paper' = 'true'::jsonb AND (r.paper_status IS NULL OR r.paper_status = 'eligible')
          ORDER BY r.finished_at ASC NULLS LAST, r.run_id LIMIT 10`,
      );
      expect(plan.rows.map((row) => row['QUERY PLAN']).join('\n')).toMatch(/Index (Only )?Scan using runs_awaiting_draft/);
    });
  });
});

describe('GET /control/api/status', () => {
  it('counts the papers and the paper pipeline', async () => {
    const runs: SeedRun[] = [
      { state: 'reconciled', decision: 'finalize_positive', evidence: { sufficient_for_paper: true }, paper: null },
      { state: 'reconciled', decision: 'negative', evidence: { sufficient_for_paper: true }, paper: null },
      { state: 'reconciled', decision: 'inconclusive', evidence: { sufficient_for_paper: false }, paper: null },
      { state: 'reconciled', decision: 'finalize_positive', evidence: { sufficient_for_paper: true }, paper: { paper_status: 'publication_draft', review_status: 'finalized', imported: false } },
      { state: 'reconciled', decision: 'finalize_positive', evidence: { sufficient_for_paper: true }, paper: { paper_status: 'publication_draft', review_status: 'finalized', imported: true } },
      { state: 'reconciled', decision: 'finalize_positive', evidence: { sufficient_for_paper: true }, paper: { paper_status: 'draft_review', review_status: 'in_review', imported: false } },
    ];
    await t.store.transaction((tx) => seed(tx, runs));
    const response = await t.app.inject({ method: 'GET', url: '/control/api/status', headers: t.auth });
    expect(response.statusCode).toBe(200);
    expect(response.json().counts).toMatchObject({
      papers: 3,
      paper_pipeline: {
        write_needed: 1,
        not_writable_by_decision_gate: 1,
        raw_completed_no_paper_candidates: 1,
        publish_ready: 1,
        published_imported: 1,
      },
    });
  });
});
