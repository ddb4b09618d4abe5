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
  /** Runs fn in one transaction; refuses with StoreReadOnlyError on a read-only store. */
  transaction<T>(fn: (tx: Queryable) => Promise<T>): Promise<T>;
  ping(): Promise<void>;
  close(): Promise<void>;
}

export class StoreReadOnlyError extends Error {
  constructor() {
    super('the store is read-only (control_plane_store_backend is pg_readonly)');
    this.name = 'StoreReadOnlyError';
  }
}
