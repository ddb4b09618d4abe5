import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  ACTIVE_QUEUE_STATUSES,
  QUEUE_GROUPS,
  QUEUE_STATUSES,
  isRunOwned,
  queueGroupsOf,
  type QueueStatus,
} from '../../capabilities/runs/domain/queue-status.ts';
import {
  ADMISSION_DECISIONS,
  CandidateProposalSchema,
  DEDUPE_KEY_PATTERN,
  GENERATION_MODES,
  RUNTIME_CLASSES,
  SOURCE_KINDS,
  type CandidateProposal,
} from '../../capabilities/research/domain/research-candidate.ts';
import { WORKLOAD_CLASSES } from '../../worker-gate/contract/workload.ts';
import { getIdeaByCandidate, insertIdea } from '../../capabilities/research/store/ideas.ts';
import { PROJECT_ID_PATTERN, getProject, insertProject } from '../../capabilities/runs/projects.ts';
import { getQueueItem, insertQueueItem } from '../../capabilities/runs/queue-items.ts';
import { insertAdmission, latestAdmissions } from '../../capabilities/research/research-admissions.ts';
import {
  findDedupeMatches,
  getCandidate,
  insertCandidate,
  listCandidates,
  markCandidateQueueAdmitted,
  type CandidateInsert,
} from '../../capabilities/research/research-candidates.ts';
import { facilityCounts } from '../../capabilities/research/store/research-facility-counts.ts';
import { LINEAGE_KINDS, lineageOf, recordLineage } from '../../capabilities/research/research-lineage.ts';
import { getSource, getSourcesByIds, insertSource, listSources } from '../../capabilities/research/store/research-sources.ts';
import type { Store } from '../../platform/store/store.ts';
import { ENGINES } from '../support/engines.ts';

const CHECK_VIOLATION = '23514';
const UNIQUE_VIOLATION = '23505';
const RESTRICT_VIOLATION = '23001';

type Outcome = Partial<Omit<CandidateInsert, 'candidate_id' | 'proposal'>>;
const OUTCOME_FIELDS = ['batch_id', 'score', 'decision', 'merged_into', 'queue_admitted', 'text_fingerprint'] as const;

/** A candidate row: proposal fields and outcome fields may be overridden together. */
function candidate(id: string, overrides: Partial<CandidateProposal> & Outcome = {}): CandidateInsert {
  const outcome: Outcome = {};
  const proposalOverrides: Record<string, unknown> = { ...overrides };
  for (const field of OUTCOME_FIELDS) {
    if (field in overrides) (outcome as Record<string, unknown>)[field] = overrides[field];
    delete proposalOverrides[field];
  }
  const proposal = CandidateProposalSchema.parse({
    title: `Candidate ${id}`,
    generation_mode: 'manual_import',
    hypothesis: `Hypothesis of ${id}`,
    mechanism: `Mechanism of ${id}`,
    baseline_to_beat: 'the published baseline',
    success_threshold: '+2 points',
    kill_condition: 'no gain after 3 seeds',
    dedupe_key: `test:${id}`,
    novelty: 6.5,
    feasibility: 7,
    ...proposalOverrides,
  });
  return { candidate_id: id, batch_id: 'batch-1', proposal, score: 75.5, decision: 'admitted', ...outcome };
}

/** Minimal raw INSERT, bypassing the TypeScript layer, so the data-level checks are what decides. */
const rawCandidateSql = `INSERT INTO research_candidates
  (candidate_id, batch_id, generation_mode, title, dedupe_key, novelty, feasibility, score, decision,
   source_ids, source_urls, parent_project_id, parent_run_id)
  VALUES ($1, 'raw', $2, 'raw candidate', $3, 5, 5, 60, 'needs-review', $4::jsonb, $5::jsonb, $6, $7)`;

const rawCandidate = (
  store: Store,
  id: string,
  mode: string,
  grounding: { source_ids?: string[]; source_urls?: string[]; parent_project_id?: string; parent_run_id?: string } = {},
) =>
  store.query(rawCandidateSql, [
    id,
    mode,
    `raw:${id}`,
    JSON.stringify(grounding.source_ids ?? []),
    JSON.stringify(grounding.source_urls ?? []),
    grounding.parent_project_id ?? null,
    grounding.parent_run_id ?? null,
  ]);

const count = async (store: Store, sql: string, params: unknown[] = []) =>
  Number((await store.query<{ n: unknown }>(sql, params)).rows[0]!.n);

describe('queue status (pure)', () => {
  it('lists the statuses, the in-flight ones, and those a run owns', () => {
    expect(QUEUE_STATUSES).toHaveLength(13);
    expect(ACTIVE_QUEUE_STATUSES.every((status) => QUEUE_STATUSES.includes(status))).toBe(true);
    expect(ACTIVE_QUEUE_STATUSES).toEqual(['dispatching', 'running', 'awaiting_wake', 'wake_received', 'reconciling']);
    // A run waiting out a usage limit with its lane let go still owns its item.
    expect(QUEUE_STATUSES.filter(isRunOwned)).toEqual([
      'dispatching',
      'running',
      'awaiting_wake',
      'wake_received',
      'reconciling',
      'usage_limited',
    ]);
    expect(isRunOwned('queued')).toBe(false);
    expect(isRunOwned('completed')).toBe(false);
  });

  it('puts each row in its groups; a flagged row is also blocked', () => {
    const groups = (status: QueueStatus, manual_review_required = false) =>
      queueGroupsOf({ status, manual_review_required });
    expect(groups('queued')).toEqual(['queued', 'all']);
    expect(groups('queued', true)).toEqual(['queued', 'blocked', 'all']);
    expect(groups('running')).toEqual(['active', 'all']);
    expect(groups('running', true)).toEqual(['active', 'blocked', 'all']);
    for (const status of ['blocked', 'needs_review', 'dispatch_error'] as const) expect(groups(status)).toEqual(['blocked', 'all']);
    expect(groups('paused')).toEqual(['paused', 'all']);
    expect(groups('completed')).toEqual(['completed', 'all']);
    expect(groups('canceled')).toEqual(['completed', 'all']);
    expect(QUEUE_GROUPS).toEqual(['active', 'queued', 'blocked', 'paused', 'completed', 'all']);
    // Every status lands in exactly one group besides `all` (when unflagged).
    for (const status of QUEUE_STATUSES) expect(groups(status)).toHaveLength(2);
  });
});

describe.each(ENGINES)('research facility store on $name', (engine) => {
  let store: Store;
  let cleanup: () => Promise<void>;

  beforeAll(async () => {
    ({ store, cleanup } = await engine.open());
  });
  afterAll(async () => cleanup());

  describe('data-level checks', () => {
    it('rule 1: refuses a fresh_grounded candidate without a source id or url', async () => {
      await expect(rawCandidate(store, 'r1-bare', 'fresh_grounded')).rejects.toMatchObject({
        code: CHECK_VIOLATION,
        message: expect.stringMatching(/research_candidates_fresh_grounded_needs_source/),
      });
      await expect(
        store.transaction((tx) =>
          insertCandidate(tx, candidate('r1-typed', { generation_mode: 'fresh_grounded', source_ids: [], source_urls: [] })),
        ),
      ).rejects.toMatchObject({ code: CHECK_VIOLATION });
      expect(await count(store, `SELECT count(*) AS n FROM research_candidates WHERE candidate_id LIKE 'r1-%'`)).toBe(0);

      await rawCandidate(store, 'r1-by-id', 'fresh_grounded', { source_ids: ['src-1'] });
      await rawCandidate(store, 'r1-by-url', 'fresh_grounded', { source_urls: ['https://example.org/paper'] });
      await store.transaction((tx) =>
        insertCandidate(tx, candidate('r1-typed', { generation_mode: 'fresh_grounded', source_ids: ['src-1'] })),
      );
      expect(await count(store, `SELECT count(*) AS n FROM research_candidates WHERE candidate_id LIKE 'r1-%'`)).toBe(3);
    });

    it('rule 2: refuses a followup_from_negative candidate without parent lineage', async () => {
      await expect(
        rawCandidate(store, 'r2-bare', 'followup_from_negative', { source_ids: ['src-1'] }),
      ).rejects.toMatchObject({
        code: CHECK_VIOLATION,
        message: expect.stringMatching(/research_candidates_followup_needs_parent/),
      });
      await expect(
        store.transaction((tx) => insertCandidate(tx, candidate('r2-typed', { generation_mode: 'followup_from_negative' }))),
      ).rejects.toMatchObject({ code: CHECK_VIOLATION });

      await rawCandidate(store, 'r2-by-project', 'followup_from_negative', { parent_project_id: 'prior-project' });
      await rawCandidate(store, 'r2-by-run', 'followup_from_negative', { parent_run_id: 'prior-run-20250101T000000Z' });
      await store.transaction((tx) =>
        insertCandidate(tx, candidate('r2-typed', { generation_mode: 'followup_from_negative', parent_run_id: 'run-1' })),
      );
      expect(await count(store, `SELECT count(*) AS n FROM research_candidates WHERE candidate_id LIKE 'r2-%'`)).toBe(3);
    });

    it('other modes need no grounding', async () => {
      for (const mode of GENERATION_MODES.filter((m) => m !== 'fresh_grounded' && m !== 'followup_from_negative')) {
        await rawCandidate(store, `other-${mode}`, mode);
      }
      await expect(rawCandidate(store, 'other-unknown', 'made_up_mode')).rejects.toMatchObject({ code: CHECK_VIOLATION });
    });

    it('refuses a malformed dedupe_key and queue_admitted on a candidate that is not admitted', async () => {
      const badKey = candidate('bad-key');
      badKey.proposal = { ...badKey.proposal, dedupe_key: 'Not A Key' };
      await expect(store.transaction((tx) => insertCandidate(tx, badKey))).rejects.toMatchObject({ code: CHECK_VIOLATION });
      await expect(
        store.transaction((tx) =>
          insertCandidate(tx, candidate('bad-qa', { decision: 'rejected', queue_admitted: true })),
        ),
      ).rejects.toMatchObject({ code: CHECK_VIOLATION });
    });

    it('research_admissions refuses UPDATE, DELETE and TRUNCATE; the row is unchanged', async () => {
      const admission = await store.transaction((tx) =>
        insertAdmission(tx, {
          candidate_id: null,
          batch_id: 'immutable-batch',
          dedupe_key: 'immutable:one',
          generation_mode: 'fresh_grounded',
          title: 'refused before it became a row',
          decision: 'rejected',
          score: 12.25,
          reasons: ['fresh_grounded candidate without source evidence'],
          hard_failures: [{ code: 'missing_source_grounding', message: 'no source' }],
          score_breakdown: {
            ...{ novelty: 2, feasibility: 2, accessibility: 1, falsifiability: 1, accessibility_fallback: false, falsifiability_fallback: false },
            ...{ weighted: 12.25, mode_bonus: 0, mode_bonus_reason: 'none', score: 12.25 },
          },
          planner_version: 'test-1',
          candidate_snapshot: { title: 'refused before it became a row' },
        }),
      );
      const attempts = [
        `UPDATE research_admissions SET decision = 'admitted' WHERE admission_id = ${admission.admission_id}`,
        `DELETE FROM research_admissions WHERE admission_id = ${admission.admission_id}`,
        'TRUNCATE research_admissions',
        'TRUNCATE research_admissions CASCADE',
      ];
      for (const sql of attempts) {
        await expect(store.query(sql)).rejects.toMatchObject({
          code: RESTRICT_VIOLATION,
          message: expect.stringMatching(/append-only/),
        });
      }
      const after = await store.query<{ decision: string; score: unknown; reasons: unknown }>(
        'SELECT decision, score, reasons FROM research_admissions WHERE admission_id = $1',
        [admission.admission_id],
      );
      expect(after.rows).toHaveLength(1);
      expect(after.rows[0]!.decision).toBe('rejected');
      expect(Number(after.rows[0]!.score)).toBe(12.25);
      expect(after.rows[0]!.reasons).toEqual(['fresh_grounded candidate without source evidence']);
      expect(admission).toMatchObject({
        candidate_id: null,
        score: 12.25,
        hard_failures: [{ code: 'missing_source_grounding', message: 'no source' }],
        score_breakdown: { weighted: 12.25, mode_bonus: 0 },
        decided_by: 'planner',
      });
    });

    it('lineage recorded twice is one row', async () => {
      const link = { from_kind: 'source', from_id: 'lin-src', to_kind: 'candidate', to_id: 'lin-cand', relation: 'grounds' } as const;
      expect(await store.transaction((tx) => recordLineage(tx, link))).toBe(true);
      expect(await store.transaction((tx) => recordLineage(tx, link))).toBe(false);
      await store.query(
        `INSERT INTO research_lineage (from_kind, from_id, to_kind, to_id, relation)
         VALUES ('source', 'lin-src', 'candidate', 'lin-cand', 'grounds') ON CONFLICT DO NOTHING`,
      );
      await expect(
        store.query(
          `INSERT INTO research_lineage (from_kind, from_id, to_kind, to_id, relation)
           VALUES ('source', 'lin-src', 'candidate', 'lin-cand', 'grounds')`,
        ),
      ).rejects.toMatchObject({ code: UNIQUE_VIOLATION });
      expect(await count(store, `SELECT count(*) AS n FROM research_lineage WHERE from_id = 'lin-src'`)).toBe(1);

      // A different relation between the same two things is a different link.
      expect(await store.transaction((tx) => recordLineage(tx, { ...link, relation: 'cites' }))).toBe(true);
      const fromSource = await lineageOf(store, 'source', 'lin-src');
      const toCandidate = await lineageOf(store, 'candidate', 'lin-cand');
      expect(fromSource.map((row) => row.relation)).toEqual(['grounds', 'cites']);
      expect(toCandidate).toEqual(fromSource);
      expect(fromSource[0]).toMatchObject({ ...link, lineage_id: expect.any(Number), created_at: expect.any(String) });

      await expect(
        store.transaction((tx) => recordLineage(tx, { ...link, from_kind: 'nonsense' as 'source' })),
      ).rejects.toMatchObject({ code: CHECK_VIOLATION });
    });

    it('accepts every lineage kind', async () => {
      for (const kind of LINEAGE_KINDS) {
        await store.transaction((tx) =>
          recordLineage(tx, { from_kind: kind, from_id: `k-${kind}`, to_kind: kind, to_id: `k2-${kind}`, relation: 'kind_check' }),
        );
      }
      expect(await count(store, `SELECT count(*) AS n FROM research_lineage WHERE relation = 'kind_check'`)).toBe(
        LINEAGE_KINDS.length,
      );
    });

    it('queue rows: every status accepted, an unknown one refused, one row per project', async () => {
      for (const status of QUEUE_STATUSES) {
        const projectId = `q-${status.replace(/_/g, '-')}`;
        await store.transaction(async (tx) => {
          await insertProject(tx, { project_id: projectId, project_name: projectId, project_dir: `projects/${projectId}` });
          await insertQueueItem(tx, { project_id: projectId, project_name: projectId, status, ...(isRunOwned(status) ? { lane: projectId } : {}) });
        });
      }
      await store.transaction((tx) =>
        insertProject(tx, { project_id: 'q-unknown', project_name: 'q-unknown', project_dir: 'projects/q-unknown' }),
      );
      await expect(
        store.query(`INSERT INTO queue_items (project_id, project_name, status) VALUES ('q-unknown', 'x', 'exploded')`),
      ).rejects.toMatchObject({ code: CHECK_VIOLATION });
      await expect(
        store.query(`UPDATE queue_items SET status = 'exploded' WHERE project_id = 'q-queued'`),
      ).rejects.toMatchObject({ code: CHECK_VIOLATION });

      await expect(
        store.transaction((tx) => insertQueueItem(tx, { project_id: 'q-queued', project_name: 'again' })),
      ).rejects.toMatchObject({ code: UNIQUE_VIOLATION });
      await expect(
        store.query(`INSERT INTO queue_items (project_id, project_name) VALUES ('q-queued', 'again')`),
      ).rejects.toMatchObject({ code: UNIQUE_VIOLATION });
      expect(await count(store, `SELECT count(*) AS n FROM queue_items WHERE project_id = 'q-queued'`)).toBe(1);

      // A queue row needs its project.
      await expect(
        store.transaction((tx) => insertQueueItem(tx, { project_id: 'no-such-project', project_name: 'x' })),
      ).rejects.toMatchObject({ code: '23503' });
    });

    it('projects: slug ids and relative project_dir only', async () => {
      const bad = [
        { project_id: 'Upper-Case', project_dir: 'projects/ok' },
        { project_id: '-leading-dash', project_dir: 'projects/ok' },
        { project_id: 'has space', project_dir: 'projects/ok' },
        { project_id: 'a'.repeat(129), project_dir: 'projects/ok' },
        { project_id: 'abs-dir', project_dir: '/etc/passwd' },
        { project_id: 'dotdot-dir', project_dir: 'projects/../../etc' },
        { project_id: 'dotdot-only', project_dir: '..' },
        { project_id: 'backslash-dir', project_dir: 'projects\\..\\x' },
        { project_id: 'empty-dir', project_dir: '' },
      ];
      for (const row of bad) {
        await expect(
          store.transaction((tx) => insertProject(tx, { ...row, project_name: 'bad' })),
        ).rejects.toMatchObject({ code: CHECK_VIOLATION });
      }
      expect(PROJECT_ID_PATTERN.test('Upper-Case')).toBe(false);
      const ok = await store.transaction((tx) =>
        insertProject(tx, {
          project_id: 'a.valid_slug-1',
          project_name: 'Valid',
          project_dir: 'projects/a..b/c',
          workload_class: 'gpu_required',
          machine_target: 'gpu-box',
        }),
      );
      expect(ok).toMatchObject({ project_id: 'a.valid_slug-1', workload_class: 'gpu_required', idea_id: null });
      expect(await getProject(store, 'a.valid_slug-1')).toEqual(ok);
      expect(await getProject(store, 'missing')).toBeUndefined();
    });

    it('keeps updated_at current on UPDATE unless the statement sets it', async () => {
      await store.transaction(async (tx) => {
        await insertProject(tx, { project_id: 'touch', project_name: 'touch', project_dir: 'touch' });
        await insertQueueItem(tx, { project_id: 'touch', project_name: 'touch' });
      });
      const before = (await getQueueItem(store, 'touch'))!;
      await store.query(`UPDATE queue_items SET status = 'paused' WHERE project_id = 'touch'`);
      const after = (await getQueueItem(store, 'touch'))!;
      expect(after.status).toBe('paused');
      expect(Date.parse(after.updated_at)).toBeGreaterThan(Date.parse(before.updated_at));
      await store.query(`UPDATE queue_items SET updated_at = '2020-01-01T00:00:00Z' WHERE project_id = 'touch'`);
      expect((await getQueueItem(store, 'touch'))!.updated_at).toBe('2020-01-01T00:00:00.000Z');
    });
  });

  describe('schema matches the TypeScript vocabulary', () => {
    it('CHECK value lists equal the enums', async () => {
      const expected: Record<string, readonly string[]> = {
        research_sources_kind_check: SOURCE_KINDS,
        research_candidates_generation_mode_check: GENERATION_MODES,
        research_admissions_generation_mode_check: GENERATION_MODES,
        research_candidates_runtime_class_check: RUNTIME_CLASSES,
        research_candidates_workload_class_check: WORKLOAD_CLASSES,
        projects_workload_class_check: WORKLOAD_CLASSES,
        queue_items_workload_class_check: WORKLOAD_CLASSES,
        research_candidates_decision_check: ADMISSION_DECISIONS,
        research_admissions_decision_check: ADMISSION_DECISIONS,
        research_lineage_from_kind_check: LINEAGE_KINDS,
        research_lineage_to_kind_check: LINEAGE_KINDS,
        queue_items_status_check: QUEUE_STATUSES,
      };
      const result = await store.query<{ conname: string; def: string }>(
        `SELECT conname, pg_get_constraintdef(oid) AS def FROM pg_constraint
         WHERE contype = 'c' AND conname IN (SELECT jsonb_array_elements_text($1::jsonb))`,
        [JSON.stringify(Object.keys(expected))],
      );
      const actual = Object.fromEntries(
        result.rows.map((row) => [row.conname, [...row.def.matchAll(/'([^']*)'::text/g)].map((m) => m[1]).sort()]),
      );
      expect(actual).toEqual(Object.fromEntries(Object.entries(expected).map(([name, values]) => [name, [...values].sort()])));
    });

    it('patterns equal the TypeScript ones', async () => {
      const result = await store.query<{ conname: string; def: string }>(
        `SELECT conname, pg_get_constraintdef(oid) AS def FROM pg_constraint
         WHERE conname IN ('research_candidates_dedupe_key_check', 'projects_project_id_slug')`,
      );
      const defs = Object.fromEntries(result.rows.map((row) => [row.conname, row.def]));
      expect(defs.research_candidates_dedupe_key_check).toContain(`'${DEDUPE_KEY_PATTERN.source}'`);
      expect(defs.projects_project_id_slug).toContain(`'${PROJECT_ID_PATTERN.source}'`);
    });

    it('every proposal field of CandidateProposalSchema is a column of research_candidates', async () => {
      const result = await store.query<{ column_name: string }>(
        `SELECT column_name FROM information_schema.columns WHERE table_name = 'research_candidates'`,
      );
      const columns = new Set(result.rows.map((row) => row.column_name));
      const missing = Object.keys(CandidateProposalSchema.shape).filter((field) => !columns.has(field));
      expect(missing).toEqual([]);
    });

    it('every value of every enum is accepted where it is stored', async () => {
      for (const kind of SOURCE_KINDS) {
        await store.transaction((tx) => insertSource(tx, { source_id: `enum-${kind}`, kind, title: kind }));
      }
      for (const [index, runtime] of RUNTIME_CLASSES.entries()) {
        const workload = WORKLOAD_CLASSES[index % WORKLOAD_CLASSES.length]!;
        await store.transaction((tx) =>
          insertCandidate(tx, candidate(`enum-rt-${runtime}`, { estimated_runtime_class: runtime, workload_class: workload })),
        );
      }
      for (const workload of WORKLOAD_CLASSES) {
        await store.transaction((tx) => insertCandidate(tx, candidate(`enum-wl-${workload}`, { workload_class: workload })));
      }
      for (const decision of ADMISSION_DECISIONS) {
        await store.transaction(async (tx) => {
          await insertCandidate(tx, candidate(`enum-dec-${decision}`, {
            decision,
            merged_into: decision === 'merged' ? 'enum-wl-unknown' : null,
          }));
          await insertAdmission(tx, {
            candidate_id: `enum-dec-${decision}`,
            batch_id: 'enum',
            dedupe_key: `enum:${decision}`,
            generation_mode: 'moonshot',
            title: decision,
            decision,
            score: 50,
            planner_version: 'test-1',
            candidate_snapshot: {},
          });
        });
      }
      await expect(
        store.transaction((tx) => insertSource(tx, { source_id: 'enum-bad', kind: 'tweet' as 'blog', title: 'x' })),
      ).rejects.toMatchObject({ code: CHECK_VIOLATION });
    });
  });

  describe('store functions round trip', () => {
    it('sources: insert (idempotent), list, get by ids', async () => {
      const input = {
        source_id: 'rt-paper',
        kind: 'paper',
        title: 'Attention Is Round-Trip',
        url: 'https://example.org/rt',
        summary: 'A paper about 100% round trips',
        metadata: { year: 2024, authors: ['a', 'b'] },
      } as const;
      expect(await store.transaction((tx) => insertSource(tx, input))).toBe(true);
      const stored = (await getSource(store, 'rt-paper'))!;
      expect(stored).toMatchObject({ ...input, metadata: { year: 2024, authors: ['a', 'b'] } });
      expect(new Date(stored.created_at).toISOString()).toBe(stored.created_at);
      expect(await store.transaction((tx) => insertSource(tx, { source_id: 'rt-paper', kind: 'blog', title: 'changed' }))).toBe(
        false,
      );
      expect(await getSource(store, 'rt-paper')).toEqual(stored);
      expect(await store.transaction((tx) => insertSource(tx, { source_id: 'rt-repo', kind: 'repository', title: 'Some repo' }))).toBe(
        true,
      );
      expect(await getSource(store, 'rt-repo')).toMatchObject({ url: null, summary: null, metadata: {} });
      expect(await getSource(store, 'missing')).toBeUndefined();

      expect((await listSources(store, 50, { kind: 'paper', search: 'round-trip' })).map((s) => s.source_id)).toEqual(['rt-paper']);
      expect((await listSources(store, 50, { search: '100%' })).map((s) => s.source_id)).toEqual(['rt-paper']);
      expect(await listSources(store, 50, { search: '1_0' })).toEqual([]);
      const newest = await listSources(store, 2);
      expect(newest.map((s) => s.source_id)).toEqual(['rt-repo', 'rt-paper']);
      expect(await listSources(store, 1)).toEqual([newest[0]]);

      const byIds = await getSourcesByIds(store, ['rt-repo', 'missing', 'rt-paper', 'rt-repo']);
      expect(byIds.map((source) => source.source_id)).toEqual(['rt-repo', 'rt-paper']);
      expect(await getSourcesByIds(store, [])).toEqual([]);
    });

    it('candidates and admissions: insert, get with admissions, list with filters, pagination and search', async () => {
      const countsBefore = await facilityCounts(store);
      const rows = await store.transaction(async (tx) => {
        const out = [];
        out.push(
          await insertCandidate(
            tx,
            candidate('rt-a', {
              batch_id: 'rt-batch',
              generation_mode: 'fresh_grounded',
              source_ids: ['rt-paper'],
              source_urls: ['https://example.org/rt'],
              hypothesis: 'Sparse ZEBRA attention halves memory',
              expected_artifacts: ['results/metrics.json'],
              expected_token_budget: 250_000,
              accessibility: 8,
              falsifiability: 9.5,
              text_fingerprint: 'fp-a',
              score: 81.25,
            }),
          ),
        );
        out.push(await insertCandidate(tx, candidate('rt-b', { batch_id: 'rt-batch', decision: 'needs-review', score: 60 })));
        out.push(
          await insertCandidate(
            tx,
            candidate('rt-c', { batch_id: 'rt-batch', decision: 'rejected', score: 20, dedupe_key: 'rt:shared-key' }),
          ),
        );
        out.push(
          await insertCandidate(
            tx,
            candidate('rt-d', { batch_id: 'rt-batch', decision: 'merged', merged_into: 'rt-a', score: 70, mechanism: 'zebra-like gating' }),
          ),
        );
        for (const row of out) {
          await insertAdmission(tx, {
            candidate_id: row.candidate_id,
            batch_id: row.batch_id,
            dedupe_key: row.dedupe_key,
            generation_mode: row.generation_mode,
            title: row.title,
            decision: row.decision,
            score: row.score,
            reasons: [`scored ${row.score}`],
            merged_into: row.merged_into,
            planner_version: 'test-1',
            candidate_snapshot: row.proposal,
            decided_by: 'test',
          });
        }
        return out;
      });
      const a = rows[0]!;
      expect(a).toMatchObject({
        candidate_id: 'rt-a',
        generation_mode: 'fresh_grounded',
        source_ids: ['rt-paper'],
        expected_artifacts: ['results/metrics.json'],
        required_evidence: [],
        expected_token_budget: 250_000,
        novelty: 6.5,
        feasibility: 7,
        accessibility: 8,
        falsifiability: 9.5,
        score: 81.25,
        decision: 'admitted',
        queue_admitted: false,
        text_fingerprint: 'fp-a',
        estimated_runtime_class: null,
        workload_class: null,
        parent_project_id: null,
      });
      expect(typeof a.score).toBe('number');
      expect(a.proposal).toMatchObject({ title: 'Candidate rt-a', dedupe_key: 'test:rt-a', source_ids: ['rt-paper'] });
      expect(a.proposal).not.toHaveProperty('candidate_id');

      // A second, later admission of the same candidate comes first.
      await store.transaction((tx) =>
        insertAdmission(tx, {
          candidate_id: 'rt-a',
          batch_id: 'rt-batch',
          dedupe_key: a.dedupe_key,
          generation_mode: a.generation_mode,
          title: a.title,
          decision: 'admitted',
          score: 82,
          planner_version: 'test-2',
          candidate_snapshot: a.proposal,
        }),
      );
      const fetched = (await getCandidate(store, 'rt-a'))!;
      expect(fetched.admissions.map((admission) => admission.planner_version)).toEqual(['test-2', 'test-1']);
      expect(fetched.admissions[0]).toMatchObject({
        score: 82,
        decided_by: 'planner',
        reasons: [],
        hard_failures: [],
        score_breakdown: null,
      });
      expect(fetched.admissions[1]).toMatchObject({ score: 81.25, decided_by: 'test', reasons: ['scored 81.25'] });
      expect(typeof fetched.admissions[0]!.admission_id).toBe('number');
      const { admissions: _admissions, ...fetchedRow } = fetched;
      expect(fetchedRow).toEqual(a);
      expect(await getCandidate(store, 'missing')).toBeUndefined();

      const all = await listCandidates(store, { search: 'Candidate rt-', page: 1, page_size: 50 });
      expect(all.total).toBe(4);
      expect(all.items.map((row) => row.candidate_id)).toEqual(['rt-d', 'rt-c', 'rt-b', 'rt-a']);
      const admitted = await listCandidates(store, { decision: 'admitted', search: 'Candidate rt-', page: 1, page_size: 50 });
      expect(admitted.items.map((row) => row.candidate_id)).toEqual(['rt-a']);
      const fresh = await listCandidates(store, { generation_mode: 'fresh_grounded', search: 'zebra', page: 1, page_size: 50 });
      expect(fresh.items.map((row) => row.candidate_id)).toEqual(['rt-a']);
      const zebra = await listCandidates(store, { search: 'ZEBRA', page: 1, page_size: 50 });
      expect(zebra.items.map((row) => row.candidate_id)).toEqual(['rt-d', 'rt-a']);
      const byKey = await listCandidates(store, { search: 'rt:shared', page: 1, page_size: 50 });
      expect(byKey.items.map((row) => row.candidate_id)).toEqual(['rt-c']);
      const page2 = await listCandidates(store, { search: 'Candidate rt-', page: 2, page_size: 3 });
      expect(page2).toMatchObject({ total: 4 });
      expect(page2.items.map((row) => row.candidate_id)).toEqual(['rt-a']);
      const pastEnd = await listCandidates(store, { search: 'Candidate rt-', page: 9, page_size: 3 });
      expect(pastEnd).toEqual({ items: [], total: 4 });
      expect((await listCandidates(store, { search: '%', page: 1, page_size: 5 })).total).toBe(0);

      const latest = await latestAdmissions(store, 2);
      expect(latest.map((admission) => admission.planner_version)).toEqual(['test-2', 'test-1']);
      expect(latest[1]!.candidate_id).toBe('rt-d');

      const countsAfter = await facilityCounts(store);
      expect(countsAfter.candidates - countsBefore.candidates).toBe(4);
      expect(countsAfter.admissions - countsBefore.admissions).toBe(5);
      expect(countsAfter.admissions_by_decision.admitted - countsBefore.admissions_by_decision.admitted).toBe(2);
      expect(countsAfter.admissions_by_decision['needs-review'] - countsBefore.admissions_by_decision['needs-review']).toBe(1);
      expect(countsAfter.admissions_by_decision.rejected - countsBefore.admissions_by_decision.rejected).toBe(1);
      expect(countsAfter.admissions_by_decision.merged - countsBefore.admissions_by_decision.merged).toBe(1);
      expect(countsAfter.admissions).toBe(
        Object.values(countsAfter.admissions_by_decision).reduce((sum, n) => sum + n, 0),
      );
      expect(countsAfter.admissions).toBe(await count(store, 'SELECT count(*) AS n FROM research_admissions'));
      expect(countsAfter.sources).toBe(await count(store, 'SELECT count(*) AS n FROM research_sources'));
      expect(countsAfter.lineage).toBe(await count(store, 'SELECT count(*) AS n FROM research_lineage'));
    });

    it('findDedupeMatches returns admitted and needs-review candidates only', async () => {
      await store.transaction(async (tx) => {
        await insertCandidate(tx, candidate('dd-admitted', { dedupe_key: 'dd:key', decision: 'admitted' }));
        await insertCandidate(tx, candidate('dd-review', { dedupe_key: 'dd:key', decision: 'needs-review' }));
        await insertCandidate(tx, candidate('dd-rejected', { dedupe_key: 'dd:key', decision: 'rejected' }));
        await insertCandidate(tx, candidate('dd-merged', { dedupe_key: 'dd:key', decision: 'merged', merged_into: 'dd-admitted' }));
        await insertCandidate(tx, candidate('dd-other', { dedupe_key: 'dd:other', decision: 'admitted' }));
      });
      const byKey = await findDedupeMatches(store, ['dd:key'], 0);
      expect(byKey.map((match) => match.candidate_id).sort()).toEqual(['dd-admitted', 'dd-review']);
      expect(byKey.find((match) => match.candidate_id === 'dd-admitted')).toEqual({
        candidate_id: 'dd-admitted',
        dedupe_key: 'dd:key',
        title: 'Candidate dd-admitted',
        hypothesis: 'Hypothesis of dd-admitted',
        mechanism: 'Mechanism of dd-admitted',
        text_fingerprint: null,
        decision: 'admitted',
      });

      // The recent window adds the newest blocking candidates whatever their key, each candidate once.
      const withRecent = await findDedupeMatches(store, ['dd:key'], 2);
      expect(withRecent.map((match) => match.candidate_id)).toEqual(['dd-other', 'dd-review', 'dd-admitted']);
      const recentOnly = await findDedupeMatches(store, [], 1);
      expect(recentOnly.map((match) => match.candidate_id)).toEqual(['dd-other']);
      const everything = await findDedupeMatches(store, []);
      expect(everything.some((match) => match.candidate_id === 'dd-rejected' || match.candidate_id === 'dd-merged')).toBe(false);
      expect(everything.map((match) => match.candidate_id)).toContain('dd-admitted');
    });

    it('promotion ledgers: idea, project, queue item, lineage, queue_admitted', async () => {
      await store.transaction((tx) => insertCandidate(tx, candidate('promo-a', { workload_class: 'training' })));
      await store.transaction((tx) => insertCandidate(tx, candidate('promo-rejected', { decision: 'rejected' })));
      const before = await facilityCounts(store);

      const result = await store.transaction(async (tx) => {
        const idea = await insertIdea(tx, { idea_id: 'idea-promo-a', candidate_id: 'promo-a', title: 'Promo A', hypothesis: 'h' });
        const project = await insertProject(tx, {
          project_id: 'promo-a',
          project_name: 'Promo A',
          project_dir: 'research/promo-a',
          idea_id: idea.idea_id,
          candidate_id: 'promo-a',
          workload_class: 'training',
        });
        const item = await insertQueueItem(tx, {
          project_id: project.project_id,
          project_name: project.project_name,
          workload_class: 'training',
          candidate_id: 'promo-a',
          dispatch_priority: 10,
        });
        await recordLineage(tx, { from_kind: 'candidate', from_id: 'promo-a', to_kind: 'idea', to_id: idea.idea_id, relation: 'promoted_to' });
        await recordLineage(tx, { from_kind: 'idea', from_id: idea.idea_id, to_kind: 'project', to_id: 'promo-a', relation: 'promoted_to' });
        const locked = await getQueueItem(tx, 'promo-a', { forUpdate: true });
        const marked = await markCandidateQueueAdmitted(tx, 'promo-a');
        return { idea, project, item, locked, marked };
      });
      expect(result.item).toMatchObject({
        project_id: 'promo-a',
        status: 'queued',
        manual_review_required: false,
        dispatch_priority: 10,
        selection_rank: 50,
        workload_class: 'training',
        current_run_id: null,
        candidate_id: 'promo-a',
      });
      expect(result.locked).toEqual(result.item);
      expect(result.marked?.queue_admitted).toBe(true);
      expect(await getIdeaByCandidate(store, 'promo-a')).toEqual(result.idea);
      expect(await getQueueItem(store, 'missing')).toBeUndefined();

      // A candidate becomes at most one idea; a rejected candidate cannot be marked queue-admitted.
      await expect(
        store.transaction((tx) => insertIdea(tx, { idea_id: 'idea-promo-a-2', candidate_id: 'promo-a', title: 'again' })),
      ).rejects.toMatchObject({ code: UNIQUE_VIOLATION });
      expect(await store.transaction((tx) => markCandidateQueueAdmitted(tx, 'promo-rejected'))).toBeUndefined();
      expect((await getCandidate(store, 'promo-rejected'))!.queue_admitted).toBe(false);

      const after = await facilityCounts(store);
      expect(after.ideas - before.ideas).toBe(1);
      expect(after.projects - before.projects).toBe(1);
      expect(after.queue_items - before.queue_items).toBe(1);
      expect(after.lineage - before.lineage).toBe(2);
      expect(after.candidates_queue_admitted - before.candidates_queue_admitted).toBe(1);
      expect(after.queue_items).toBe(await count(store, 'SELECT count(*) AS n FROM queue_items'));
      expect((await lineageOf(store, 'idea', 'idea-promo-a')).map((link) => `${link.from_kind}>${link.to_kind}`)).toEqual([
        'candidate>idea',
        'idea>project',
      ]);
    });
  });
});
