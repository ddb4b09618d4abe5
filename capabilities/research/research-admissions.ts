import type { AdmissionDecision, GenerationMode } from './domain/research-candidate.ts';
import type { ScoreBreakdown } from './domain/research-scoring.ts';
import type { Queryable } from '../../platform/store/store.ts';

/**
 * The research_admissions ledger: one immutable record per planner (or operator) decision about a candidate. The
 * table refuses UPDATE, DELETE and TRUNCATE.
 */

/** A planner check a candidate failed (capabilities/research/domain/research-planner.ts HardFailure). */
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
  score_breakdown?: ScoreBreakdown | null;
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
  score_breakdown: ScoreBreakdown | null;
  merged_into: string | null;
  planner_version: string;
  candidate_snapshot: Record<string, unknown>;
  decided_by: string;
  decided_at: string;
}

const ADMISSION_COLUMNS =
  'admission_id, candidate_id, batch_id, dedupe_key, generation_mode, title, decision, score, reasons, hard_failures, ' +
  'score_breakdown, merged_into, planner_version, candidate_snapshot, decided_by, decided_at';

const json = (value: unknown) => JSON.stringify(value);

/** Appends an admission record. */
export async function insertAdmission(tx: Queryable, row: AdmissionInsert): Promise<AdmissionRow> {
  const result = await tx.query<AdmissionRow>(
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
  return result.rows[0]!;
}

/** The admissions of one candidate, newest first. */
export async function admissionsOf(q: Queryable, candidateId: string): Promise<AdmissionRow[]> {
  const result = await q.query<AdmissionRow>(
    `SELECT ${ADMISSION_COLUMNS} FROM research_admissions WHERE candidate_id = $1 ORDER BY admission_id DESC`,
    [candidateId],
  );
  return result.rows;
}

/** The newest admissions, newest first. */
export async function latestAdmissions(q: Queryable, limit: number): Promise<AdmissionRow[]> {
  const result = await q.query<AdmissionRow>(
    `SELECT ${ADMISSION_COLUMNS} FROM research_admissions ORDER BY admission_id DESC LIMIT $1`,
    [Math.max(0, Math.trunc(limit))],
  );
  return result.rows;
}
