import {
  ADMISSION_DECISIONS,
  type AdmissionDecision,
  type CandidateProposal,
  type GenerationMode,
  type RuntimeClass,
  type SourceKind,
} from '../domain/research-candidate.ts';
import type { WorkloadClass } from '../domain/workload.ts';
import type { Queryable } from './store.ts';
import { containsPattern, sqlParams } from './sql-params.ts';

/**
 * Research Facility ledgers (interface.md "Research Facility ledgers"): sources, candidates, immutable admissions and
 * lineage. Every function takes a Queryable so it runs inside the caller's transaction. Nothing here dispatches.
 */

/** What a lineage link may connect (the CHECK lists of research_lineage mirror this). */
export const LINEAGE_KINDS = [
  'source',
  'candidate',
  'idea',
  'project',
  'queue_item',
  'run',
  'decision',
  'paper',
  'no_paper_outcome',
  'followup_candidate',
] as const;
export type LineageKind = (typeof LINEAGE_KINDS)[number];

/** Decisions whose candidates count as existing work for dedupe (a rejected candidate blocks nothing). */
export const DEDUPE_BLOCKING_DECISIONS = ['admitted', 'needs-review'] as const satisfies readonly AdmissionDecision[];

// ---------------------------------------------------------------------------------------------------------------
// Helpers

type Timestamp = Date | string;
type RawRow = Record<string, unknown>;

const iso = (value: unknown): string => new Date(value as Timestamp).toISOString();
const num = (value: unknown): number => Number(value);
const numOrNull = (value: unknown): number | null => (value === null || value === undefined ? null : Number(value));
const json = (value: unknown) => JSON.stringify(value);

function pageWindow(page: number, pageSize: number): { limit: number; offset: number } {
  const limit = Math.min(Math.max(Math.trunc(pageSize) || 1, 1), 500);
  const offset = (Math.max(Math.trunc(page) || 1, 1) - 1) * limit;
  return { limit, offset };
}

// ---------------------------------------------------------------------------------------------------------------
// Sources

export interface SourceInput {
  source_id: string;
  kind: SourceKind;
  title: string;
  url?: string | null;
  summary?: string | null;
  metadata?: Record<string, unknown>;
}

export interface SourceRow {
  source_id: string;
  kind: SourceKind;
  title: string;
  url: string | null;
  summary: string | null;
  metadata: Record<string, unknown>;
  created_at: string;
}

const SOURCE_COLUMNS = 'source_id, kind, title, url, summary, metadata, created_at';

const toSource = (row: RawRow): SourceRow => ({
  ...(row as unknown as SourceRow),
  created_at: iso(row.created_at),
});

/**
 * Records a source. Sources are evidence and do not change: inserting an existing source_id again is a no-op that
 * keeps the stored row. Returns whether the source was new.
 */
export async function insertSource(tx: Queryable, input: SourceInput): Promise<boolean> {
  const inserted = await tx.query(
    `INSERT INTO research_sources (source_id, kind, title, url, summary, metadata)
     VALUES ($1, $2, $3, $4, $5, $6::jsonb)
     ON CONFLICT (source_id) DO NOTHING
     RETURNING source_id`,
    [input.source_id, input.kind, input.title, input.url ?? null, input.summary ?? null, json(input.metadata ?? {})],
  );
  return inserted.rows.length > 0;
}

export interface SourceFilters {
  kind?: SourceKind;
  /** Case-insensitive substring over source_id, title, url and summary. */
  search?: string;
}

/** Up to `limit` sources (at most 500), newest first. */
export async function listSources(q: Queryable, limit = 100, filters: SourceFilters = {}): Promise<SourceRow[]> {
  const { params, bind } = sqlParams();
  const conditions: string[] = [];
  if (filters.kind) conditions.push(`kind = ${bind(filters.kind)}`);
  if (filters.search) {
    const pattern = bind(containsPattern(filters.search));
    conditions.push(
      `(source_id ILIKE ${pattern} OR title ILIKE ${pattern} OR coalesce(url, '') ILIKE ${pattern}
        OR coalesce(summary, '') ILIKE ${pattern})`,
    );
  }
  const where = conditions.length > 0 ? `WHERE ${conditions.join(' AND ')}` : '';
  const { limit: rows } = pageWindow(1, limit);
  const result = await q.query<RawRow>(
    `SELECT ${SOURCE_COLUMNS} FROM research_sources ${where}
     ORDER BY created_at DESC, source_id DESC LIMIT ${bind(rows)}`,
    params,
  );
  return result.rows.map(toSource);
}

/** One source, or undefined. */
export async function getSource(q: Queryable, sourceId: string): Promise<SourceRow | undefined> {
  const result = await q.query<RawRow>(`SELECT ${SOURCE_COLUMNS} FROM research_sources WHERE source_id = $1`, [sourceId]);
  return result.rows[0] ? toSource(result.rows[0]) : undefined;
}

/** The sources among `ids` that exist, in the order of `ids` (unknown ids are left out). */
export async function getSourcesByIds(q: Queryable, ids: readonly string[]): Promise<SourceRow[]> {
  if (ids.length === 0) return [];
  const result = await q.query<RawRow>(
    `SELECT ${SOURCE_COLUMNS} FROM research_sources
     WHERE source_id IN (SELECT jsonb_array_elements_text($1::jsonb))`,
    [json(ids)],
  );
  const byId = new Map(result.rows.map((row) => [row.source_id as string, toSource(row)]));
  return [...new Set(ids)].flatMap((id) => {
    const source = byId.get(id);
    return source ? [source] : [];
  });
}

// ---------------------------------------------------------------------------------------------------------------
// Candidates

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

const NUMERIC_CANDIDATE_FIELDS = ['novelty', 'feasibility', 'accessibility', 'falsifiability', 'score'] as const;

const toCandidate = (row: RawRow): CandidateRow => {
  const candidate = { ...row } as unknown as CandidateRow;
  for (const field of NUMERIC_CANDIDATE_FIELDS) (candidate as unknown as RawRow)[field] = numOrNull(row[field]);
  candidate.expected_token_budget = numOrNull(row.expected_token_budget);
  candidate.created_at = iso(row.created_at);
  candidate.updated_at = iso(row.updated_at);
  return candidate;
};

/**
 * Inserts a scored candidate. The database refuses (check_violation, 23514) a fresh_grounded candidate without a
 * source id or url and a followup_from_negative candidate without a parent project or run.
 */
export async function insertCandidate(tx: Queryable, row: CandidateInsert): Promise<CandidateRow> {
  const columns: string[] = ['candidate_id', 'batch_id'];
  const params: unknown[] = [row.candidate_id, row.batch_id];
  const values: string[] = ['$1', '$2'];
  const add = (column: string, value: unknown, cast = '') => {
    columns.push(column);
    params.push(value);
    values.push(`$${params.length}${cast}`);
  };
  for (const [field, kind] of Object.entries(PROPOSAL_COLUMNS) as [keyof CandidateProposal, ColumnKind][]) {
    const value = row.proposal[field];
    if (kind === 'list') add(field, json(value ?? []), '::jsonb');
    else add(field, value ?? null);
  }
  add('score', row.score);
  add('decision', row.decision);
  add('merged_into', row.merged_into ?? null);
  add('queue_admitted', row.queue_admitted ?? false);
  add('text_fingerprint', row.text_fingerprint ?? null);
  add('proposal', json(row.proposal), '::jsonb');
  const result = await tx.query<RawRow>(
    `INSERT INTO research_candidates (${columns.join(', ')}) VALUES (${values.join(', ')})
     RETURNING ${CANDIDATE_COLUMNS}`,
    params,
  );
  return toCandidate(result.rows[0]!);
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
  const { params, bind } = sqlParams();
  const conditions: string[] = [];
  if (filters.decision) conditions.push(`decision = ${bind(filters.decision)}`);
  if (filters.generation_mode) conditions.push(`generation_mode = ${bind(filters.generation_mode)}`);
  if (filters.search) {
    const pattern = bind(containsPattern(filters.search));
    conditions.push(
      `(title ILIKE ${pattern} OR coalesce(hypothesis, '') ILIKE ${pattern}
        OR coalesce(mechanism, '') ILIKE ${pattern} OR dedupe_key ILIKE ${pattern})`,
    );
  }
  const where = conditions.length > 0 ? `WHERE ${conditions.join(' AND ')}` : '';
  const { limit, offset } = pageWindow(filters.page, filters.page_size);
  // The lateral join keeps the total even when the page itself is empty (a page past the end).
  const result = await q.query<RawRow & { total: unknown }>(
    `SELECT totals.total, page.* FROM (SELECT count(*) AS total FROM research_candidates ${where}) AS totals
     LEFT JOIN LATERAL (
       SELECT ${CANDIDATE_COLUMNS} FROM research_candidates ${where}
       ORDER BY created_at DESC, candidate_id DESC LIMIT ${bind(limit)} OFFSET ${bind(offset)}
     ) AS page ON true`,
    params,
  );
  return {
    total: num(result.rows[0]?.total ?? 0),
    items: result.rows.filter((row) => row.candidate_id !== null).map(({ total: _total, ...row }) => toCandidate(row)),
  };
}

export type CandidateWithAdmissions = CandidateRow & { admissions: AdmissionRow[] };

/** A candidate with its admissions, newest first; `forUpdate` locks the candidate row until the transaction ends. */
export async function getCandidate(
  q: Queryable,
  candidateId: string,
  options: { forUpdate?: boolean } = {},
): Promise<CandidateWithAdmissions | undefined> {
  const result = await q.query<RawRow>(
    `SELECT ${CANDIDATE_COLUMNS} FROM research_candidates WHERE candidate_id = $1${options.forUpdate ? ' FOR UPDATE' : ''}`,
    [candidateId],
  );
  if (!result.rows[0]) return undefined;
  const admissions = await q.query<RawRow>(
    `SELECT ${ADMISSION_COLUMNS} FROM research_admissions WHERE candidate_id = $1 ORDER BY admission_id DESC`,
    [candidateId],
  );
  return { ...toCandidate(result.rows[0]), admissions: admissions.rows.map(toAdmission) };
}

/**
 * Marks an admitted candidate as promoted into the queue. Returns the updated row, or undefined when there is no such
 * candidate or it is not admitted (the database also refuses queue_admitted on any other decision).
 */
export async function markCandidateQueueAdmitted(tx: Queryable, candidateId: string): Promise<CandidateRow | undefined> {
  const result = await tx.query<RawRow>(
    `UPDATE research_candidates SET queue_admitted = true, updated_at = clock_timestamp()
     WHERE candidate_id = $1 AND decision = 'admitted'
     RETURNING ${CANDIDATE_COLUMNS}`,
    [candidateId],
  );
  return result.rows[0] ? toCandidate(result.rows[0]) : undefined;
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
       FROM research_candidates WHERE decision IN ('admitted', 'needs-review')
     )
     SELECT * FROM (
       (SELECT * FROM blocking WHERE dedupe_key IN (SELECT jsonb_array_elements_text($1::jsonb)))
       UNION
       (SELECT * FROM blocking ORDER BY created_at DESC, candidate_id DESC LIMIT $2)
     ) AS matches
     ORDER BY created_at DESC, candidate_id DESC`,
    [json(dedupeKeys), limit],
  );
  return result.rows.map(({ created_at: _created, ...row }) => row);
}

// ---------------------------------------------------------------------------------------------------------------
// Admissions (immutable)

/** A planner check a candidate failed (domain/research-planner.ts HardFailure). */
export interface AdmissionHardFailure {
  code: string;
  message: string;
}

export interface AdmissionInsert {
  /** Null when the candidate never became a row because a data-level check refused it. */
  candidate_id?: string | null;
  batch_id: string;
  dedupe_key: string;
  generation_mode: GenerationMode;
  title: string;
  decision: AdmissionDecision;
  /** 0–100. */
  score: number;
  reasons?: readonly string[];
  hard_failures?: readonly AdmissionHardFailure[];
  /** How the score was made up (the planner's breakdown), when there is one. */
  score_breakdown?: Record<string, unknown> | null;
  merged_into?: string | null;
  planner_version: string;
  /** The candidate as the planner saw it. */
  candidate_snapshot: Record<string, unknown>;
  /** Defaults to "planner". */
  decided_by?: string;
}

export interface AdmissionRow {
  admission_id: number;
  candidate_id: string | null;
  batch_id: string;
  dedupe_key: string;
  generation_mode: GenerationMode;
  title: string;
  decision: AdmissionDecision;
  score: number;
  reasons: string[];
  hard_failures: AdmissionHardFailure[];
  score_breakdown: Record<string, unknown> | null;
  merged_into: string | null;
  planner_version: string;
  candidate_snapshot: Record<string, unknown>;
  decided_by: string;
  decided_at: string;
}

const ADMISSION_COLUMNS =
  'admission_id, candidate_id, batch_id, dedupe_key, generation_mode, title, decision, score, reasons, hard_failures, ' +
  'score_breakdown, merged_into, planner_version, candidate_snapshot, decided_by, decided_at';

const toAdmission = (row: RawRow): AdmissionRow => ({
  ...(row as unknown as AdmissionRow),
  admission_id: num(row.admission_id),
  score: num(row.score),
  decided_at: iso(row.decided_at),
});

/** Appends an admission record; the table refuses UPDATE, DELETE and TRUNCATE. */
export async function insertAdmission(tx: Queryable, row: AdmissionInsert): Promise<AdmissionRow> {
  const result = await tx.query<RawRow>(
    `INSERT INTO research_admissions (candidate_id, batch_id, dedupe_key, generation_mode, title, decision, score,
       reasons, hard_failures, score_breakdown, merged_into, planner_version, candidate_snapshot, decided_by)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8::jsonb, $9::jsonb, $10::jsonb, $11, $12, $13::jsonb, $14)
     RETURNING ${ADMISSION_COLUMNS}`,
    [
      row.candidate_id ?? null,
      row.batch_id,
      row.dedupe_key,
      row.generation_mode,
      row.title,
      row.decision,
      row.score,
      json(row.reasons ?? []),
      json(row.hard_failures ?? []),
      row.score_breakdown ? json(row.score_breakdown) : null,
      row.merged_into ?? null,
      row.planner_version,
      json(row.candidate_snapshot),
      row.decided_by ?? 'planner',
    ],
  );
  return toAdmission(result.rows[0]!);
}

/** The newest admissions, newest first. */
export async function latestAdmissions(q: Queryable, limit: number): Promise<AdmissionRow[]> {
  const result = await q.query<RawRow>(
    `SELECT ${ADMISSION_COLUMNS} FROM research_admissions ORDER BY admission_id DESC LIMIT $1`,
    [Math.max(0, Math.trunc(limit))],
  );
  return result.rows.map(toAdmission);
}

// ---------------------------------------------------------------------------------------------------------------
// Lineage

export interface LineageLink {
  from_kind: LineageKind;
  from_id: string;
  to_kind: LineageKind;
  to_id: string;
  /** Lowercase, e.g. `grounded_by`, `promoted_to`, `followup_of`. */
  relation: string;
}

export interface LineageRow extends LineageLink {
  lineage_id: number;
  created_at: string;
}

const LINEAGE_COLUMNS = 'lineage_id, from_kind, from_id, to_kind, to_id, relation, created_at';

const toLineage = (row: RawRow): LineageRow => ({
  ...(row as unknown as LineageRow),
  lineage_id: num(row.lineage_id),
  created_at: iso(row.created_at),
});

/** Records a link; recording the same link again is a no-op. Returns whether the link was new. */
export async function recordLineage(tx: Queryable, link: LineageLink): Promise<boolean> {
  const result = await tx.query(
    `INSERT INTO research_lineage (from_kind, from_id, to_kind, to_id, relation) VALUES ($1, $2, $3, $4, $5)
     ON CONFLICT (from_kind, from_id, to_kind, to_id, relation) DO NOTHING
     RETURNING lineage_id`,
    [link.from_kind, link.from_id, link.to_kind, link.to_id, link.relation],
  );
  return result.rows.length > 0;
}

/** Every link from or to the given thing, oldest first. */
export async function lineageOf(q: Queryable, kind: LineageKind, id: string): Promise<LineageRow[]> {
  const result = await q.query<RawRow>(
    `SELECT ${LINEAGE_COLUMNS} FROM research_lineage
     WHERE (from_kind = $1 AND from_id = $2) OR (to_kind = $1 AND to_id = $2)
     ORDER BY lineage_id`,
    [kind, id],
  );
  return result.rows.map(toLineage);
}

// ---------------------------------------------------------------------------------------------------------------
// Facility overview

export interface FacilityCounts {
  sources: number;
  candidates: number;
  /** Candidates already promoted into the queue. */
  candidates_queue_admitted: number;
  admissions: number;
  admissions_by_decision: Record<AdmissionDecision, number>;
  lineage: number;
  ideas: number;
  projects: number;
  queue_items: number;
}

/** Row counts per ledger, in one round trip. */
export async function facilityCounts(q: Queryable): Promise<FacilityCounts> {
  const result = await q.query<Record<string, unknown>>(
    `SELECT
       (SELECT count(*) FROM research_sources) AS sources,
       (SELECT count(*) FROM research_candidates) AS candidates,
       (SELECT count(*) FROM research_candidates WHERE queue_admitted) AS candidates_queue_admitted,
       (SELECT count(*) FROM research_lineage) AS lineage,
       (SELECT count(*) FROM ideas) AS ideas,
       (SELECT count(*) FROM projects) AS projects,
       (SELECT count(*) FROM queue_items) AS queue_items,
       (SELECT coalesce(jsonb_object_agg(decision, n), '{}'::jsonb)
          FROM (SELECT decision, count(*) AS n FROM research_admissions GROUP BY decision) AS d) AS admissions_by_decision`,
  );
  const row = result.rows[0]!;
  const byDecision = (row.admissions_by_decision ?? {}) as Record<string, unknown>;
  const admissions_by_decision = Object.fromEntries(
    ADMISSION_DECISIONS.map((decision) => [decision, num(byDecision[decision] ?? 0)]),
  ) as Record<AdmissionDecision, number>;
  return {
    sources: num(row.sources),
    candidates: num(row.candidates),
    candidates_queue_admitted: num(row.candidates_queue_admitted),
    admissions: Object.values(admissions_by_decision).reduce((sum, n) => sum + n, 0),
    admissions_by_decision,
    lineage: num(row.lineage),
    ideas: num(row.ideas),
    projects: num(row.projects),
    queue_items: num(row.queue_items),
  };
}
