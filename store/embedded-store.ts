import { mkdir } from 'node:fs/promises';
import { PGlite } from '@electric-sql/pglite';
import { ROW_PARSERS } from './row-parsers.ts';
import type { Queryable, QueryResult, Store } from './store.ts';

interface PgliteLike {
  query<Row>(sql: string, params?: unknown[]): Promise<{ rows: Row[]; affectedRows?: number }>;
  exec(sql: string): Promise<unknown>;
}

const scope = (db: PgliteLike): Queryable => ({
  query: (sql, params) => run(db, sql, params),
  exec: async (sql) => {
    await db.exec(sql);
  },
});

const run = async <Row>(db: PgliteLike, sql: string, params?: readonly unknown[]): Promise<QueryResult<Row>> => {
  const result = await db.query<Row>(sql, params as unknown[] | undefined);
  return { rows: result.rows, rowCount: result.affectedRows ?? result.rows.length };
};

/** In-process Postgres (PGlite). `dataDir` undefined keeps everything in memory (tests). */
export async function createEmbeddedStore(dataDir?: string): Promise<Store> {
  if (dataDir) await mkdir(dataDir, { recursive: true });
  const db = await PGlite.create(dataDir ?? 'memory://', { parsers: ROW_PARSERS });
  return {
    backend: 'embedded',
    location: dataDir ?? 'memory://',
    readOnly: false,
    ...scope(db),
    transaction: (fn) => db.transaction((tx) => fn(scope(tx))),
    async ping() {
      await db.query('SELECT 1');
    },
    async close() {
      if (!db.closed) await db.close();
    },
  };
}
