import { COMPLETED_RUN_STATE, PAPER_PIPELINE_COUNTS, WRITABLE_DECISIONS, type PaperPipelineCounts } from '../domain/paper-candidacy.ts';
import type { Queryable } from './store.ts';

export interface PaperCounts {
  /** Every paper row, whatever its status. */
  total: number;
  pipeline: PaperPipelineCounts;
}

/**
 * The paper-pipeline counts (domain/paper-candidacy.ts `paperPipelineCount`, in SQL) and the number of papers, in one
 * read: the status snapshot and the overview both show them. Each CASE arm is one rule of the domain function, in
 * its order; a test compares the two on generated rows.
 */
export async function paperCounts(q: Queryable): Promise<PaperCounts> {
  const result = await q.query<Record<'total' | keyof PaperPipelineCounts, number>>(
    `WITH classified AS (
       SELECT CASE
                WHEN ci.paper_id IS NOT NULL THEN 'published_imported'
                WHEN p.review_status = 'finalized' THEN 'publish_ready'
                WHEN writable.sufficient AND writable.decision_ok
                  THEN CASE WHEN p.paper_id IS NULL OR p.paper_status = 'eligible' THEN 'write_needed' END
                WHEN p.paper_id IS NOT NULL THEN NULL
                WHEN NOT writable.sufficient THEN 'raw_completed_no_paper_candidates'
                ELSE 'not_writable_by_decision_gate'
              END AS count_name
         FROM runs r
         CROSS JOIN LATERAL (
           SELECT COALESCE(jsonb_typeof(r.evidence -> 'sufficient_for_paper') = 'boolean'
                           AND (r.evidence ->> 'sufficient_for_paper')::boolean, false) AS sufficient,
                  COALESCE(r.decision = ANY ($2::text[]), false) AS decision_ok
         ) AS writable
         LEFT JOIN papers p ON p.run_id = r.run_id
         LEFT JOIN corpus_imports ci ON ci.paper_id = p.paper_id
        WHERE r.state = $1
     )
     SELECT (SELECT count(*) FROM papers)::int AS total,
            ${PAPER_PIPELINE_COUNTS.map((name) => `count(*) FILTER (WHERE count_name = '${name}')::int AS ${name}`).join(',\n            ')}
       FROM classified`,
    [COMPLETED_RUN_STATE, [...WRITABLE_DECISIONS]],
  );
  const row = result.rows[0]!;
  const pipeline = Object.fromEntries(PAPER_PIPELINE_COUNTS.map((name) => [name, Number(row[name])])) as PaperPipelineCounts;
  return { total: Number(row.total), pipeline };
}
