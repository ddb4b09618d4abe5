import { paperActions, paperStage, type PaperAction, type PaperStage } from './domain/paper-stage.ts';
import type { ChecklistItemId, ChecklistStatus, PaperStatus, ReviewStatus } from './domain/paper-status.ts';
import { pageWindow, selectPage } from '../../platform/store/paging.ts';
import { containsPattern, sqlParams } from '../../platform/store/sql-params.ts';
import type { Queryable } from '../../platform/store/store.ts';

/** The paper ledgers (migration 0006): reads and the single-row writes the paper services compose into transactions. */

export const PAPER_COLUMNS =
  'paper_id, project_id, run_id, paper_status, review_status, rank_score, rank_reasons, title, writer, writer_fallback_reason, draft_dir, draft_artifacts, evidence_summary, draft_count, drafted_at, rewrite_count, rewritten_at, created_at, updated_at, ' +
  'EXISTS (SELECT 1 FROM corpus_imports ci WHERE ci.paper_id = papers.paper_id) AS imported';

/** What a draft was written from, as its draft step recorded it. */
export interface EvidenceSummary {
  /** Of the evidence files together. */
  sha256: string;
  files: string[];
  /** Each file's sha256; absent in drafts recorded before packages checked them. */
  file_hashes?: { path: string; sha256: string; bytes: number }[];
  decision: string | null;
}

export interface PaperRow {
  paper_id: string;
  project_id: string;
  run_id: string;
  paper_status: PaperStatus;
  review_status: ReviewStatus;
  rank_score: number;
  rank_reasons: string[];
  title: string | null;
  writer: 'deterministic' | 'hosted' | null;
  writer_fallback_reason: string | null;
  draft_dir: string | null;
  draft_artifacts: { path: string; sha256: string; bytes: number }[];
  evidence_summary: EvidenceSummary | null;
  draft_count: number;
  drafted_at: string | null;
  rewrite_count: number;
  rewritten_at: string | null;
  created_at: string;
  updated_at: string;
  /** A corpus import is recorded for the paper. */
  imported: boolean;
  /** Where the paper stands as a person reads it (capabilities/papers/domain/paper-stage.ts). */
  stage: PaperStage;
  /** The commands the paper takes now. */
  operator_actions: PaperAction[];
}

/** A row as PAPER_COLUMNS reads it. */
export type StoredPaperRow = Omit<PaperRow, 'stage' | 'operator_actions'>;

/** Every paper row the store answers goes through here, so each carries its stage and commands. */
export function withStage(row: StoredPaperRow): PaperRow {
  return { ...row, stage: paperStage(row), operator_actions: paperActions(row) };
}

export async function getPaper(q: Queryable, paperId: string, options: { forUpdate?: boolean } = {}): Promise<PaperRow | undefined> {
  const result = await q.query<StoredPaperRow>(`SELECT ${PAPER_COLUMNS} FROM papers WHERE paper_id = $1${options.forUpdate ? ' FOR UPDATE' : ''}`, [paperId]);
  return result.rows[0] && withStage(result.rows[0]);
}

export async function setReviewStatus(tx: Queryable, paperId: string, reviewStatus: ReviewStatus): Promise<void> {
  await tx.query('UPDATE papers SET review_status = $2 WHERE paper_id = $1', [paperId, reviewStatus]);
}

export async function setRank(tx: Queryable, paperId: string, rank: { rank_score: number; rank_reasons: string[] }): Promise<void> {
  await tx.query('UPDATE papers SET rank_score = $2, rank_reasons = $3::jsonb WHERE paper_id = $1', [paperId, rank.rank_score, JSON.stringify(rank.rank_reasons)]);
}

export interface ReviewHistoryRow {
  history_id: number;
  paper_id: string;
  from_status: ReviewStatus | null;
  to_status: ReviewStatus;
  note: string | null;
  blocker: string | null;
  requested_by: string;
  created_at: string;
}

export async function insertReviewHistory(
  tx: Queryable,
  entry: Omit<ReviewHistoryRow, 'history_id' | 'created_at'>,
): Promise<ReviewHistoryRow> {
  const result = await tx.query<ReviewHistoryRow>(
    `INSERT INTO paper_review_history (paper_id, from_status, to_status, note, blocker, requested_by)
     VALUES ($1, $2, $3, $4, $5, $6)
     RETURNING history_id, paper_id, from_status, to_status, note, blocker, requested_by, created_at`,
    [entry.paper_id, entry.from_status, entry.to_status, entry.note, entry.blocker, entry.requested_by],
  );
  return result.rows[0]!;
}

export interface ChecklistItemRow {
  item_id: ChecklistItemId;
  status: ChecklistStatus;
  note: string | null;
  judged_by: string | null;
  updated_at: string;
}

/** The paper's checklist in the order of the item list; items never written are absent (the caller fills them in). */
export async function getChecklist(q: Queryable, paperId: string): Promise<ChecklistItemRow[]> {
  const result = await q.query<ChecklistItemRow>(
    'SELECT item_id, status, note, judged_by, updated_at FROM paper_checklist_items WHERE paper_id = $1',
    [paperId],
  );
  return result.rows;
}

export async function upsertChecklistItem(
  tx: Queryable,
  paperId: string,
  item: { item_id: ChecklistItemId; status: ChecklistStatus; note: string | null; judged_by: string },
): Promise<ChecklistItemRow> {
  const result = await tx.query<ChecklistItemRow>(
    `INSERT INTO paper_checklist_items (paper_id, item_id, status, note, judged_by) VALUES ($1, $2, $3, $4, $5)
     ON CONFLICT (paper_id, item_id) DO UPDATE SET status = EXCLUDED.status, note = EXCLUDED.note, judged_by = EXCLUDED.judged_by
     RETURNING item_id, status, note, judged_by, updated_at`,
    [paperId, item.item_id, item.status, item.note, item.judged_by],
  );
  return result.rows[0]!;
}

export interface CorpusImportRow {
  paper_id: string;
  corpus_repo: string;
  commit_sha: string;
  manifest_sha256: string;
  requested_by: string;
  created_at: string;
}

export async function getCorpusImport(q: Queryable, paperId: string): Promise<CorpusImportRow | undefined> {
  const result = await q.query<CorpusImportRow>(
    'SELECT paper_id, corpus_repo, commit_sha, manifest_sha256, requested_by, created_at FROM corpus_imports WHERE paper_id = $1',
    [paperId],
  );
  return result.rows[0];
}

export async function insertCorpusImport(tx: Queryable, entry: Omit<CorpusImportRow, 'created_at'>): Promise<CorpusImportRow> {
  const result = await tx.query<CorpusImportRow>(
    `INSERT INTO corpus_imports (paper_id, corpus_repo, commit_sha, manifest_sha256, requested_by) VALUES ($1, $2, $3, $4, $5)
     RETURNING paper_id, corpus_repo, commit_sha, manifest_sha256, requested_by, created_at`,
    [entry.paper_id, entry.corpus_repo, entry.commit_sha, entry.manifest_sha256, entry.requested_by],
  );
  return result.rows[0]!;
}

export async function hasFinalizationPackage(q: Queryable, paperId: string, manifestSha256: string): Promise<boolean> {
  const result = await q.query('SELECT 1 FROM paper_finalization_packages WHERE paper_id = $1 AND manifest_sha256 = $2', [paperId, manifestSha256]);
  return result.rowCount > 0;
}

/** What rank_score is computed from, read in one query (capabilities/papers/domain/paper-rank.ts). */
export interface RankInputRow {
  evidence: Record<string, unknown> | null;
  decision: string | null;
  finished_at: string | null;
  review_status: ReviewStatus;
  failed_checklist_items: number;
}

export async function readRankInputs(q: Queryable, paperId: string): Promise<RankInputRow | undefined> {
  const result = await q.query<RankInputRow>(
    `SELECT r.evidence, r.decision, r.finished_at, p.review_status,
            (SELECT count(*) FROM paper_checklist_items c
              WHERE c.paper_id = p.paper_id AND c.status = 'fail' AND c.judged_by = 'automated')::int AS failed_checklist_items
       FROM papers p JOIN runs r ON r.run_id = p.run_id
      WHERE p.paper_id = $1`,
    [paperId],
  );
  return result.rows[0];
}

/** Columns a paper list may be sorted by: any of these, `-` for descending; paper_id breaks ties. */
export const PAPER_SORT_COLUMNS = ['rank_score', 'updated_at', 'created_at', 'paper_id', 'project_id', 'paper_status', 'review_status', 'title'] as const;
export const PAPER_SEARCHED_COLUMNS = ['paper_id', 'project_id', 'run_id', 'title', 'paper_status', 'review_status'];

export interface PaperListQuery {
  page: number;
  page_size: number;
  search?: string | undefined;
  paper_status?: PaperStatus | undefined;
  review_status?: ReviewStatus | undefined;
  /** Review statuses left out (the review queue's `next` leaves out finalized and rejected). */
  exclude_review_statuses?: readonly ReviewStatus[] | undefined;
  sort: string;
}

function orderBy(sort: string): string {
  const descending = sort.startsWith('-');
  const column = descending ? sort.slice(1) : sort;
  if (!(PAPER_SORT_COLUMNS as readonly string[]).includes(column)) throw new Error(`unknown sort column ${column}`);
  return `${column} ${descending ? 'DESC' : 'ASC'}${column === 'paper_id' ? '' : ', paper_id ASC'}`;
}

/** One page of papers with the total, filtered and sorted, in one round trip. */
export async function listPapers(q: Queryable, query: PaperListQuery): Promise<{ items: PaperRow[]; total: number }> {
  const sql = sqlParams();
  const conditions: string[] = [];
  if (query.paper_status) conditions.push(`paper_status = ${sql.bind(query.paper_status)}`);
  if (query.review_status) conditions.push(`review_status = ${sql.bind(query.review_status)}`);
  if (query.exclude_review_statuses?.length) conditions.push(`NOT (review_status = ANY(${sql.bind([...query.exclude_review_statuses])}::text[]))`);
  if (query.search) {
    const pattern = sql.bind(containsPattern(query.search));
    conditions.push(`(${PAPER_SEARCHED_COLUMNS.map((column) => `${column} ILIKE ${pattern}`).join(' OR ')})`);
  }
  const where = conditions.length > 0 ? `WHERE ${conditions.join(' AND ')}` : '';
  const page = await selectPage<StoredPaperRow>(q, {
    select: `SELECT ${PAPER_COLUMNS} FROM papers ${where} ORDER BY ${orderBy(query.sort)}`,
    count: `SELECT count(*) AS total FROM papers ${where}`,
    key: 'paper_id',
    sql,
    window: pageWindow(query.page, query.page_size),
  });
  return { items: page.items.map(withStage), total: page.total };
}

export async function setPaperStatus(tx: Queryable, paperId: string, paperStatus: PaperStatus): Promise<void> {
  await tx.query('UPDATE papers SET paper_status = $2 WHERE paper_id = $1', [paperId, paperStatus]);
}

/** Most papers a project or run detail lists (newest first): a project has one per completed run. */
export const DETAIL_PAPER_LIMIT = 100;

export async function listPapersOf(q: Queryable, of: { project_id: string } | { run_id: string }): Promise<PaperRow[]> {
  const [column, value] = 'project_id' in of ? ['project_id', of.project_id] : ['run_id', of.run_id];
  const result = await q.query<StoredPaperRow>(
    `SELECT ${PAPER_COLUMNS} FROM papers WHERE ${column} = $1 ORDER BY created_at DESC, paper_id LIMIT $2`,
    [value, DETAIL_PAPER_LIMIT],
  );
  return result.rows.map(withStage);
}

/** Where a rewrite may start (capabilities/papers/domain/paper-steps.ts STEP_STARTS_FROM.rewrite). */
const REWRITABLE_STATUSES: readonly PaperStatus[] = ['draft_review', 'publication_draft', 'human_review_required'];

/** rewrite-batch's selection: rewritable papers matching the filters, highest rank first. */
export async function listRewriteSelection(
  q: Queryable,
  query: {
    paper_status?: string | undefined;
    review_status?: string | undefined;
    search?: string | undefined;
    limit: number;
    skip_rewritten: boolean;
    exclude_review_statuses: readonly string[];
  },
): Promise<PaperRow[]> {
  const sql = sqlParams();
  const conditions = [`paper_status = ANY(${sql.bind([...REWRITABLE_STATUSES])}::text[])`];
  if (query.paper_status) conditions.push(`paper_status = ${sql.bind(query.paper_status)}`);
  if (query.review_status) conditions.push(`review_status = ${sql.bind(query.review_status)}`);
  if (query.exclude_review_statuses.length > 0) conditions.push(`NOT (review_status = ANY(${sql.bind([...query.exclude_review_statuses])}::text[]))`);
  if (query.skip_rewritten) conditions.push('rewrite_count = 0');
  if (query.search) {
    const pattern = sql.bind(containsPattern(query.search));
    conditions.push(`(${PAPER_SEARCHED_COLUMNS.map((column) => `${column} ILIKE ${pattern}`).join(' OR ')})`);
  }
  const result = await q.query<StoredPaperRow>(
    `SELECT ${PAPER_COLUMNS} FROM papers WHERE ${conditions.join(' AND ')} ORDER BY rank_score DESC, paper_id LIMIT ${sql.bind(query.limit)}`,
    sql.params,
  );
  return result.rows.map(withStage);
}

/** Records a package written for the paper; the same manifest twice is one package. */
export async function insertFinalizationPackage(
  tx: Queryable,
  entry: { paper_id: string; target_label: string; package_dir: string; manifest: unknown; manifest_sha256: string; requested_by: string },
): Promise<void> {
  await tx.query(
    `INSERT INTO paper_finalization_packages (paper_id, target_label, package_dir, manifest, manifest_sha256, requested_by)
     VALUES ($1, $2, $3, $4::jsonb, $5, $6) ON CONFLICT (paper_id, manifest_sha256) DO NOTHING`,
    [entry.paper_id, entry.target_label, entry.package_dir, JSON.stringify(entry.manifest), entry.manifest_sha256, entry.requested_by],
  );
}
