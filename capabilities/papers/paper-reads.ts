import type { PaperStatus, ReviewStatus } from './domain/paper-status.ts';
import { ascending, descending, selectKeysetPage, type KeysetOrder, type KeysetPage } from '../../platform/store/keyset.ts';
import { PAPER_COLUMNS, PAPER_SEARCHED_COLUMNS, withStage, type PaperRow, type ReviewHistoryRow, type StoredPaperRow } from './paper-ledger.ts';
import { containsPattern, sqlParams } from '../../platform/store/sql-params.ts';
import type { Queryable } from '../../platform/store/store.ts';

/** The paper list of `GET /control/api/v1/papers`, highest rank first unless asked otherwise. */
export const PAPER_ORDERS: readonly KeysetOrder[] = [
  { name: '-rank_score', columns: [descending('rank_score', 'integer'), descending('paper_id', 'text')] },
  { name: 'rank_score', columns: [ascending('rank_score', 'integer'), ascending('paper_id', 'text')] },
  { name: '-updated_at', columns: [descending('updated_at', 'timestamptz'), descending('paper_id', 'text')] },
  { name: 'updated_at', columns: [ascending('updated_at', 'timestamptz'), ascending('paper_id', 'text')] },
  { name: '-created_at', columns: [descending('created_at', 'timestamptz'), descending('paper_id', 'text')] },
  { name: 'paper_id', columns: [ascending('paper_id', 'text')] },
];

export async function walkPapers(
  q: Queryable,
  query: {
    paper_status?: PaperStatus | undefined;
    review_status?: ReviewStatus | undefined;
    search?: string | undefined;
    order: KeysetOrder;
    after: string[] | null;
    limit: number;
  },
): Promise<KeysetPage<PaperRow>> {
  const sql = sqlParams();
  const where: string[] = [];
  if (query.paper_status) where.push(`paper_status = ${sql.bind(query.paper_status)}`);
  if (query.review_status) where.push(`review_status = ${sql.bind(query.review_status)}`);
  if (query.search) {
    const pattern = sql.bind(containsPattern(query.search));
    where.push(`(${PAPER_SEARCHED_COLUMNS.map((column) => `${column} ILIKE ${pattern}`).join(' OR ')})`);
  }
  const page = await selectKeysetPage<StoredPaperRow>(q, {
    select: PAPER_COLUMNS,
    from: 'FROM papers',
    table: 'papers',
    where,
    sql,
    order: query.order,
    after: query.after,
    limit: query.limit,
  });
  return { ...page, items: page.items.map(withStage) };
}

// ---------------------------------------------------------------------------------------------------------------
// One paper's detail (`GET /control/api/v1/papers/{paper_id}`): each nested list capped

/** Most review moves and finalization packages a paper detail lists, newest first. */
export const PAPER_DETAIL_LIMITS = { review_history: 50, finalization_packages: 20 } as const;

export async function listReviewHistory(q: Queryable, paperId: string): Promise<ReviewHistoryRow[]> {
  const result = await q.query<ReviewHistoryRow>(
    `SELECT history_id, paper_id, from_status, to_status, note, blocker, requested_by, created_at
       FROM paper_review_history WHERE paper_id = $1 ORDER BY history_id DESC LIMIT $2`,
    [paperId, PAPER_DETAIL_LIMITS.review_history],
  );
  return result.rows;
}

export interface FinalizationPackageRow {
  package_id: number;
  target_label: string;
  package_dir: string;
  manifest_sha256: string;
  requested_by: string;
  created_at: string;
}

/** The packages written for a paper, newest first, without their manifests (the package directory holds each). */
export async function listFinalizationPackages(q: Queryable, paperId: string): Promise<FinalizationPackageRow[]> {
  const result = await q.query<FinalizationPackageRow>(
    `SELECT package_id, target_label, package_dir, manifest_sha256, requested_by, created_at
       FROM paper_finalization_packages WHERE paper_id = $1 ORDER BY package_id DESC LIMIT $2`,
    [paperId, PAPER_DETAIL_LIMITS.finalization_packages],
  );
  return result.rows;
}
