import type { AdmissionDecision, GenerationMode } from '../domain/research-candidate.ts';
import type { Queryable } from '../../../platform/store/store.ts';

/**
 * The reads behind `GET /control/api/v1/research-quality` (docs/console.md#read-models): the Research Facility's decisions
 * and what became of promoted candidates, each a grouped count, never a row list.
 */

export interface ModeDecisionCount {
  generation_mode: GenerationMode;
  decision: AdmissionDecision;
  n: number;
}

export async function admissionsByModeAndDecision(q: Queryable): Promise<ModeDecisionCount[]> {
  const result = await q.query<ModeDecisionCount>(
    'SELECT generation_mode, decision, count(*)::int AS n FROM research_admissions GROUP BY generation_mode, decision',
  );
  return result.rows;
}

export interface ScoreBucketCount {
  /** 0 for scores 0–10, …, 9 for 90–100. */
  bucket: number;
  decision: AdmissionDecision;
  n: number;
}

export async function admissionScoreBuckets(q: Queryable): Promise<ScoreBucketCount[]> {
  const result = await q.query<ScoreBucketCount>(
    `SELECT least(width_bucket(score, 0, 100, 10), 10) - 1 AS bucket, decision, count(*)::int AS n
       FROM research_admissions GROUP BY 1, 2`,
  );
  return result.rows;
}

/** Score a rejected candidate had when no hard failure explains the rejection. */
export const LOW_SCORE_REASON = 'score_below_threshold';

/** Why candidates were rejected: each hard-failure code, and a low score alone; the most frequent first. */
export async function rejectionReasons(q: Queryable, limit: number): Promise<{ reason: string; n: number }[]> {
  const result = await q.query<{ reason: string; n: number }>(
    `SELECT reason, n FROM (
       SELECT failure->>'code' AS reason, count(*)::int AS n
         FROM research_admissions a CROSS JOIN LATERAL jsonb_array_elements(a.hard_failures) AS failure
        WHERE a.decision = 'rejected'
        GROUP BY 1
       UNION ALL
       SELECT $1, count(*)::int FROM research_admissions WHERE decision = 'rejected' AND jsonb_array_length(hard_failures) = 0
     ) AS reasons
     WHERE n > 0 AND reason IS NOT NULL
     ORDER BY n DESC, reason
     LIMIT $2`,
    [LOW_SCORE_REASON, limit],
  );
  return result.rows;
}

export async function promotionCounts(q: Queryable): Promise<{ admitted: number; promoted: number }> {
  const result = await q.query<{ admitted: number; promoted: number }>(
    `SELECT count(*) FILTER (WHERE decision = 'admitted')::int AS admitted, count(*) FILTER (WHERE queue_admitted)::int AS promoted
       FROM research_candidates`,
  );
  return result.rows[0]!;
}

export interface PromotedRunOutcome {
  state: string;
  decision: string | null;
  n: number;
}

/** Runs of projects that came from a promoted candidate, by state and the agent's decision. */
export async function promotedRunOutcomes(q: Queryable): Promise<PromotedRunOutcome[]> {
  const result = await q.query<PromotedRunOutcome>(
    `SELECT r.state, r.decision, count(*)::int AS n
       FROM runs r JOIN projects p ON p.project_id = r.project_id
      WHERE p.candidate_id IS NOT NULL
      GROUP BY r.state, r.decision
      ORDER BY n DESC, r.state, r.decision`,
  );
  return result.rows;
}
