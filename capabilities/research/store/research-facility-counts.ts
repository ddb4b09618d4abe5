import { ADMISSION_DECISIONS, type AdmissionDecision } from '../domain/research-candidate.ts';
import type { Queryable } from '../../../platform/store/store.ts';

/** The Research Facility overview: how many rows each ledger holds. */

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

type CountsRow = Omit<FacilityCounts, 'admissions' | 'admissions_by_decision'> & {
  admissions_by_decision: Partial<Record<AdmissionDecision, number>>;
};

/** Row counts per ledger, in one round trip. */
export async function facilityCounts(q: Queryable): Promise<FacilityCounts> {
  const result = await q.query<CountsRow>(
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
  const admissions_by_decision = Object.fromEntries(
    ADMISSION_DECISIONS.map((decision) => [decision, row.admissions_by_decision[decision] ?? 0]),
  ) as Record<AdmissionDecision, number>;
  return {
    sources: row.sources,
    candidates: row.candidates,
    candidates_queue_admitted: row.candidates_queue_admitted,
    admissions: Object.values(admissions_by_decision).reduce((sum, n) => sum + n, 0),
    admissions_by_decision,
    lineage: row.lineage,
    ideas: row.ideas,
    projects: row.projects,
    queue_items: row.queue_items,
  };
}
