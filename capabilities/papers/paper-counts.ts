import { PAPER_PIPELINE_COUNTS, type PaperPipelineCounts } from './domain/paper-candidacy.ts';
import type { Queryable } from '../../platform/store/store.ts';

export interface PaperCounts {
  /** Every paper row, whatever its status. */
  total: number;
  pipeline: PaperPipelineCounts;
}

/**
 * The paper-pipeline counts and the number of papers, in one read: the status snapshot and the overview both show
 * them. The counts are kept by triggers (migration 0011) with paper_pipeline_count(), the domain rule
 * (capabilities/papers/domain/paper-candidacy.ts `paperPipelineCount`) in SQL; a test holds the two together on generated rows.
 */
export async function paperCounts(q: Queryable): Promise<PaperCounts> {
  const result = await q.query<{ name: keyof PaperPipelineCounts | null; n: number }>(
    `SELECT name, n::int AS n FROM paper_pipeline_counts
     UNION ALL SELECT NULL, count(*)::int FROM papers`,
  );
  const pipeline = Object.fromEntries(PAPER_PIPELINE_COUNTS.map((name) => [name, 0])) as PaperPipelineCounts;
  let total = 0;
  for (const row of result.rows) {
    if (row.name === null) total = Number(row.n);
    else pipeline[row.name] = Number(row.n);
  }
  return { total, pipeline };
}
