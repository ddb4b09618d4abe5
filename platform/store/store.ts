/** The one small interface both store engines (node-postgres pool, embedded PGlite) implement. */

export type StoreBackend = 'embedded' | 'pg' | 'pg_readonly';

export interface QueryResult<Row> {
  rows: Row[];
  rowCount: number;
}

export interface Queryable {
  query<Row = Record<string, unknown>>(sql: string, params?: readonly unknown[]): Promise<QueryResult<Row>>;
  /** Runs a script of several statements without parameters (migrations). */
  exec(sql: string): Promise<void>;
}

export interface Store extends Queryable {
  readonly backend: StoreBackend;
  /** Where the data lives, safe to show (no credentials). */
  readonly location: string;
  readonly readOnly: boolean;
  /**
   * For the read models: the same data, each statement cut off after READ_STATEMENT_TIMEOUT_MS on Postgres (error
   * code 57014), so no request holds a connection with an unbounded scan. PGlite cannot interrupt a statement, so the
   * embedded store's reads are bounded by their LIMITs alone.
   */
  readonly reads: Queryable;
  /** Runs fn in one transaction; refuses with StoreReadOnlyError on a read-only store. */
  transaction<T>(fn: (tx: Queryable) => Promise<T>): Promise<T>;
  ping(): Promise<void>;
  close(): Promise<void>;
}

/** How long one read-model statement may run on Postgres before it is cancelled. */
export const READ_STATEMENT_TIMEOUT_MS = 5_000;

/** Postgres's code for a statement cancelled by statement_timeout. */
export const STATEMENT_TIMEOUT_CODE = '57014';

export class StoreReadOnlyError extends Error {
  constructor() {
    super('the store is read-only (control_plane_store_backend is pg_readonly)');
    this.name = 'StoreReadOnlyError';
  }
}
