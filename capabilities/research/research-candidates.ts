import type {
  AdmissionDecision,
  CandidateProposal,
  GenerationMode,
  RuntimeClass,
} from './domain/research-candidate.ts';
import type { WorkloadClass } from '../../worker-gate/contract/workload.ts';
import { pageWindow, selectPage } from '../../platform/store/paging.ts';
import { admissionsOf, type AdmissionRow } from './research-admissions.ts';
import { containsPattern, sqlParams } from '../../platform/store/sql-params.ts';
import type { Queryable } from '../../platform/store/store.ts';

/**
 * The research_candidates ledger: scored candidates, stored column by column and whole, with their latest decision.
 * Every function takes a Queryable so it runs inside the caller's transaction. Nothing here dispatches.
 */

/** Decisions whose candidates count as existing work for dedupe (a rejected candidate blocks nothing). */
export const DEDUPE_BLOCKING_DECISIONS = ['admitted', 'needs-review'] as const satisfies readonly AdmissionDecision[];

/** A scored candidate as it is written: the proposal (stored column by column and whole) plus the planner's outcome. */
export interface CandidateInsert {
  candidate_id: string;
  batch_id: string;
  /** The candidate as submitted (after schema parsing); also kept whole in the `proposal` column. */
  proposal: CandidateProposal;
  /** 0–100. */
  score: number;
  /** The latest admission decision. */
  decision: AdmissionDecision;
  merged_into?: string | null;
  queue_admitted?: boolean;
  text_fingerprint?: string | null;
}

export interface CandidateRow {
  candidate_id: string;
  batch_id: string;
  generation_mode: GenerationMode;
  title: string;
  hypothesis: string | null;
  mechanism: string | null;
  baseline_to_beat: string | null;
  success_threshold: string | null;
  kill_condition: string | null;
  expected_artifacts: string[];
  required_evidence: string[];
  estimated_runtime_class: RuntimeClass | null;
  expected_token_budget: number | null;
  machine_target: string | null;
  workload_class: WorkloadClass | null;
  gpu_count: number | null;
  gpu_memory_mib: number | null;
  cpu_count: number | null;
  likely_failure_modes: string[];
  novelty_comparison: string | null;
  dedupe_key: string;
  source_ids: string[];
  source_urls: string[];
  parent_project_id: string | null;
  parent_run_id: string | null;
  similar_prior_projects: string[];
  accessibility_delta: string | null;
  novelty: number;
  feasibility: number;
  accessibility: number | null;
  falsifiability: number | null;
  score: number;
  decision: AdmissionDecision;
  merged_into: string | null;
  queue_admitted: boolean;
  text_fingerprint: string | null;
  proposal: Record<string, unknown>;
  created_at: string;
  updated_at: string;
}

type ColumnKind = 'text' | 'list' | 'number' | 'integer';

/** Every field of CandidateProposalSchema, with how it is stored. */
const PROPOSAL_COLUMNS = {
  title: 'text',
  generation_mode: 'text',
  hypothesis: 'text',
  mechanism: 'text',
  baseline_to_beat: 'text',
  success_threshold: 'text',
  kill_condition: 'text',
  expected_artifacts: 'list',
  required_evidence: 'list',
  estimated_runtime_class: 'text',
  expected_token_budget: 'integer',
  machine_target: 'text',
  workload_class: 'text',
  gpu_count: 'integer',
  gpu_memory_mib: 'integer',
  cpu_count: 'integer',
  likely_failure_modes: 'list',
  novelty_comparison: 'text',
  dedupe_key: 'text',
  source_ids: 'list',
  source_urls: 'list',
  parent_project_id: 'text',
  parent_run_id: 'text',
  similar_prior_projects: 'list',
  accessibility_delta: 'text',
  novelty: 'number',
  feasibility: 'number',
  accessibility: 'number',
  falsifiability: 'number',
} as const satisfies Record<keyof CandidateProposal, ColumnKind>;

export const CANDIDATE_PROPOSAL_FIELDS = Object.keys(PROPOSAL_COLUMNS) as (keyof CandidateProposal)[];

const CANDIDATE_COLUMNS = [
  'candidate_id',
  'batch_id',
  ...CANDIDATE_PROPOSAL_FIELDS,
  'score',
  'decision',
  'merged_into',
  'queue_admitted',
  'text_fingerprint',
  'proposal',
  'created_at',
  'updated_at',
].join(', ');

/**
 * Inserts a scored candidate. The database refuses (check_violation, 23514) a fresh_grounded candidate without a
 * source id or url and a followup_from_negative candidate without a parent project or run.
 */
export async function insertCandidate(tx: Queryable, row: CandidateInsert): Promise<CandidateRow> {
  const sql = sqlParams();
  const columns: string[] = [];
  const values: string[] = [];
  const add = (column: string, value: unknown, cast = '') => {
    columns.push(column);
    values.push(`${sql.bind(value)}${cast}`);
  };
  add('candidate_id', row.candidate_id);
  add('batch_id', row.batch_id);
  for (const [field, kind] of Object.entries(PROPOSAL_COLUMNS) as [keyof CandidateProposal, ColumnKind][]) {
    const value = row.proposal[field];
    if (kind === 'list') add(field, JSON.stringify(value ?? []), '::jsonb');
    else add(field, value ?? null);
  }
  add('score', row.score);
  add('decision', row.decision);
  add('merged_into', row.merged_into ?? null);
  add('queue_admitted', row.queue_admitted ?? false);
  add('text_fingerprint', row.text_fingerprint ?? null);
  add('proposal', JSON.stringify(row.proposal), '::jsonb');
  const result = await tx.query<CandidateRow>(
    `INSERT INTO research_candidates (${columns.join(', ')}) VALUES (${values.join(', ')})
     RETURNING ${CANDIDATE_COLUMNS}`,
    sql.params,
  );
  return result.rows[0]!;
}

export interface CandidateFilters {
  decision?: AdmissionDecision;
  generation_mode?: GenerationMode;
  /** Case-insensitive substring over title, hypothesis, mechanism and dedupe_key. */
  search?: string;
  /** 1-based. */
  page: number;
  /** 1–500. */
  page_size: number;
}

/** One page of candidates, newest first, with the total count of matching candidates. */
export async function listCandidates(
  q: Queryable,
  filters: CandidateFilters,
): Promise<{ items: CandidateRow[]; total: number }> {
  const sql = sqlParams();
  const conditions: string[] = [];
  if (filters.decision) conditions.push(`decision = ${sql.bind(filters.decision)}`);
  if (filters.generation_mode) conditions.push(`generation_mode = ${sql.bind(filters.generation_mode)}`);
  if (filters.search) {
    const pattern = sql.bind(containsPattern(filters.search));
    conditions.push(
      `(title ILIKE ${pattern} OR coalesce(hypothesis, '') ILIKE ${pattern}
        OR coalesce(mechanism, '') ILIKE ${pattern} OR dedupe_key ILIKE ${pattern})`,
    );
  }
  const where = conditions.length > 0 ? `WHERE ${conditions.join(' AND ')}` : '';
  return selectPage<CandidateRow>(q, {
    select: `SELECT ${CANDIDATE_COLUMNS} FROM research_candidates ${where} ORDER BY created_at DESC, candidate_id DESC`,
    count: `SELECT count(*) AS total FROM research_candidates ${where}`,
    key: 'candidate_id',
    sql,
    window: pageWindow(filters.page, filters.page_size),
  });
}

export type CandidateWithAdmissions = CandidateRow & { admissions: AdmissionRow[] };

/** A candidate with its admissions, newest first; `forUpdate` locks the candidate row until the transaction ends. */
export async function getCandidate(
  q: Queryable,
  candidateId: string,
  options: { forUpdate?: boolean } = {},
): Promise<CandidateWithAdmissions | undefined> {
  const result = await q.query<CandidateRow>(
    `SELECT ${CANDIDATE_COLUMNS} FROM research_candidates WHERE candidate_id = $1${options.forUpdate ? ' FOR UPDATE' : ''}`,
    [candidateId],
  );
  const candidate = result.rows[0];
  return candidate ? { ...candidate, admissions: await admissionsOf(q, candidateId) } : undefined;
}

/**
 * Marks an admitted candidate as promoted into the queue. Returns the updated row, or undefined when there is no such
 * candidate or it is not admitted (the database also refuses queue_admitted on any other decision).
 */
export async function markCandidateQueueAdmitted(tx: Queryable, candidateId: string): Promise<CandidateRow | undefined> {
  const result = await tx.query<CandidateRow>(
    `UPDATE research_candidates SET queue_admitted = true, updated_at = clock_timestamp()
     WHERE candidate_id = $1 AND decision = 'admitted'
     RETURNING ${CANDIDATE_COLUMNS}`,
    [candidateId],
  );
  return result.rows[0];
}

export interface DedupeMatch {
  candidate_id: string;
  dedupe_key: string;
  title: string;
  hypothesis: string | null;
  mechanism: string | null;
  text_fingerprint: string | null;
  decision: AdmissionDecision;
}

/**
 * Existing admitted or needs-review candidates a new batch may duplicate: every such candidate with one of
 * `dedupeKeys`, plus the most recent `recentLimit` such candidates (for near-identical text comparison). Newest first,
 * each candidate once. Rejected and merged candidates are never returned.
 */
export async function findDedupeMatches(
  q: Queryable,
  dedupeKeys: readonly string[],
  recentLimit = 2000,
): Promise<DedupeMatch[]> {
  const limit = Math.max(0, Math.trunc(recentLimit));
  const result = await q.query<DedupeMatch & { created_at: unknown }>(
    `WITH blocking AS (
       SELECT candidate_id, dedupe_key, title, hypothesis, mechanism, text_fingerprint, decision, created_at
       FROM research_candidates WHERE decision = ANY($3::text[])
     )
     SELECT * FROM (
       (SELECT * FROM blocking WHERE dedupe_key IN (SELECT jsonb_array_elements_text($1::jsonb)))
       UNION
       (SELECT * FROM blocking ORDER BY created_at DESC, candidate_id DESC LIMIT $2)
     ) AS matches
     ORDER BY created_at DESC, candidate_id DESC`,
    [JSON.stringify(dedupeKeys), limit, DEDUPE_BLOCKING_DECISIONS],
  );
  return result.rows.map(({ created_at: _created, ...row }) => row);
}

/**
 * The best admitted candidate not yet promoted scoring at least `minScore` (highest score, then oldest). With `lock`
 * (inside a transaction) its row is locked, and a row another transaction holds is passed over.
 */
export async function nextPromotableCandidate(q: Queryable, minScore: number, options: { lock: boolean }): Promise<string | null> {
  const result = await q.query<{ candidate_id: string }>(
    `SELECT candidate_id FROM research_candidates
      WHERE decision = 'admitted' AND NOT queue_admitted AND score >= $1
      ORDER BY score DESC, created_at, candidate_id
      LIMIT 1 ${options.lock ? 'FOR UPDATE SKIP LOCKED' : ''}`,
    [minScore],
  );
  return result.rows[0]?.candidate_id ?? null;
}
