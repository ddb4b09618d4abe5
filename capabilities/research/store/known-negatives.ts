import type { KnownNegative } from '../domain/research-planner.ts';
import type { Queryable } from '../../../platform/store/store.ts';

/**
 * Prior negative or mixed outcomes the planner checks new candidates against: projects whose run ended with a
 * `negative` or `mixed` decision, recorded as `project → decision` lineage when a run is reconciled, together with
 * the candidate the project came from.
 */
export async function listKnownNegatives(q: Queryable, limit = 1000): Promise<KnownNegative[]> {
  const result = await q.query<KnownNegative>(
    `SELECT c.dedupe_key, c.hypothesis, c.mechanism, p.project_id AS reference
       FROM research_lineage d
       JOIN projects p ON p.project_id = d.from_id
       JOIN research_candidates c ON c.candidate_id = p.candidate_id
      WHERE d.from_kind = 'project' AND d.to_kind = 'decision' AND d.relation IN ('negative', 'mixed')
      ORDER BY d.lineage_id DESC
      LIMIT $1`,
    [limit],
  );
  return result.rows;
}
