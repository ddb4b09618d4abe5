import type { AdmissionDecision, GenerationMode } from '../domain/research-candidate.ts';
import { descending, selectKeysetPage, type KeysetOrder, type KeysetPage } from '../../../platform/store/keyset.ts';
import { sqlParams } from '../../../platform/store/sql-params.ts';
import type { Queryable } from '../../../platform/store/store.ts';

/**
 * The reads behind `GET /control/api/v1/source-lineage` (docs/console.md#read-models): a page of candidates, newest first,
 * then everything downstream of that page in one query per ledger. Every list is capped.
 */

export const LINEAGE_LIMITS = { same_dedupe_key: 5, runs_per_project: 20, papers_per_project: 20 } as const;

export const CANDIDATE_ORDER: KeysetOrder = {
  name: '-created_at',
  columns: [descending('created_at', 'timestamptz'), descending('candidate_id', 'text')],
};

export interface LineageCandidate {
  candidate_id: string;
  batch_id: string;
  generation_mode: GenerationMode;
  title: string;
  decision: AdmissionDecision;
  score: number;
  dedupe_key: string;
  merged_into: string | null;
  queue_admitted: boolean;
  source_ids: string[];
  source_urls: string[];
  parent_project_id: string | null;
  parent_run_id: string | null;
  similar_prior_projects: string[];
  created_at: string;
}

export interface CandidateScope {
  source_id?: string | undefined;
  candidate_id?: string | undefined;
  project_id?: string | undefined;
}

export async function walkLineageCandidates(
  q: Queryable,
  scope: CandidateScope,
  walk: { after: string[] | null; limit: number },
): Promise<KeysetPage<LineageCandidate>> {
  const sql = sqlParams();
  const where: string[] = [];
  if (scope.source_id) where.push(`c.source_ids ? ${sql.bind(scope.source_id)}`);
  if (scope.candidate_id) where.push(`c.candidate_id = ${sql.bind(scope.candidate_id)}`);
  if (scope.project_id) where.push(`c.candidate_id = (SELECT candidate_id FROM projects WHERE project_id = ${sql.bind(scope.project_id)})`);
  return selectKeysetPage<LineageCandidate>(q, {
    select: `c.candidate_id, c.batch_id, c.generation_mode, c.title, c.decision, c.score, c.dedupe_key, c.merged_into,
             c.queue_admitted, c.source_ids, c.source_urls, c.parent_project_id, c.parent_run_id, c.similar_prior_projects,
             c.created_at`,
    from: 'FROM research_candidates c',
    table: 'c',
    where,
    sql,
    order: CANDIDATE_ORDER,
    after: walk.after,
    limit: walk.limit,
  });
}

export async function sourcesByIds(q: Queryable, ids: readonly string[]) {
  if (ids.length === 0) return [];
  const result = await q.query<{ source_id: string; kind: string; title: string; url: string | null }>(
    'SELECT source_id, kind, title, url FROM research_sources WHERE source_id = ANY ($1::text[])',
    [ids],
  );
  return result.rows;
}

/** Other candidates with each dedupe key, newest first, a few per key. */
export async function candidatesSharingDedupeKeys(q: Queryable, keys: readonly string[], excluding: readonly string[]) {
  if (keys.length === 0) return [];
  const result = await q.query<{ dedupe_key: string; candidate_id: string; decision: AdmissionDecision; created_at: string }>(
    `SELECT k.dedupe_key, s.candidate_id, s.decision, s.created_at
       FROM unnest($1::text[]) AS k (dedupe_key)
       CROSS JOIN LATERAL (
         SELECT candidate_id, decision, created_at FROM research_candidates
          WHERE dedupe_key = k.dedupe_key AND NOT (candidate_id = ANY ($2::text[]))
          ORDER BY created_at DESC, candidate_id DESC LIMIT $3
       ) AS s`,
    [[...new Set(keys)], excluding, LINEAGE_LIMITS.same_dedupe_key],
  );
  return result.rows;
}

export interface DownstreamProject {
  candidate_id: string;
  idea_id: string | null;
  project_id: string;
  project_name: string;
  queue_status: string | null;
}

/** The idea and project each candidate was promoted into, with the project's queue status. */
export async function projectsOfCandidates(q: Queryable, candidateIds: readonly string[]): Promise<DownstreamProject[]> {
  if (candidateIds.length === 0) return [];
  const result = await q.query<DownstreamProject>(
    `SELECT p.candidate_id, p.idea_id, p.project_id, p.project_name, qi.status AS queue_status
       FROM projects p LEFT JOIN queue_items qi ON qi.project_id = p.project_id
      WHERE p.candidate_id = ANY ($1::text[])`,
    [candidateIds],
  );
  return result.rows;
}

export interface DownstreamRun {
  project_id: string;
  run_id: string;
  state: string;
  decision: string | null;
  decision_summary: string | null;
  finished_at: string | null;
}

/** Each project's newest runs, with the agent's decision. */
export async function runsOfProjects(q: Queryable, projectIds: readonly string[]): Promise<DownstreamRun[]> {
  if (projectIds.length === 0) return [];
  const result = await q.query<DownstreamRun>(
    `SELECT r.project_id, r.run_id, r.state, r.decision, r.decision_summary, r.finished_at
       FROM unnest($1::text[]) AS p (project_id)
       CROSS JOIN LATERAL (
         SELECT project_id, run_id, state, decision, decision_summary, finished_at FROM runs
          WHERE project_id = p.project_id ORDER BY created_at DESC, run_id DESC LIMIT $2
       ) AS r`,
    [projectIds, LINEAGE_LIMITS.runs_per_project],
  );
  return result.rows;
}

export interface DownstreamPaper {
  project_id: string;
  run_id: string;
  paper_id: string;
  paper_status: string;
  review_status: string;
  imported: boolean;
}

export async function papersOfProjects(q: Queryable, projectIds: readonly string[]): Promise<DownstreamPaper[]> {
  if (projectIds.length === 0) return [];
  const result = await q.query<DownstreamPaper>(
    `SELECT pp.project_id, pp.run_id, pp.paper_id, pp.paper_status, pp.review_status, pp.imported
       FROM unnest($1::text[]) AS p (project_id)
       CROSS JOIN LATERAL (
         SELECT papers.project_id, papers.run_id, papers.paper_id, papers.paper_status, papers.review_status,
                EXISTS (SELECT 1 FROM corpus_imports ci WHERE ci.paper_id = papers.paper_id) AS imported
           FROM papers WHERE papers.project_id = p.project_id ORDER BY created_at DESC, paper_id DESC LIMIT $2
       ) AS pp`,
    [projectIds, LINEAGE_LIMITS.papers_per_project],
  );
  return result.rows;
}
