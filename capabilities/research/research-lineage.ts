import type { Queryable } from '../../platform/store/store.ts';

/** The research_lineage ledger: links from sources and candidates through projects and runs to their outcomes. */

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

/** Most links lineageOf returns: a detail view shows the first ones, never an unbounded list. */
export const LINEAGE_LIMIT = 200;

/** The links from or to the given thing, oldest first, at most LINEAGE_LIMIT. */
export async function lineageOf(q: Queryable, kind: LineageKind, id: string): Promise<LineageRow[]> {
  const result = await q.query<LineageRow>(
    `SELECT ${LINEAGE_COLUMNS} FROM research_lineage
     WHERE (from_kind = $1 AND from_id = $2) OR (to_kind = $1 AND to_id = $2)
     ORDER BY lineage_id
     LIMIT $3`,
    [kind, id, LINEAGE_LIMIT],
  );
  return result.rows;
}
