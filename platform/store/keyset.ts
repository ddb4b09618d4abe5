import type { SqlParams } from './sql-params.ts';
import type { Queryable } from './store.ts';

/**
 * Keyset ("seek") paging for the v1 lists (docs/console.md#read-models): a page starts after the sort key of the previous
 * page's last row, so a deep page costs what the first one does and rows inserted between pages never shift a walk.
 *
 * A sort key is carried as text, rendered by SQL, so nothing is lost on the way through JavaScript (timestamps keep
 * their microseconds); the comparison casts it back to the column's type.
 */

export type KeyType = 'text' | 'integer' | 'bigint' | 'timestamptz';

export interface KeyColumn {
  /** A column of the listed table, never NULL. */
  column: string;
  type: KeyType;
  descending: boolean;
}

/** A sort a list offers: its columns in order, the last one unique, so the order is total. */
export interface KeysetOrder {
  name: string;
  columns: readonly KeyColumn[];
}

export const ascending = (column: string, type: KeyType): KeyColumn => ({ column, type, descending: false });
export const descending = (column: string, type: KeyType): KeyColumn => ({ column, type, descending: true });

const MAX_TEXT_KEY = 512;
const KEY_PATTERNS: Record<KeyType, RegExp> = {
  text: /^[\s\S]*$/,
  integer: /^-?\d{1,10}$/,
  bigint: /^-?\d{1,16}$/,
  timestamptz: /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}Z$/,
};

/** Whether `key` could be a sort key of `order`, as keyText renders one: the right length, each part of its type. */
export function isKeyOf(order: KeysetOrder, key: readonly unknown[]): key is string[] {
  return (
    key.length === order.columns.length &&
    key.every((part, index) => {
      const { type } = order.columns[index]!;
      if (typeof part !== 'string' || part.length > MAX_TEXT_KEY || !KEY_PATTERNS[type].test(part)) return false;
      if (type === 'integer') return Math.abs(Number(part)) <= 2 ** 31 - 1;
      if (type === 'bigint') return Number.isSafeInteger(Number(part));
      if (type === 'timestamptz') return !Number.isNaN(Date.parse(part));
      return true;
    })
  );
}

function keyText({ column, type }: KeyColumn, table: string): string {
  const qualified = `${table}.${column}`;
  return type === 'timestamptz' ? `to_char(${qualified} AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"')` : `${qualified}::text`;
}

/**
 * Rows after `key` in `order`. One direction throughout is a row comparison, which an index on the same columns
 * answers directly; mixed directions nest, the first column bounding the scan.
 */
function afterCondition(order: KeysetOrder, table: string, key: readonly string[], sql: SqlParams): string {
  const values = order.columns.map((column, index) => `${sql.bind(key[index])}::${column.type}`);
  const columns = order.columns.map(({ column }) => `${table}.${column}`);
  const direction = order.columns[0]!.descending;
  if (order.columns.every((column) => column.descending === direction)) {
    return `(${columns.join(', ')}) ${direction ? '<' : '>'} (${values.join(', ')})`;
  }
  const beyond = (index: number): string => {
    const op = order.columns[index]!.descending ? '<' : '>';
    const strictly = `${columns[index]} ${op} ${values[index]}`;
    return index === columns.length - 1 ? strictly : `(${strictly} OR (${columns[index]} = ${values[index]} AND ${beyond(index + 1)}))`;
  };
  return `${columns[0]} ${direction ? '<=' : '>='} ${values[0]} AND ${beyond(0)}`;
}

export interface KeysetQuery {
  /** Column list of the SELECT, its columns qualified by `table` where a join makes them ambiguous. */
  select: string;
  /** `FROM …` with any joins; `table` is the alias of the listed table. */
  from: string;
  table: string;
  /** Filters, ANDed; their parameters already bound in `sql`. */
  where: string[];
  sql: SqlParams;
  order: KeysetOrder;
  /** The sort key of the last row already seen; null for the first page. */
  after: readonly string[] | null;
  limit: number;
}

export interface KeysetPage<Row> {
  items: Row[];
  /** The sort key of the last item when more rows follow; null on the last page. */
  next: string[] | null;
}

/** One page of a keyset walk, reading one row beyond the page to know whether another page follows. */
export async function selectKeysetPage<Row extends object>(q: Queryable, query: KeysetQuery): Promise<KeysetPage<Row>> {
  const { sql, order, table } = query;
  const where = [...query.where];
  if (query.after) where.push(afterCondition(order, table, query.after, sql));
  const orderBy = order.columns.map(({ column, descending: desc }) => `${table}.${column} ${desc ? 'DESC' : 'ASC'}`).join(', ');
  const result = await q.query<Row & { keyset_key: string[] }>(
    `SELECT ${query.select}, ARRAY[${order.columns.map((column) => keyText(column, table)).join(', ')}] AS keyset_key
       ${query.from}
      ${where.length > 0 ? `WHERE ${where.join(' AND ')}` : ''}
      ORDER BY ${orderBy}
      LIMIT ${sql.bind(query.limit + 1)}`,
    sql.params,
  );
  const rows = result.rows.slice(0, query.limit);
  const hasMore = result.rows.length > query.limit;
  const items = rows.map(({ keyset_key: _key, ...row }) => row as unknown as Row);
  return { items, next: hasMore ? rows.at(-1)!.keyset_key : null };
}
