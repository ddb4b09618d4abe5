import type { SourceKind } from '../domain/research-candidate.ts';
import { containsPattern, sqlParams } from '../../../platform/store/sql-params.ts';
import type { Queryable } from '../../../platform/store/store.ts';

/**
 * The research_sources ledger: evidence candidates cite. Every function takes a Queryable so it runs inside the
 * caller's transaction.
 */

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
const MAX_LISTED = 500;

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
    [input.source_id, input.kind, input.title, input.url ?? null, input.summary ?? null, JSON.stringify(input.metadata ?? {})],
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
  const sql = sqlParams();
  const conditions: string[] = [];
  if (filters.kind) conditions.push(`kind = ${sql.bind(filters.kind)}`);
  if (filters.search) {
    const pattern = sql.bind(containsPattern(filters.search));
    conditions.push(
      `(source_id ILIKE ${pattern} OR title ILIKE ${pattern} OR coalesce(url, '') ILIKE ${pattern}
        OR coalesce(summary, '') ILIKE ${pattern})`,
    );
  }
  const where = conditions.length > 0 ? `WHERE ${conditions.join(' AND ')}` : '';
  const rows = Math.min(Math.max(Math.trunc(limit) || 1, 1), MAX_LISTED);
  const result = await q.query<SourceRow>(
    `SELECT ${SOURCE_COLUMNS} FROM research_sources ${where}
     ORDER BY created_at DESC, source_id DESC LIMIT ${sql.bind(rows)}`,
    sql.params,
  );
  return result.rows;
}

/** One source, or undefined. */
export async function getSource(q: Queryable, sourceId: string): Promise<SourceRow | undefined> {
  const result = await q.query<SourceRow>(`SELECT ${SOURCE_COLUMNS} FROM research_sources WHERE source_id = $1`, [sourceId]);
  return result.rows[0];
}

/** The sources among `ids` that exist, in the order of `ids` (unknown ids are left out). */
export async function getSourcesByIds(q: Queryable, ids: readonly string[]): Promise<SourceRow[]> {
  if (ids.length === 0) return [];
  const result = await q.query<SourceRow>(
    `SELECT ${SOURCE_COLUMNS} FROM research_sources
     WHERE source_id IN (SELECT jsonb_array_elements_text($1::jsonb))`,
    [JSON.stringify(ids)],
  );
  const byId = new Map(result.rows.map((row) => [row.source_id, row]));
  return [...new Set(ids)].flatMap((id) => {
    const source = byId.get(id);
    return source ? [source] : [];
  });
}
