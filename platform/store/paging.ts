import type { SqlParams } from './sql-params.ts';
import type { Queryable } from './store.ts';

export interface PageWindow {
  limit: number;
  offset: number;
}

const MAX_PAGE_SIZE = 500;

/** The window of a 1-based page; the page size is kept within 1–500. */
export function pageWindow(page: number, pageSize: number): PageWindow {
  const limit = Math.min(Math.max(Math.trunc(pageSize) || 1, 1), MAX_PAGE_SIZE);
  const offset = (Math.max(Math.trunc(page) || 1, 1) - 1) * limit;
  return { limit, offset };
}

export interface PageQuery {
  /** `SELECT … FROM … WHERE … ORDER BY …`, without LIMIT or OFFSET. */
  select: string;
  /** A one-row query whose `total` column counts every row `select` matches. */
  count: string;
  /** A column `select` never returns as NULL: a row without it is the empty page. */
  key: string;
  /** The parameters `select` and `count` already bound; the window is bound after them. */
  sql: SqlParams;
  window: PageWindow;
}

interface PageTotal {
  page_total: number;
}

/** One page of rows and the total, in one round trip, with LIMIT and OFFSET bound as parameters. */
export async function selectPage<Row extends object>(
  q: Queryable,
  query: PageQuery,
): Promise<{ items: Omit<Row & PageTotal, keyof PageTotal>[]; total: number }> {
  const { sql, window } = query;
  // The lateral join keeps the total even when the page itself is empty (a page past the end).
  const result = await q.query<Row & PageTotal & Record<string, unknown>>(
    `SELECT totals.total AS page_total, page.* FROM (${query.count}) AS totals
     LEFT JOIN LATERAL (${query.select} LIMIT ${sql.bind(window.limit)} OFFSET ${sql.bind(window.offset)}) AS page ON true`,
    sql.params,
  );
  const items = result.rows.filter((row) => row[query.key] !== null).map(({ page_total: _total, ...row }) => row);
  return { items, total: result.rows[0]?.page_total ?? 0 };
}
