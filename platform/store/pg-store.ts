import pg from 'pg';
import { ROW_PARSERS } from './row-parsers.ts';
import type { Queryable, QueryResult, Store } from './store.ts';
import { READ_STATEMENT_TIMEOUT_MS, StoreReadOnlyError } from './store.ts';

const types = {
  getTypeParser(oid: number, format?: 'text' | 'binary') {
    return (format !== 'binary' && ROW_PARSERS[oid]) || pg.types.getTypeParser(oid, format);
  },
};

export interface PgStoreOptions {
  connectionString: string;
  readOnly?: boolean;
  maxConnections?: number;
  /** statement_timeout of `reads` (READ_STATEMENT_TIMEOUT_MS when absent). */
  readStatementTimeoutMs?: number;
}

/** Connections of the read-model pool: reads are short, and they should not starve commands of connections. */
const READ_POOL_CONNECTIONS = 4;

export function describePgLocation(connectionString: string): string {
  try {
    const url = new URL(connectionString);
    return `postgres://${url.hostname}${url.port ? `:${url.port}` : ''}${url.pathname}`;
  } catch {
    return 'postgres';
  }
}

export function createPgStore(options: PgStoreOptions): Store {
  const readOnly = options.readOnly ?? false;
  const pool = new pg.Pool({
    connectionString: options.connectionString,
    max: options.maxConnections ?? 10,
    types,
    // Belt and braces for pg_readonly: the database itself refuses writes too.
    ...(readOnly ? { options: '-c default_transaction_read_only=on' } : {}),
  });
  const readPool = new pg.Pool({
    connectionString: options.connectionString,
    max: READ_POOL_CONNECTIONS,
    types,
    statement_timeout: options.readStatementTimeoutMs ?? READ_STATEMENT_TIMEOUT_MS,
    ...(readOnly ? { options: '-c default_transaction_read_only=on' } : {}),
  });
  for (const each of [pool, readPool]) {
    each.on('error', () => {
      // An idle client lost its connection; the pool replaces it on next use.
    });
  }

  const run = async <Row>(client: pg.Pool | pg.PoolClient, sql: string, params?: readonly unknown[]): Promise<QueryResult<Row>> => {
    const result = await client.query(sql, params as unknown[] | undefined);
    return { rows: result.rows as Row[], rowCount: result.rowCount ?? 0 };
  };

  return {
    backend: readOnly ? 'pg_readonly' : 'pg',
    location: describePgLocation(options.connectionString),
    readOnly,
    query: (sql, params) => run(pool, sql, params),
    reads: {
      query: (sql, params) => run(readPool, sql, params),
      async exec() {
        throw new Error('the read-model pool runs queries only');
      },
    },
    async exec(sql) {
      if (readOnly) throw new StoreReadOnlyError();
      await pool.query(sql);
    },
    async transaction(fn) {
      if (readOnly) throw new StoreReadOnlyError();
      const client = await pool.connect();
      try {
        await client.query('BEGIN');
        const tx: Queryable = {
          query: (sql, params) => run(client, sql, params),
          exec: async (sql) => {
            await client.query(sql);
          },
        };
        const result = await fn(tx);
        await client.query('COMMIT');
        return result;
      } catch (error) {
        await client.query('ROLLBACK').catch(() => undefined);
        throw error;
      } finally {
        client.release();
      }
    },
    async ping() {
      await pool.query('SELECT 1');
    },
    async close() {
      await Promise.all([pool.end(), readPool.end()]);
    },
  };
}
